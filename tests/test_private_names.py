"""No module of the packages imports another module's private names: what is shared is public."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "edge_runtime", "trainer", "exporter", "serving", "flowstack_cli")


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str) -> list[str]:
    """Each ``import`` of a private module or name in ``source``, as written.

    >>> private_imports("from edge_runtime.kernels import _conv, kernel")
    ['from edge_runtime.kernels import _conv']
    >>> private_imports("import trainer.session._state\\nfrom trainer.api import __all__ as _API")
    ['import trainer.session._state']
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if any(map(is_private, a.name.split(".")))]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if any(map(is_private, (node.module or "").split("."))):
                found.append(f"from {module} import {', '.join(a.name for a in node.names)}")
            else:
                found += [f"from {module} import {a.name}" for a in node.names if is_private(a.name)]
    return found


def is_generated(path: Path) -> bool:
    """protoc's and flatc's output, which we regenerate rather than edit."""
    return path.name.endswith(("_pb2.py", "_pb2_grpc.py")) or path.parent.name == "fb"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_a_private_name(package: str) -> None:
    found = []
    for path in sorted(p for p in (ROOT / package).rglob("*.py") if not is_generated(p)):
        found += [f"{path.relative_to(ROOT)}: {line}" for line in private_imports(path.read_text())]
    assert not found, "private names imported across modules (make them public):\n" + "\n".join(found)


def test_private_imports_are_found() -> None:
    source = "\n".join([
        "from edge_runtime.kernels import _conv, kernel",
        "import trainer.session._state",
        "from edge_runtime.kernels._conv import Window",
        "from trainer.api import __all__ as _API",  # a dunder under a private alias is fine
        "from google.protobuf import descriptor as _descriptor",
    ])
    assert private_imports(source) == [
        "from edge_runtime.kernels import _conv",
        "import trainer.session._state",
        "from edge_runtime.kernels._conv import Window",
    ]
