"""Loading maps weights instead of reading them: a 100 MB model costs almost no resident memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from exporter import flow_writer, ir
from schemas import dtypes

ROOT = Path(__file__).resolve().parents[2]


def test_loading_a_100mb_model_adds_under_10mb_resident(tmp_path: Path) -> None:
    g = ir.Graph()
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (1, 5000))
    g.values["w"] = ir.Value("w", data=np.ones((5000, 5000), np.float32))  # 100 MB
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes = [ir.Node("MatMul", ["x", "w"], ["y"])]
    path = tmp_path / "big.flow"
    size = flow_writer.write(ir.Model(g), path)
    assert size > 100_000_000
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        import numpy as np, edge_runtime
        from edge_runtime.kernels import registered_kernels
        registered_kernels()
        before = rss()
        model = edge_runtime.load({str(path)!r})
        after = rss()
        y = model.run({{"x": np.ones((1, 5000), np.float32)}})["y"]
        assert float(y[0, 0]) == 5000.0
        print(after - before)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    added = int(result.stdout.strip())
    assert added < 10 * 1024 * 1024, f"loading added {added / 2**20:.1f} MiB resident"
