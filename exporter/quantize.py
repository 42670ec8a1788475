"""Post-training quantization of an optimized model, as the TFLite converter does it.

Three schemes, each a graph rewrite that keeps the model a plain ONNX-style graph (so ``to_onnx``
writes it as a QDQ model onnxruntime runs, and the edge runtime needs no integer kernels):

- ``float16``: every float32 weight is stored as float16 and read through ``Cast(to=FLOAT)``.
- ``dynamic-int8``: the weights of convolutions, matrix products and embedding lookups are stored
  as int8, symmetric, one scale per output channel (per row of an embedding table), and read
  through ``DequantizeLinear``; activations stay float (TFLite's dynamic-range quantization).
- ``int8``: as ``dynamic-int8``, and every activation entering one of those ops is rounded to an
  int8 grid (``QuantizeLinear`` -> ``DequantizeLinear``) whose range the float model showed on
  calibration samples: the numbers an int8 kernel would see.

The edge runtime folds the weight ``Cast``/``DequantizeLinear`` nodes into float constants once at
load (or runs them per call, ``load(path, dequantize="per_call")``), so a quantized file is 2x
(float16) or about 4x (int8) smaller on disk and computes in float32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from exporter import ir
from exporter.calibration import activation_ranges, calibration_batches
from exporter.passes.graph_edit import add_constant, copy_model, fresh_name
from schemas import dtypes
from schemas.ops.fused import DOMAIN

METADATA_KEY = "quantization"

# float16: float32 constants smaller than this stay float32 (scalars, epsilons, small biases cost
# nothing to keep, and a Cast each would cost more than it saves).
MIN_FLOAT16_ELEMENTS = 16

INT8_MIN, INT8_MAX = -128, 127


def _gemm_axis(node: ir.Node) -> int:
    return 0 if node.attrs.get("transB", 0) else 1


def _axis(value: int) -> Callable[[ir.Node], int]:
    return lambda node: value


def _projection_axis(node: ir.Node) -> int:
    """SqueezeExciteConv's projection: planar (M, C, 1...), channels-last (C, M)."""
    return -1 if node.attrs.get("channels_last") else 0


# Ops whose constant inputs are weights worth int8: (domain, op) -> input index -> the axis that
# indexes output channels (a function of the node, for Gemm's transB). Conv-family weights are
# (M, ...) in every layout the passes write, MatMul's B is (K, N), an embedding table is per row.
INT8_WEIGHTS: dict[tuple[str, str], dict[int, Callable[[ir.Node], int]]] = {
    ("", "Conv"): {1: _axis(0)},
    ("", "ConvTranspose"): {1: _axis(1)},
    ("", "MatMul"): {1: _axis(-1)},
    ("", "Gemm"): {1: _gemm_axis},
    ("", "Gather"): {0: _axis(0)},
    (DOMAIN, "FusedConv"): {1: _axis(0)},
    (DOMAIN, "FusedGemm"): {1: _gemm_axis},
    (DOMAIN, "FusedConvMaxPool"): {1: _axis(0)},
    (DOMAIN, "ChannelsLastConv"): {1: _axis(0)},
    (DOMAIN, "FusedConvPointwise"): {1: _axis(0), 3: _axis(0)},
    (DOMAIN, "FusedPointwiseConv"): {1: _axis(0), 3: _axis(0)},
    (DOMAIN, "SqueezeExciteConv"): {1: _axis(0), 3: _axis(0), 5: _projection_axis},
    (DOMAIN, "FusedMatMul"): {1: _axis(-1)},
}
# The activation input of each weighted op, quantized by the full int8 scheme.
ACTIVATION_INPUT = 0
_LOOKUPS = {("", "Gather")}  # their input 0 is the table, input 1 integer indices


class QuantizationError(ValueError):
    """A model or calibration set that cannot be quantized as asked; names what and where."""


@dataclass(frozen=True)
class QuantizationRequest:
    """What ``--quantize`` asks of the export pipeline: the scheme, and for ``int8`` the
    calibration samples per public input (``sources`` names their files in error messages)."""

    scheme: str
    calibration: Mapping[str, np.ndarray] | None = None
    sources: Mapping[str, str] | None = None

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise QuantizationError(f"unknown quantization scheme {self.scheme!r}; choose one of {sorted(SCHEMES)}")


@dataclass
class QuantizationSummary:
    scheme: str
    weights: list[str] = field(default_factory=list)  # the constants stored quantized
    activations: list[str] = field(default_factory=list)  # the values given int8 ranges
    bytes_before: int = 0
    bytes_after: int = 0

    def __str__(self) -> str:
        ratio = self.bytes_before / self.bytes_after if self.bytes_after else 0.0
        line = (f"quantized {self.scheme}: {len(self.weights)} weights, {self.bytes_before:,} -> "
                f"{self.bytes_after:,} bytes ({ratio:.2f}x smaller)")
        if self.activations:
            line += f", {len(self.activations)} activations on calibrated int8 ranges"
        return line


