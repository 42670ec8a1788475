"""Keep an imported model's quantized weights quantized in the .flow file.

Converting an ONNX model quantized by onnxruntime (or exported with int8/int4 weights) folds its
weight ``DequantizeLinear`` nodes into float32 constants (``exporter.onnx_dequantize``), so the
optimization passes can transpose, merge and fuse them like any float weight. Written as they
are, those constants make the .flow file 4x (int8) or 8x (int4) the size of the model the user
brought. So the folds record the integer grids they dequantized (``WeightGrid``), and once the
model is optimized every float constant that still lies *exactly* on one of those grids, along
one of its axes, is stored back as integers read through ``DequantizeLinear``: the edge runtime
folds those once at load (``edge_runtime.quantized``), with the same kernel that checked the
values here, so the model computes bit for bit what it computed in float. A constant the passes
changed (a batch norm folded into a convolution, merged projections) stays float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from edge_runtime.kernels import get_kernel
from exporter import ir
from exporter.passes.graph_edit import constant, copy_model
from exporter.quantize import METADATA_KEY, store_quantized
from schemas import get_schema

SCHEME = "imported"  # the quantization metadata `flowstack inspect` shows
# Weights smaller than this stay float: a DequantizeLinear node and its scale cost more than they save.
MIN_STORED_ELEMENTS = 1024
SAMPLE = 64  # elements checked on every candidate grid before the whole tensor


@dataclass(frozen=True)
class WeightGrid:
    """The grid of one dequantized weight: ``real = (q - zero_point) * scale``, one scale per
    channel (a 1-D ``scale``) or for the whole tensor (a scalar)."""

    scale: np.ndarray  # float32, () or (channels,)
    zero_point: np.ndarray  # the quantized integer dtype, shaped as ``scale``

    @classmethod
    def of(cls, scale: np.ndarray, zero_point: np.ndarray | None, quantized: np.ndarray) -> WeightGrid | None:
        """The grid a dequantization of ``quantized`` used, or None where it is not a plain
        per-tensor or per-channel one (blocked scales) or the weight is too small to store."""
        scale = np.asarray(scale)
        if not is_integer(quantized.dtype):
            return None
        if quantized.size < MIN_STORED_ELEMENTS or scale.dtype != np.float32 or scale.ndim > 1:
            return None
        scale = scale.reshape(()) if scale.size == 1 else scale
        zero = np.zeros((), quantized.dtype) if zero_point is None else np.asarray(zero_point)
        if zero.dtype != quantized.dtype or zero.size not in (1, scale.size):
            return None
        return cls(scale, np.broadcast_to(zero.reshape(()) if zero.size == 1 else zero.reshape(scale.shape),
                                          scale.shape).copy())

    def key(self) -> tuple:
        return self.scale.tobytes(), self.zero_point.tobytes(), self.zero_point.dtype.str, self.scale.shape


SUB_BYTE_INTEGERS = {"int4", "uint4", "int2", "uint2"}  # ml_dtypes' names (their numpy kind is "V")


def is_integer(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.integer) or np.dtype(dtype).name in SUB_BYTE_INTEGERS


def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    try:
        info = np.iinfo(dtype)
    except ValueError:  # ml_dtypes' int4/uint4/int2: the grid came from a model that used them
        import ml_dtypes

        info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)


def _dequantize(q: np.ndarray, grid: WeightGrid, axis: int) -> np.ndarray:
    schema = get_schema("DequantizeLinear")
    attrs = schema.resolve_attrs({"axis": axis})
    return np.asarray(get_kernel("DequantizeLinear")(q, grid.scale, grid.zero_point, xp=np, **attrs))


def _on_axis(values: np.ndarray, grid: WeightGrid, axis: int, flat: np.ndarray | None = None) -> np.ndarray | None:
    """The integers ``values`` are on ``grid`` along ``axis`` (rounded; None outside its range).
    ``flat``: positions into ``values.reshape(-1)`` to look at only those."""
    if grid.scale.ndim == 0:
        scale, zero = grid.scale.astype(np.float64), grid.zero_point.astype(np.float64)
    else:
        channel = (np.unravel_index(flat, values.shape)[axis] if flat is not None
                   else np.arange(values.shape[axis]).reshape([-1 if i == axis else 1 for i in range(values.ndim)]))
        scale, zero = grid.scale.astype(np.float64)[channel], grid.zero_point.astype(np.float64)[channel]
    picked = values.reshape(-1)[flat] if flat is not None else values
    q = np.rint(picked.astype(np.float64) / scale) + zero
    low, high = _integer_range(grid.zero_point.dtype)
    if not np.isfinite(q).all() or q.min() < low or q.max() > high:
        return None
    return q


def on_grid(values: np.ndarray, grid: WeightGrid) -> tuple[np.ndarray, int] | None:
    """(integers, axis) such that dequantizing them on ``grid`` gives ``values`` bit for bit, or None."""
    axes = [1 if values.ndim > 1 else 0] if grid.scale.ndim == 0 else \
        [a for a in range(values.ndim) if values.shape[a] == grid.scale.size]
    sample = np.linspace(0, values.size - 1, min(SAMPLE, values.size)).astype(np.int64)
    for axis in axes:
        q = _on_axis(values, grid, axis, sample)
        if q is None or not np.array_equal(q, np.rint(q)):
            continue
        q = _on_axis(values, grid, axis)
        if q is None:
            continue
        stored = q.astype(grid.zero_point.dtype)
        if np.array_equal(_dequantize(stored, grid, axis), values):
            return stored, axis
    return None


def _row_on(row: np.ndarray, grid: WeightGrid) -> bool:
    """Whether the 1-D ``row`` lies exactly on the per-tensor ``grid`` (float32 arithmetic)."""
    for part in (row[:8], row):
        q = _on_axis(part, grid, 0)
        if q is None:
            return False
        back = (q.astype(np.float32) - grid.zero_point.astype(np.float32)) * grid.scale
        if not np.array_equal(back, part):
            return False
    return True


def on_channel_grids(values: np.ndarray, grids: Sequence[WeightGrid]) -> tuple[np.ndarray, int, WeightGrid] | None:
    """(integers, axis, grid) for a weight whose channels each lie on one of the per-tensor
    ``grids`` (projections the passes merged into one, each quantized on its own), or None."""
    scalars = [grid for grid in grids if grid.scale.ndim == 0]
    if not scalars or values.ndim < 2:
        return None
    for axis in range(values.ndim):
        rows = np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1)
        picked: list[WeightGrid] = []
        for row in rows:
            order = picked[-1:] + scalars
            grid = next((g for g in order if _row_on(row, g)), None)
            if grid is None:
                break
            picked.append(grid)
        if len(picked) < len(rows) or len({g.zero_point.dtype for g in picked}) != 1:
            continue
        merged = WeightGrid(np.array([g.scale for g in picked], np.float32),
                            np.array([g.zero_point for g in picked], picked[0].zero_point.dtype))
        hit = on_grid(values, merged)
        if hit is not None:
            return hit + (merged,)
    return None


def dequantized_weight_grids(graph: ir.Graph) -> list[WeightGrid]:
    """The grids of the constant integer weights ``graph``'s ``DequantizeLinear`` nodes read."""
    grids = []
    for node in graph.nodes:
        if node.op_type != "DequantizeLinear" or node.domain or node.attrs.get("block_size"):
            continue
        args = [constant(graph, name) if name else None for name in node.inputs]
        if args[0] is None or args[1] is None or (len(args) > 2 and node.inputs[2] and args[2] is None):
            continue
        grid = WeightGrid.of(args[1], args[2] if len(args) > 2 else None, args[0])
        if grid is not None:
            grids.append(grid)
    return grids


def store_on_grids(model: ir.Model, grids: Sequence[WeightGrid]) -> tuple[ir.Model, int]:
    """``model`` with each float32 constant that lies exactly on one of ``grids`` stored as its
    integers read through ``DequantizeLinear``; returns it and how many were stored."""
    unique = list({grid.key(): grid for grid in grids}.values())
    graph = model.graph
    weights = [name for name, value in graph.values.items()
               if value.data is not None and value.data.dtype == np.float32 and value.data.size >= MIN_STORED_ELEMENTS
               and name not in graph.outputs]
    if not unique or not weights:
        return model, 0
    model = copy_model(model)
    stored = 0
    for name in weights:
        values = model.graph.values[name].data
        found = next((hit + (grid,) for grid in unique if (hit := on_grid(values, grid)) is not None), None)
        found = found or on_channel_grids(values, unique)
        if found is None:
            continue
        q, axis, grid = found
        store_quantized(model.graph, name, q, grid.scale, grid.zero_point, axis)
        stored += 1
    if stored:
        model.metadata[METADATA_KEY] = SCHEME
    return model, stored
