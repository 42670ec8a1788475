"""The export pipeline every path to a .flow file goes through: optimize, verify, write.

ONNX conversion uses it now; freezing a trained graph uses the same steps, so a converted model
and an exported one are optimized and checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from exporter import flow_writer, ir
from exporter.passes import PassReport, optimize
from exporter.verify import ParityReport, check_parity


@dataclass
class ExportReport:
    path: Path
    size: int
    passes: PassReport | None
    parity: ParityReport | None

    def __str__(self) -> str:
        lines = [f"wrote {self.path} ({self.size:,} bytes)"]
        if self.passes is not None:
            lines.append(str(self.passes))
        if self.parity is not None:
            lines.append(str(self.parity))
        return "\n".join(lines)


def export(
    model: ir.Model,
    destination: str | Path,
    *,
    optimize_graph: bool = True,
    verify: bool = True,
    samples: Mapping[str, np.ndarray] | None = None,
    verbose: bool = False,
) -> ExportReport:
    """Optimize ``model``, check the result runs like the original on the edge runtime, write it.

    A parity failure raises ``exporter.verify.ParityError`` and writes nothing; the file appears
    only complete (temp file, then rename).
    """
    passes = parity = None
    candidate = model
    if optimize_graph:
        candidate, passes = optimize(model, verbose=verbose)
    if verify:
        parity = check_parity(model, candidate, samples)
    size = flow_writer.write(candidate, destination)
    return ExportReport(Path(destination), size, passes, parity)