def _float_weights(graph: ir.Graph) -> dict[str, np.ndarray]:
    return {n: d for n, d in graph.constants().items() if d.dtype == np.float32}


def _readers(graph: ir.Graph) -> dict[str, list[tuple[ir.Node, int]]]:
    uses: dict[str, list[tuple[ir.Node, int]]] = {}
    for node in graph.nodes:
        for index, name in enumerate(node.inputs):
            if name:
                uses.setdefault(name, []).append((node, index))
    return uses


def _channel_axes(graph: ir.Graph, weights: Mapping[str, np.ndarray]) -> dict[str, int]:
    """The weights every reader of which takes them as a weight, each with its output-channel
    axis (made non-negative); a weight read two ways is left float."""
    axes: dict[str, int] = {}
    for name, uses in _readers(graph).items():
        if name not in weights or weights[name].ndim == 0:
            continue
        found = set()
        for node, index in uses:
            rule = INT8_WEIGHTS.get((node.domain, node.op_type), {}).get(index)
            found.add(None if rule is None else rule(node) % weights[name].ndim)
        if len(found) == 1 and None not in found:
            axes[name] = found.pop()
    return axes


def quantize_per_channel(weight: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 along ``axis``: ``(q, scale)`` with ``weight ~ q * scale`` channel by
    channel; an all-zero channel gets scale 1 (a zero scale would not dequantize)."""
    others = tuple(a for a in range(weight.ndim) if a != axis)
    peak = np.max(np.abs(weight), axis=others) if others else np.abs(weight)
    scale = np.where(peak > 0, peak / INT8_MAX, 1.0).astype(np.float32)
    shape = [1] * weight.ndim
    shape[axis] = scale.size
    q = np.clip(np.rint(weight / scale.reshape(shape)), -INT8_MAX, INT8_MAX).astype(np.int8)
    return q, scale


def activation_params(low: float, high: float) -> tuple[np.float32, np.int8]:
    """Asymmetric int8 scale and zero point for the range [low, high] (widened to hold 0, so
    that zero padding stays exact)."""
    low, high = min(low, 0.0), max(high, 0.0)
    if not (np.isfinite(low) and np.isfinite(high)):
        raise QuantizationError(f"calibration range [{low}, {high}] is not finite")
    scale = (high - low) / (INT8_MAX - INT8_MIN) if high > low else 1.0
    zero_point = int(np.clip(np.rint(INT8_MIN - low / scale), INT8_MIN, INT8_MAX))
    return np.float32(scale), np.int8(zero_point)


def _read_through(graph: ir.Graph, name: str, op_type: str, inputs: list[str], attrs: dict) -> None:
    """Replace the constant ``name`` by ``op_type(*inputs)`` producing a value of the same name."""
    value = graph.values[name]
    graph.values[name] = ir.Value(name, dtypes.FLOAT, tuple(value.data.shape))
    # Just before its first reader: run per call, each weight is float only while its op needs it.
    first = next((i for i, node in enumerate(graph.nodes) if name in node.inputs), 0)
    graph.nodes.insert(first, ir.Node(op_type, inputs, [name], attrs, name=f"{name}/{op_type}"))


def _store_float16(graph: ir.Graph, name: str, weight: np.ndarray, summary: QuantizationSummary) -> None:
    stored = add_constant(graph, f"{name}/float16", weight.astype(np.float16))
    _read_through(graph, name, "Cast", [stored], {"to": dtypes.FLOAT})
    summary.weights.append(name)


def store_quantized(graph: ir.Graph, name: str, q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray,
                    axis: int) -> None:
    """Replace the float constant ``name`` by the integers ``q`` read through ``DequantizeLinear``."""
    inputs = [add_constant(graph, f"{name}/{q.dtype.name}", q), add_constant(graph, f"{name}/scale", scale),
              add_constant(graph, f"{name}/zero_point", zero_point)]
    _read_through(graph, name, "DequantizeLinear", inputs, {"axis": axis})


def _store_int8(graph: ir.Graph, name: str, weight: np.ndarray, axis: int, summary: QuantizationSummary) -> None:
    q, scale = quantize_per_channel(weight, axis)
    store_quantized(graph, name, q, scale, np.zeros(scale.shape, np.int8), axis)
    summary.weights.append(name)


def _activations_to_quantize(graph: ir.Graph) -> list[str]:
    """The float activation each weighted op reads (not a constant, not an embedding's indices)."""
    names = []
    for node in graph.nodes:
        key = (node.domain, node.op_type)
        if key not in INT8_WEIGHTS or key in _LOOKUPS or len(node.inputs) <= ACTIVATION_INPUT:
            continue
        name = node.inputs[ACTIVATION_INPUT]
        value = graph.values.get(name)
        if name and (value is None or value.data is None) and name not in names:
            names.append(name)
    return names


def _insert_fake_quant(graph: ir.Graph, name: str, low: float, high: float) -> None:
    """Route every reader of ``name`` through QuantizeLinear -> DequantizeLinear on [low, high]."""
    scale, zero_point = activation_params(low, high)
    scale_name = add_constant(graph, f"{name}/act_scale", np.asarray(scale, np.float32))
    zp_name = add_constant(graph, f"{name}/act_zero_point", np.asarray(zero_point, np.int8))
    quantized = fresh_name(graph, f"{name}/int8")
    restored = fresh_name(graph, f"{name}/dequantized")
    graph.values[quantized] = ir.Value(quantized, dtypes.INT8, graph.values.get(name, ir.Value(name)).shape)
    graph.values[restored] = ir.Value(restored, dtypes.FLOAT, graph.values.get(name, ir.Value(name)).shape)
    for node in graph.nodes:
        node.inputs = [restored if n == name else n for n in node.inputs]
    position = _position_after_producer(graph, name)
    graph.nodes[position:position] = [
        ir.Node("QuantizeLinear", [name, scale_name, zp_name], [quantized], {}, name=f"{name}/QuantizeLinear"),
        ir.Node("DequantizeLinear", [quantized, scale_name, zp_name], [restored], {}, name=f"{name}/DequantizeLinear"),
    ]


def _position_after_producer(graph: ir.Graph, name: str) -> int:
    for index, node in enumerate(graph.nodes):
        if name in node.outputs:
            return index + 1
    return 0  # a graph input


def _float16(model: ir.Model, calibration, summary: QuantizationSummary) -> None:
    graph = model.graph
    for name, weight in _float_weights(graph).items():
        if weight.size >= MIN_FLOAT16_ELEMENTS:
            _store_float16(graph, name, weight, summary)


def _dynamic_int8(model: ir.Model, calibration, summary: QuantizationSummary) -> None:
    graph = model.graph
    weights = _float_weights(graph)
    for name, axis in _channel_axes(graph, weights).items():
        _store_int8(graph, name, weights[name], axis, summary)


def _full_int8(model: ir.Model, calibration, summary: QuantizationSummary) -> None:
    if not calibration:
        raise QuantizationError("--quantize int8 needs calibration samples for every input "
                                "(--calibration NAME=FILE.npy; calibration={...} from Python)")
    names = _activations_to_quantize(model.graph)
    ranges = activation_ranges(model, names, calibration)
    _dynamic_int8(model, calibration, summary)
    for name in names:
        _insert_fake_quant(model.graph, name, *ranges[name])
        summary.activations.append(name)


SCHEMES: dict[str, Callable[[ir.Model, list | None, QuantizationSummary], None]] = {
    "float16": _float16,
    "dynamic-int8": _dynamic_int8,
    "int8": _full_int8,
}


def quantize(model: ir.Model, scheme: str, calibration: list[Mapping[str, np.ndarray]] | None = None,
             ) -> tuple[ir.Model, QuantizationSummary]:
    """``model`` with its weights stored as ``scheme`` says (the input is left as it was).

    ``calibration`` (feed dicts, see ``exporter.calibration.calibration_batches``) is what the
    float model runs on to find the activation ranges of the ``int8`` scheme. Raises
    ``QuantizationError`` for an unknown scheme or a model without float32 weights."""
    if scheme not in SCHEMES:
        raise QuantizationError(f"unknown quantization scheme {scheme!r}; choose one of {sorted(SCHEMES)}")
    weights = _float_weights(model.graph)
    if not weights:
        held = sorted({str(d.dtype) for d in model.graph.constants().values()}) or ["none"]
        raise QuantizationError(f"--quantize {scheme}: the model has no float32 weights to quantize "
                                f"(its constants hold: {', '.join(held)})")
    quantized = copy_model(model)
    summary = QuantizationSummary(scheme, bytes_before=_constant_bytes(model.graph))
    SCHEMES[scheme](quantized, calibration, summary)
    if not summary.weights:
        raise QuantizationError(f"--quantize {scheme}: none of the model's {len(weights)} float32 constants is a "
                                f"weight this scheme stores quantized")
    quantized.metadata[METADATA_KEY] = scheme
    summary.bytes_after = _constant_bytes(quantized.graph)
    return quantized, summary


def _constant_bytes(graph: ir.Graph) -> int:
    return sum(d.nbytes for d in graph.constants().values())


def quantize_request(model: ir.Model, request: QuantizationRequest,
                     ) -> tuple[ir.Model, QuantizationSummary, list[dict[str, np.ndarray]]]:
    """``quantize`` as the pipeline calls it: calibration arrays checked and batched first;
    returns the batches too (they are samples for the accuracy report)."""
    batches = calibration_batches(model, request.calibration, request.sources) if request.calibration else []
    quantized, summary = quantize(model, request.scheme, batches or None)
    return quantized, summary, batches
