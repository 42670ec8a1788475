"""Every docstring example in the packages runs: one test per module that has any.

Modules are found by their text (a ``>>>`` line), not by importing them, so a module whose
examples need an absent optional dependency (CuPy) shows up as skipped rather than missing.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "edge_runtime", "trainer", "exporter", "serving", "flowstack_cli")
OPTIONAL = {"cupy"}  # modules whose absence skips a module's examples instead of failing them


def modules_with_examples() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if any(line.lstrip().startswith(">>>") for line in path.read_text().splitlines()):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in OPTIONAL:
            raise
        pytest.skip(f"{name} needs {exc.name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
    if result.attempted == 0:
        pytest.skip(f"every example in {name} is marked +SKIP")


def test_modules_with_examples_are_found() -> None:
    names = modules_with_examples()
    assert "trainer.session" in names and "schemas.op_table" in names
    assert not any(name.startswith("tests") for name in names)


def test_no_example_is_marked_skip() -> None:
    skipped = [str(path.relative_to(ROOT)) for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
               if "doctest: +SKIP" in path.read_text()]
    assert skipped == [], f"docstring examples that never run: {skipped}"
