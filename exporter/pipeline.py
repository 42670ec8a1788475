"""The export pipeline every path to a .flow file goes through: optimize, verify, write.

ONNX conversion uses it now; freezing a trained graph uses the same steps, so a converted model
and an exported one are optimized and checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from exporter import flow_writer, ir
from exporter.accuracy import AccuracyReport, measure_accuracy
from exporter.passes import PassReport, optimize
from exporter.quantize import QuantizationRequest, QuantizationSummary, quantize_request
from exporter.quantized_storage import WeightGrid, store_on_grids
from exporter.verify import ParityReport, check_parity, sample_inputs


@dataclass
class ExportReport:
    path: Path
    size: int
    passes: PassReport | None
    parity: ParityReport | None
    quantization: QuantizationSummary | None = None
    accuracy: AccuracyReport | None = None
    folded_quantization: AccuracyReport | None = None  # an onnxruntime-quantized import, folded to float
    stored_quantized: int = 0  # of its weights, those written back on their imported integer grids

    def __str__(self) -> str:
        lines = [self.headline()]
        if self.passes is not None:
            lines.append(str(self.passes))
        lines.extend(self.checks())
        return "\n".join(lines)

    def headline(self) -> str:
        line = f"wrote {self.path} ({self.size:,} bytes)"
        if self.stored_quantized:
            line += f"; {self.stored_quantized} weights kept on their imported integer grids (dequantized at load)"
        return line

    def checks(self) -> list[str]:
        """What was checked and what quantization cost, one report a line (or a few)."""
        parts = (self.folded_quantization, self.parity, self.quantization, self.accuracy)
        return [str(part) for part in parts if part is not None]


def export(
    model: ir.Model,
    destination: str | Path,
    *,
    optimize_graph: bool = True,
    verify: bool = True,
    samples: Mapping[str, np.ndarray] | None = None,
    verbose: bool = False,
    quantization: QuantizationRequest | None = None,
    weight_grids: Sequence[WeightGrid] = (),
) -> ExportReport:
    """Optimize ``model``, check the result runs like the original on the edge runtime, write it.

    A parity failure raises ``exporter.verify.ParityError`` and writes nothing; the file appears
    only complete (temp file, then rename). With ``quantization`` the optimized, checked model is
    then quantized (``exporter.quantize``) and, with ``verify``, its accuracy drop against the
    float model measured on the samples and calibration samples. Without it, float weights
    lying exactly on one of ``weight_grids`` (an imported quantized model's) are stored back as
    integers: the model computes the same values from a file the size the user brought.
    """
    passes = parity = summary = accuracy = None
    candidate = model
    if optimize_graph:
        candidate, passes = optimize(model, verbose=verbose)
    if verify:
        parity = check_parity(model, candidate, samples)
    if quantization is not None:
        float_model = candidate
        candidate, summary, batches = quantize_request(float_model, quantization)
        if verify:
            given = [samples] if isinstance(samples, Mapping) else list(samples or [])
            accuracy = measure_accuracy(float_model, candidate, given + batches or [sample_inputs(float_model)],
                                        f"{quantization.scheme} against the float model")
    stored = 0
    if quantization is None and weight_grids:
        candidate, stored = store_on_grids(candidate, weight_grids)
    size = flow_writer.write(candidate, destination)
    return ExportReport(Path(destination), size, passes, parity, summary, accuracy, stored_quantized=stored)
