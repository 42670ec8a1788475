"""The accuracy a quantized model gives up: its outputs set against the float model's, on the edge runtime.

Quantization changes the numbers on purpose, so this is a measurement, not a pass/fail parity
check: per output, the largest absolute difference, the error's RMS relative to the output's RMS,
and, for outputs with a class axis (the last, longer than 1), how often the arg-max agrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

import edge_runtime
from exporter import flow_writer, ir


@dataclass
class OutputAccuracy:
    name: str
    max_abs: float = 0.0
    squared_error: float = 0.0
    squared_reference: float = 0.0
    agreeing: int = 0
    ranked: int = 0  # rows with a class axis compared for top-1

    @property
    def relative_rms(self) -> float:
        return float(np.sqrt(self.squared_error / self.squared_reference)) if self.squared_reference else 0.0

    @property
    def top1_agreement(self) -> float | None:
        return self.agreeing / self.ranked if self.ranked else None

    def add(self, reference: np.ndarray, quantized: np.ndarray) -> None:
        want, got = np.asarray(reference, np.float64), np.asarray(quantized, np.float64)
        if want.size == 0:
            return
        self.max_abs = max(self.max_abs, float(np.max(np.abs(want - got))))
        self.squared_error += float(np.sum(np.square(want - got)))
        self.squared_reference += float(np.sum(np.square(want)))
        if want.ndim >= 2 and want.shape[-1] > 1:
            self.agreeing += int(np.sum(np.argmax(want, axis=-1) == np.argmax(got, axis=-1)))
            self.ranked += want.size // want.shape[-1]


@dataclass
class AccuracyReport:
    title: str  # what was measured against what
    samples: int = 0
    outputs: dict[str, OutputAccuracy] = field(default_factory=dict)
    not_measured: str | None = None  # why the comparison could not run

    def __str__(self) -> str:
        if self.not_measured is not None:
            return f"accuracy: {self.title}: not measured ({self.not_measured})"
        lines = [f"accuracy: {self.title}, {self.samples} batch(es):"]
        for out in self.outputs.values():
            line = f"  {out.name}: max abs diff {out.max_abs:.3g}, relative RMS error {out.relative_rms:.3g}"
            if out.top1_agreement is not None:
                line += f", top-1 agreement {out.top1_agreement:.2%} of {out.ranked}"
            lines.append(line)
        return "\n".join(lines)


def measure_accuracy(reference: ir.Model, quantized: ir.Model, samples: Iterable[Mapping[str, np.ndarray]],
                     title: str) -> AccuracyReport:
    """Run both models on every feed dict of ``samples`` and accumulate the differences."""
    ref_runtime = edge_runtime.load(flow_writer.to_bytes(reference))
    quant_runtime = edge_runtime.load(flow_writer.to_bytes(quantized))
    report = AccuracyReport(title)
    for feeds in samples:
        expected, actual = ref_runtime.run(feeds), quant_runtime.run(feeds)
        for name, want in expected.items():
            if np.asarray(want).dtype.kind in "fc":
                report.outputs.setdefault(name, OutputAccuracy(name)).add(want, actual[name])
        report.samples += 1
    return report
