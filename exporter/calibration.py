"""Calibration samples for full int8 quantization: checked against the model, then run through it.

A calibration array per public input holds samples stacked along axis 0 (the batch axis): it must
have the input's rank, dtype and static dimensions. It is fed in batches of up to
``CALIBRATION_BATCH`` samples (the input's own batch size where that is fixed), and the float
model's range of every activation to be quantized is the min and max over all of them.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

import edge_runtime
from exporter import flow_writer, ir
from exporter.passes.graph_edit import copy_model

CALIBRATION_BATCH = 32


class CalibrationError(ValueError):
    """Calibration samples that do not fit the model; names the input and the file."""


def _where(name: str, sources: Mapping[str, str]) -> str:
    source = sources.get(name)
    return f"calibration samples for input {name!r}" + (f" ({source})" if source else "")


def calibration_batches(model: ir.Model, arrays: Mapping[str, np.ndarray],
                        sources: Mapping[str, str] | None = None) -> list[dict[str, np.ndarray]]:
    """Check ``arrays`` (public input name -> samples along axis 0) against ``model``'s signature
    and split them into feed dicts; ``sources`` (name -> file) only makes errors name the file."""
    sources = sources or {}
    runtime = edge_runtime.load(flow_writer.to_bytes(model))
    specs = {spec.name: spec for spec in runtime.inputs}
    unknown = sorted(set(arrays) - set(specs))
    if unknown:
        where = "; ".join(_where(n, sources) for n in unknown)
        raise CalibrationError(f"{where}: the model has no input named so; its inputs are {sorted(specs)}")
    missing = sorted(set(specs) - set(arrays))
    if missing:
        raise CalibrationError(f"no calibration samples for input(s) {missing}; give one NAME=FILE.npy per input")
    counts = set()
    batch = CALIBRATION_BATCH
    for name, spec in specs.items():
        array = arrays[name]
        if array.dtype != spec.dtype:
            raise CalibrationError(f"{_where(name, sources)}: dtype {array.dtype}, but the input takes {spec.dtype}")
        if array.ndim != len(spec.shape) or array.ndim == 0:
            raise CalibrationError(f"{_where(name, sources)}: shape {list(array.shape)}, but the input is "
                                   f"{_shape_text(spec.shape)} (samples stacked along axis 0)")
        for axis in range(1, array.ndim):
            if spec.shape[axis] not in (-1, array.shape[axis]):
                raise CalibrationError(f"{_where(name, sources)}: shape {list(array.shape)} differs from the input's "
                                       f"{_shape_text(spec.shape)} in dimension {axis}")
        if spec.shape[0] != -1:
            batch = spec.shape[0]
            if array.shape[0] % batch:
                raise CalibrationError(f"{_where(name, sources)}: {array.shape[0]} samples do not fill batches of "
                                       f"the input's fixed batch size {batch}")
        counts.add(array.shape[0])
    if len(counts) != 1 or 0 in counts:
        raise CalibrationError(f"calibration inputs hold different or zero sample counts: "
                               f"{ {n: a.shape[0] for n, a in arrays.items()} }")
    total = counts.pop()
    return [{n: a[start:start + batch] for n, a in arrays.items()} for start in range(0, total, batch)]


def _shape_text(shape) -> str:
    return "[" + ", ".join("?" if d == -1 else str(d) for d in shape) + "]"


def activation_ranges(model: ir.Model, names: list[str], batches: list[Mapping[str, np.ndarray]],
                      ) -> dict[str, tuple[float, float]]:
    """The (min, max) of each value in ``names`` over the float ``model`` run on ``batches``."""
    exposed = copy_model(model)
    exposed.graph.outputs = list(dict.fromkeys(exposed.graph.outputs + names))
    for signature in exposed.signatures.values():
        signature.outputs.update({n: n for n in names if n not in signature.outputs})
    runtime = edge_runtime.load(flow_writer.to_bytes(exposed))
    ranges = {name: (np.inf, -np.inf) for name in names}
    for feeds in batches:
        values = runtime.run(feeds, outputs=names)
        for name in names:
            data = values[name]
            if data.size:
                low, high = ranges[name]
                ranges[name] = (min(low, float(data.min())), max(high, float(data.max())))
    unseen = [name for name, (low, high) in ranges.items() if low > high]
    if unseen:
        raise CalibrationError(f"the calibration samples leave activations {unseen[:5]} empty: no range to quantize")
    return ranges
