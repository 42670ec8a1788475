"""One op taxonomy in four places: an op's schema, forward kernel, gradient rule and stateful or
helper kernel sit in files of the same family name (DESIGN.md, "the four places")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import pytest

import trainer  # noqa: F401  (registers the trainer's kernels and stateful kernels)
from edge_runtime.kernels.registry import kernel_modules
from schemas import all_schemas
from schemas.op_table import OpTable, family_of, registering_module
from schemas.ops import FAMILIES
from schemas.registry import qualified_name
from trainer.gradients.registry import gradient_modules
from trainer.kernels.registry import stateful_kernel_modules

ROOT = Path(__file__).resolve().parent.parent
Key = tuple[str, str]

# Where each place's modules live: an entry registered from elsewhere is misfiled too.
PACKAGES = {
    "schema": ("schemas.ops",),
    "kernel": ("edge_runtime.kernels", "trainer.kernels"),
    "stateful kernel": ("trainer.kernels",),
    "gradient": ("trainer.gradients",),
}
# Modules of those packages that register nothing and so belong to no family.
NOT_FAMILIES = {"__init__", "registry", "families", "helpers", "rules", "resampling", "sliding_windows", "stride_phases", "pool_phases",
                "tap_products", "phase_columns", "window_shifts", "row_moments",
                "prepared_attributes", "tree_walk", "element_casts"}


def misfiled(places: Mapping[str, Mapping[Key, str]]) -> list[str]:
    """Each op whose places disagree with its schema's family, or sit outside their package.

    ``places`` maps a place ("schema", "kernel", "stateful kernel", "gradient") to the module that
    registered each op's entry there.
    """
    problems = []
    for key, schema_module in sorted(places["schema"].items()):
        family = family_of(schema_module)
        for place, modules in places.items():
            module = modules.get(key)
            if module is None:
                continue
            package = module.rpartition(".")[0]
            if package not in PACKAGES[place] or family_of(module) != family:
                problems.append(f"{qualified_name(key[1], key[0])}: {place} in {module}, "
                                f"but its schema is in {schema_module}")
    return problems


def registered_places() -> dict[str, dict[Key, str]]:
    return {
        # Ops declared by tests (fixtures) are not part of the taxonomy.
        "schema": {s.key: s.module for s in all_schemas() if s.module.startswith("schemas.ops.")},
        "kernel": kernel_modules(),
        "stateful kernel": stateful_kernel_modules(),
        "gradient": gradient_modules(),
    }


def test_every_op_has_its_four_places_in_one_family() -> None:
    problems = misfiled(registered_places())
    assert not problems, "ops filed under another family than their schema's:\n" + "\n".join(problems)


@pytest.mark.parametrize("place, module", [
    ("kernel", "edge_runtime.kernels.shape"),
    ("gradient", "trainer.gradients.math"),
    ("stateful kernel", "trainer.kernels.nn"),
    ("gradient", "trainer.layers"),
])
def test_a_planted_misfiling_is_reported(place: str, module: str) -> None:
    places = registered_places()
    key = ("", "Conv") if place != "stateful kernel" else ("flowstack", "Variable")
    assert key in places["schema"] and module != places[place].get(key)
    planted = {p: dict(modules) for p, modules in places.items()}
    planted[place][key] = module
    problems = misfiled(planted)
    schema_module = places["schema"][key]
    assert problems == [f"{qualified_name(key[1], key[0])}: {place} in {module}, but its schema is in {schema_module}"]


def test_each_family_module_is_a_listed_family() -> None:
    """A module under a name not in FAMILIES would never be imported, its ops never registered."""
    unlisted = []
    for folder in ("schemas/ops", "edge_runtime/kernels", "trainer/gradients", "trainer/kernels"):
        for path in sorted((ROOT / folder).glob("*.py")):
            name = path.stem
            if name not in FAMILIES and name not in NOT_FAMILIES and not name.startswith("_"):
                unlisted.append(f"{folder}/{path.name}")
    assert not unlisted, f"modules named after no family in schemas.ops.FAMILIES: {unlisted}"


def test_each_op_is_declared_by_name_in_its_family_file() -> None:
    """``op("Name", ...)`` in schemas/ops/<family>.py, so grep finds every op (no loops over names)."""
    missing = []
    for schema in all_schemas():
        if not schema.module.startswith("schemas.ops."):
            continue
        source = (ROOT / "schemas" / "ops" / f"{family_of(schema.module)}.py").read_text()
        if not re.search(rf'\bop\(\s*"{schema.name}"', source):
            missing.append(f"{qualified_name(schema.name, schema.domain)} in {schema.module}")
    assert not missing, f"ops not declared by a literal op(\"Name\", ...): {missing}"


def test_a_kernel_registered_from_another_family_file_is_reported() -> None:
    """Through the real attribution: a registry filled by code that runs as edge_runtime/kernels/shape.py."""
    table: OpTable = OpTable("kernel", missing=lambda name, domain: KeyError(name))

    def kernel(name: str):
        module = registering_module()
        return lambda fn: table.add(name, "", fn, module=module)

    exec('kernel("Conv")(lambda x, w, *, xp: x)', {"__name__": "edge_runtime.kernels.shape", "kernel": kernel})
    places = registered_places()
    places["kernel"] = {**places["kernel"], **table.modules()}
    assert table.modules() == {("", "Conv"): "edge_runtime.kernels.shape"}
    assert misfiled(places) == ["Conv: kernel in edge_runtime.kernels.shape, but its schema is in schemas.ops.nn"]
