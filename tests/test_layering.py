"""The import layering of DESIGN.md section 1, enforced."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.import_guard import edge_only_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "edge_runtime", "trainer", "exporter", "serving")
ALLOWED = {
    "schemas": set(),
    "edge_runtime": {"schemas"},
    "trainer": {"schemas", "edge_runtime"},
    "exporter": {"schemas", "edge_runtime", "trainer"},
    "serving": {"schemas", "edge_runtime"},
}
NEVER_IMPORTED = ("examples", "benchmarks", "flowstack_cli", "tests", "scripts")


def project_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(n.split(".")[0] for n in names)
    return found & (set(PACKAGES) | set(NEVER_IMPORTED))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_lower_layers(package: str) -> None:
    violations = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = project_imports(path) - ALLOWED[package] - {package}
        if bad:
            violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, f"{package} may import only {sorted(ALLOWED[package])}:\n" + "\n".join(violations)


def test_edge_runtime_runs_with_only_numpy_and_flatbuffers(tmp_path: Path) -> None:
    """Import and run the edge runtime in a process where any third-party import but those two fails."""
    from onnx import TensorProto, helper, numpy_helper

    from exporter.onnx_import import convert_onnx

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        [w],
    )
    path = tmp_path / "model.flow"
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    script = edge_only_imports() + textwrap.dedent(
        f"""
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        import edge_runtime
        from edge_runtime.kernels import registered_kernels
        assert len(registered_kernels()) > 0
        model = edge_runtime.load({str(path)!r})
        out = model.run({{"x": np.ones((2, 4), np.float32)}})["y"]
        assert out.tolist() == [[18.0, 22.0, 26.0]] * 2, out
        print("ok", len(registered_kernels()))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
