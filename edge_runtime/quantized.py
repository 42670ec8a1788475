"""Quantized weights at load: check their scales, and dequantize them once or on every call.

A quantized .flow file (``exporter.quantize``) stores weights as int8 or float16 constants read
through ``DequantizeLinear`` or ``Cast`` nodes. ``dequantize="at_load"`` (the default) evaluates
those nodes once and keeps the float32 results as constants: runs are as fast as the float model,
and the float weights take their full size in memory. ``"per_call"`` leaves the nodes in the plan:
only the small stored weights stay resident (mapped from the file) and each run dequantizes
them again, trading speed for memory.
"""

from __future__ import annotations

import dataclasses
import mmap
from typing import Callable

import numpy as np

from edge_runtime.format import ModelDef, ModelFormatError, OperatorDef, SubGraphDef, TensorDef
from edge_runtime.kernels import get_kernel
from schemas import dtypes, get_schema

AT_LOAD, PER_CALL = "at_load", "per_call"
DEQUANTIZE_MODES = (AT_LOAD, PER_CALL)

# Nodes that turn a stored weight into float32: folded at load when their inputs are constants.
_WEIGHT_READS = {("", "DequantizeLinear"), ("", "Cast")}
# Where each quantization op reads its scale.
_SCALE_INPUT = {("", "DequantizeLinear"): 1, ("", "QuantizeLinear"): 1}


def _check_scale(scale: np.ndarray, what: str, source: str) -> None:
    values = np.asarray(scale, dtype=np.float64)
    bad = ~np.isfinite(values) | (values == 0)
    if bad.any():
        index = int(np.flatnonzero(bad.reshape(-1))[0])
        value = float(values.reshape(-1)[index])
        raise ModelFormatError(f"{source}: {what}: scale {value} (element {index}) is "
                               f"{'zero' if value == 0 else 'not finite'}; a quantized tensor needs finite, "
                               f"non-zero scales")


def check_quantization(model: ModelDef, source: str = "<bytes>") -> None:
    """Refuse a file whose quantized tensors (a tensor's quantization record, or the constant
    scale of a (De)QuantizeLinear node) have a zero or non-finite scale, naming the tensor."""
    for index, graph in enumerate(model.subgraphs):
        for tensor in graph.tensors:
            if tensor.quantization is not None:
                _check_scale(tensor.quantization.scale, f"subgraph {index}, tensor {tensor.name!r}", source)
        for op in graph.operators:
            position = _SCALE_INPUT.get((op.domain, op.op_type))
            if position is None or len(op.inputs) <= position or op.inputs[position] < 0:
                continue
            scale = graph.tensors[op.inputs[position]]
            if scale.data is not None:
                _check_scale(scale.data, f"subgraph {index}, {op.op_type} {op.name!r}, scale tensor {scale.name!r} "
                             f"of {graph.tensors[op.inputs[0]].name!r}", source)


def _foldable(graph: SubGraphDef, op: OperatorDef) -> bool:
    if (op.domain, op.op_type) not in _WEIGHT_READS or len(op.outputs) != 1:
        return False
    if any(i < 0 or graph.tensors[i].data is None for i in op.inputs):
        return False
    out = graph.tensors[op.outputs[0]]
    return out.dtype == dtypes.FLOAT and op.outputs[0] not in graph.outputs


def _fold(graph: SubGraphDef) -> SubGraphDef:
    tensors = list(graph.tensors)
    kept: list[OperatorDef] = []
    folded_inputs: set[int] = set()
    for op in graph.operators:
        if not _foldable(graph, op):
            kept.append(op)
            continue
        schema = get_schema(op.op_type, op.domain)
        args = [tensors[i].data for i in op.inputs]
        args += [None] * ((schema.max_inputs or len(args)) - len(args))
        value = np.asarray(get_kernel(op.op_type, op.domain)(*args, xp=np, **schema.resolve_attrs(op.attrs)))
        value.flags.writeable = False
        out = op.outputs[0]
        tensors[out] = dataclasses.replace(tensors[out], data=value, shape=tuple(value.shape))
        folded_inputs.update(op.inputs)
    # Stored weights only the folded nodes read are dropped, so their pages are never touched again.
    still_read = {i for op in kept for i in (*op.inputs, *op.implicit_inputs)} | set(graph.outputs)
    for i in folded_inputs - still_read:
        tensors[i] = dataclasses.replace(tensors[i], data=None)
    return dataclasses.replace(graph, tensors=tensors, operators=kept)


def dequantize_at_load(model: ModelDef) -> ModelDef:
    """``model`` with every weight-reading ``DequantizeLinear``/``Cast`` of constants evaluated
    (``model`` itself where there is none)."""
    if not any(_foldable(graph, op) for graph in model.subgraphs for op in graph.operators):
        return model
    return dataclasses.replace(model, subgraphs=[_fold(graph) for graph in model.subgraphs])


def release_pages(mapping: mmap.mmap | None) -> None:
    """Drop the file's pages from this process's resident set once the stored weights have been
    dequantized (the float copies are what runs read; anything still viewed is read back on use)."""
    if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)


_PREPARE: dict[str, Callable[[ModelDef], ModelDef]] = {
    AT_LOAD: dequantize_at_load,
    PER_CALL: lambda model: model,
}


def prepare(model: ModelDef, dequantize: str, source: str = "<bytes>") -> ModelDef:
    """Check ``model``'s quantized tensors and apply the ``dequantize`` mode (``DEQUANTIZE_MODES``)."""
    if dequantize not in _PREPARE:
        raise ValueError(f"dequantize={dequantize!r}: choose one of {list(DEQUANTIZE_MODES)}")
    check_quantization(model, source)
    return _PREPARE[dequantize](model)
