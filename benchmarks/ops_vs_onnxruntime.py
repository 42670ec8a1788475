"""One ONNX node at a time, the edge runtime against onnxruntime: where a kernel falls off.

    python -m benchmarks.ops_vs_onnxruntime                 # every case, 1 s of timed pairs each
    python -m benchmarks.ops_vs_onnxruntime --ops Resize,TopK --budget 3
    python -m benchmarks.ops_vs_onnxruntime --quick         # small shapes: a smoke run
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.ops_vs_onnxruntime

Whole models average their kernels: a node 20x slower than onnxruntime hides in a model until a
user's model is made of it (Resize in a segmentation head, TopK over a vocabulary, Sigmoid gates,
strided convolutions in an audio front end). Each case here is one node on a feature-map shape
users run, built with onnx.helper (no torch), converted as ``flowstack convert`` does (the
exporter's passes, so a node may arrive fused), checked against onnxruntime, then timed as
``benchmarks.edge_vs_onnxruntime`` times whole models (alternating blocks, onnxruntime on two
intra-op threads). The table is sorted worst first; there is no target, only the outliers to fix.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from benchmarks.edge_vs_onnxruntime import Row, bench_onnx, ratio_table, run_sweep

OPSET = 18
RNG_SEED = 0


@dataclass(frozen=True)
class Case:
    """One node: its op, a label for the shape it runs on, and a builder taking the size factor
    (1 full, smaller in --quick) and a random generator, giving the model and its feeds."""

    op: str
    label: str
    build: Callable[[float, np.random.Generator], tuple[onnx.ModelProto, dict[str, np.ndarray]]]


def _scaled(n: int, size: float) -> int:
    return max(2, int(round(n * size)))


def _node_model(op: str, x: np.ndarray, constants: dict[str, np.ndarray] | None = None, inputs=None,
                outputs: int = 1, opset: int = OPSET, **attrs) -> onnx.ModelProto:
    """A graph of one ``op`` node reading ``x`` (input ``x``) and ``constants`` (initializers, in
    ``inputs`` order when given, "" for an absent optional input), at ``opset``."""
    constants = constants or {}
    names = ["x"] + list(inputs if inputs is not None else constants)
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, out_names, **attrs)
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_empty_tensor_value_info(n) for n in out_names],
        [numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    # IR version 9 came with opset 19
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset <= 18 else 9)


def _unary(op: str, shape: tuple[int, ...], scale: float = 4.0, **attrs):
    def build(size, rng):
        dims = shape[:2] + tuple(_scaled(d, size) for d in shape[2:])
        x = (rng.standard_normal(dims) * scale).astype(np.float32)
        return _node_model(op, x, **attrs), {"x": x}

    return build


def _with_constants(op: str, shape: tuple[int, ...], make: Callable, inputs=None, outputs: int = 1, **attrs):
    """A node whose other inputs ``make(x, rng)`` builds as constants from the scaled input."""

    def build(size, rng):
        dims = shape[:2] + tuple(_scaled(d, size) for d in shape[2:])
        x = rng.standard_normal(dims).astype(np.float32)
        return _node_model(op, x, make(x, rng), inputs=inputs, outputs=outputs, **attrs), {"x": x}

    return build


def _resize(shape, factor, **attrs):
    def make(x, rng):
        sizes = x.shape[:2] + tuple(int(d * factor) for d in x.shape[2:])
        return {"sizes": np.array(sizes, dtype=np.int64)}

    return _with_constants("Resize", shape, make, inputs=["", "", "sizes"], **attrs)


def _conv(shape, out_channels, kernel, stride, group=1):
    def make(x, rng):
        c = x.shape[1]
        w = rng.standard_normal((out_channels, c // group) + (kernel,) * (x.ndim - 2)).astype(np.float32)
        return {"w": w / math.sqrt(w[0].size), "b": rng.standard_normal(out_channels).astype(np.float32)}

    pads = [kernel // 2] * (2 * (len(shape) - 2))
    return _with_constants("Conv", shape, make, strides=[stride] * (len(shape) - 2), pads=pads, group=group)


CASES: list[Case] = [
    Case("Sigmoid", "1x256x64x64", _unary("Sigmoid", (1, 256, 64, 64))),
    Case("LeakyRelu", "1x256x64x64", _unary("LeakyRelu", (1, 256, 64, 64), alpha=0.1)),
    Case("PRelu", "1x64x128x128", _with_constants(
        "PRelu", (1, 64, 128, 128), lambda x, rng: {"slope": rng.uniform(0, 0.3, (x.shape[1], 1, 1)).astype(np.float32)})),
    Case("Elu", "1x256x64x64", _unary("Elu", (1, 256, 64, 64))),
    Case("HardSwish", "1x256x64x64", _unary("HardSwish", (1, 256, 64, 64))),
    Case("Gelu", "ConvNeXt MLP 1x3136x1536", _unary("Gelu", (1, 3136, 1536), scale=1.0, opset=20)),
    Case("Gelu", "tanh, GPT-2 MLP 4x64x3072", _unary("Gelu", (4, 64, 3072), scale=1.0, opset=20, approximate="tanh")),
    Case("Softmax", "1x12x128x128", _unary("Softmax", (1, 12, 128, 128), axis=-1)),
    Case("LayerNormalization", "4x128x768", _with_constants(
        "LayerNormalization", (4, 128, 768),
        lambda x, rng: {"scale": rng.uniform(0.5, 1.5, x.shape[-1]).astype(np.float32),
                        "bias": rng.standard_normal(x.shape[-1]).astype(np.float32)}, axis=-1)),
    Case("InstanceNormalization", "1x64x128x128", _with_constants(
        "InstanceNormalization", (1, 64, 128, 128),
        lambda x, rng: {"scale": rng.uniform(0.5, 1.5, x.shape[1]).astype(np.float32),
                        "bias": rng.standard_normal(x.shape[1]).astype(np.float32)})),
    Case("Resize", "nearest x2 1x128x40x40", _resize((1, 128, 40, 40), 2, mode="nearest",
                                                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")),
    Case("Resize", "linear x2 1x256x32x32", _resize((1, 256, 32, 32), 2, mode="linear",
                                                    coordinate_transformation_mode="half_pixel")),
    Case("Resize", "linear x8 1x21x64x64", _resize((1, 21, 64, 64), 8, mode="linear",
                                                   coordinate_transformation_mode="half_pixel")),
    Case("Resize", "cubic x2 1x32x64x64", _resize((1, 32, 64, 64), 2, mode="cubic",
                                                  coordinate_transformation_mode="half_pixel")),
    Case("TopK", "k 5 of 32x32000", _with_constants("TopK", (32, 32000), lambda x, rng: {"k": np.array([5])},
                                                    outputs=2, axis=-1)),
    Case("ArgMax", "32x32000", _unary("ArgMax", (32, 32000), axis=-1)),
    Case("ReduceMean", "planes of 1x512x64x64", _with_constants(
        "ReduceMean", (1, 512, 64, 64), lambda x, rng: {"axes": np.array([2, 3])})),
    Case("GlobalAveragePool", "1x1280x7x7", _unary("GlobalAveragePool", (1, 1280, 7, 7))),
    Case("AveragePool", "3x3 s1 1x64x64x64", _unary("AveragePool", (1, 64, 64, 64), kernel_shape=[3, 3],
                                                   pads=[1, 1, 1, 1])),
    Case("MaxPool", "3x3 s2 1x64x112x112", _unary("MaxPool", (1, 64, 112, 112), kernel_shape=[3, 3],
                                                 strides=[2, 2], pads=[1, 1, 1, 1])),
    Case("MaxPool", "5x5 s1 p2 1x128x20x20", _unary("MaxPool", (1, 128, 20, 20), kernel_shape=[5, 5],
                                                   pads=[2, 2, 2, 2])),  # YOLOv8n's SPPF at 640x640
    Case("MaxPool", "2x2 s2 1x64x128x128", _unary("MaxPool", (1, 64, 128, 128), kernel_shape=[2, 2],
                                                 strides=[2, 2])),  # U-Net's first pool
    Case("GridSample", "1x32x64x64", _with_constants(
        "GridSample", (1, 32, 64, 64),
        lambda x, rng: {"grid": rng.uniform(-1, 1, (x.shape[0],) + x.shape[2:] + (2,)).astype(np.float32)})),
    Case("Pad", "reflect 1x64x128x128", _with_constants(
        "Pad", (1, 64, 128, 128), lambda x, rng: {"pads": np.array([0, 0, 3, 3, 0, 0, 3, 3])}, mode="reflect")),
    Case("CumSum", "64x4096", _with_constants("CumSum", (64, 4096), lambda x, rng: {"axis": np.array(-1)})),
    Case("Transpose", "NCHW->NHWC 1x64x128x128", _unary("Transpose", (1, 64, 128, 128), perm=[0, 2, 3, 1])),
    Case("DepthToSpace", "1x256x32x32", _unary("DepthToSpace", (1, 256, 32, 32), blocksize=2)),
    Case("ConvTranspose", "2x2 s2 1x64x32x32", _with_constants(
        "ConvTranspose", (1, 64, 32, 32),
        lambda x, rng: {"w": (rng.standard_normal((x.shape[1], 32, 2, 2)) * 0.1).astype(np.float32)},
        strides=[2, 2])),
    Case("Conv", "3x3 32->16 1x32x128x128", _conv((1, 32, 128, 128), 16, 3, 1)),
    Case("Conv", "3x3 s2 16->32 1x16x160x160", _conv((1, 16, 160, 160), 32, 3, 2)),
    Case("Conv", "depthwise 3x3 1x144x56x56", _conv((1, 144, 56, 56), 144, 3, 1, group=144)),
    Case("Conv", "1-D k3 s2 384->384 1x384x3000", _conv((1, 384, 3000), 384, 3, 2)),
    Case("Conv", "1-D k3 80->384 1x80x3000", _conv((1, 80, 3000), 384, 3, 1)),
    Case("MatMul", "attention scores 1x12x128x64", _with_constants(
        "MatMul", (1, 12, 128, 64),
        lambda x, rng: {"k": rng.standard_normal(x.shape[:2] + x.shape[:1:-1]).astype(np.float32)})),
]


def run_case(case: Case, size: float, budget_s: float) -> Row:
    model, feeds = case.build(size, np.random.default_rng(RNG_SEED))
    return bench_onnx(f"{case.op} {case.label}", model, feeds, budget_s)


def render(rows: list[Row]) -> str:
    return ratio_table(rows, "nodes", worst_first=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default=None, help="comma-separated op types to run (default: every case)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timed pairs a node (default 1, quick 0.1)")
    parser.add_argument("--quick", action="store_true", help="small shapes and budgets: a smoke run, not a measurement")
    args = parser.parse_args(argv)
    wanted = None if args.ops is None else {o.strip() for o in args.ops.split(",") if o.strip()}
    known = {c.op for c in CASES}
    if wanted and wanted - known:
        parser.error(f"unknown op(s) {sorted(wanted - known)}; choose from {', '.join(sorted(known))}")
    cases = [c for c in CASES if wanted is None or c.op in wanted]
    size = 0.25 if args.quick else 1.0
    budget = args.budget if args.budget is not None else (0.1 if args.quick else 1.0)
    return run_sweep([lambda case=case: run_case(case, size, budget) for case in cases], render)


if __name__ == "__main__":
    raise SystemExit(main())
