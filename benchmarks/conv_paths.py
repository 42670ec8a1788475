"""Conv kernel paths against each other and against onnxruntime, one conv layer at a time.

    python -m benchmarks.conv_paths            # full-size layers
    python -m benchmarks.conv_paths --quick    # small sizes, a smoke run

Layers: MobileNetV2-like depthwise 3x3 (N=1, C=144, 56x56, stride 1 and 2, where im2col runs;
576ch 14x14 and 960ch 7x7, where the channels-last path runs), a pointwise 1x1 (144->24) and a
ResNet-like 3x3 (64->64, 56x56). For each: our dispatched kernel, the generic
im2col path forced on the same layer, and onnxruntime on a one-node model (intra_op_num_threads=2,
inter_op_num_threads=1, no spinning). Ours and onnxruntime are timed alternately, call for call, so load from
other processes falls on both; each figure is best / median in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from edge_runtime.kernels import sliding_windows, get_kernel
from schemas import get_schema


@dataclass(frozen=True)
class Layer:
    name: str
    c_in: int
    c_out: int
    size: int
    kernel: int
    stride: int
    group: int

    @property
    def pads(self) -> list[int]:
        p = self.kernel // 2
        return [p, p, p, p]


LAYERS = [
    Layer("depthwise 3x3 s1 (144ch, 56x56)", 144, 144, 56, 3, 1, 144),
    Layer("depthwise 3x3 s2 (144ch, 56x56)", 144, 144, 56, 3, 2, 144),
    Layer("depthwise 3x3 s1 (576ch, 14x14)", 576, 576, 14, 3, 1, 576),
    Layer("depthwise 3x3 s1 (960ch, 7x7)", 960, 960, 7, 3, 1, 960),
    Layer("pointwise 1x1 (144->24, 56x56)", 144, 24, 56, 1, 1, 1),
    Layer("resnet 3x3 (64->64, 56x56)", 64, 64, 56, 3, 1, 1),
]


def onnx_conv(layer: Layer, w: np.ndarray, b: np.ndarray) -> bytes:
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"], group=layer.group, pads=layer.pads,
        strides=[layer.stride] * 2, kernel_shape=[layer.kernel] * 2,
    )
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layer.c_in, layer.size, layer.size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    return model.SerializeToString()


def timings_ms(fns, repeats: int) -> list[tuple[float, float]]:
    """(best, median) per function. On a shared machine the median mostly measures how long
    sleeping BLAS threads wait to be scheduled again; the best run measures the kernel."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):  # interleaved, so a noisy neighbour hits every runner alike
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [(min(t) * 1e3, statistics.median(t) * 1e3) for t in times]


def bench(layer: Layer, repeats: int) -> list[tuple[float, float]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, layer.c_in, layer.size, layer.size), dtype=np.float32)
    w = rng.standard_normal((layer.c_out, layer.c_in // layer.group, layer.kernel, layer.kernel), dtype=np.float32)
    b = rng.standard_normal(layer.c_out, dtype=np.float32)
    attrs = get_schema("Conv").resolve_attrs(
        {"group": layer.group, "pads": layer.pads, "strides": [layer.stride] * 2}
    )
    conv = get_kernel("Conv")
    win = sliding_windows.resolve_window(x.shape[2:], w.shape[2:], attrs["strides"], None, attrs["pads"], "NOTSET")

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    # Idle onnxruntime workers otherwise spin after each run and starve the BLAS threads of the
    # calls timed right after them.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(onnx_conv(layer, w, b), options, providers=["CPUExecutionProvider"])

    ours = conv(x, w, b, xp=np, **attrs)
    def generic_path():
        return sliding_windows._im2col(sliding_windows.pad_spatial(x, np, win.pad_begin, win.pad_end), w, np, win, layer.group) + (
            b.reshape(1, -1, 1, 1)
        )

    generic = generic_path()
    ort = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, ort, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(generic, ort, rtol=1e-3, atol=1e-3)

    return timings_ms([
        lambda: conv(x, w, b, xp=np, **attrs),
        generic_path,
        lambda: session.run(None, {"x": x}),
    ], repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small layers and few repeats")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    layers = LAYERS
    repeats = args.repeats
    if args.quick:
        layers = [Layer(l.name + " [quick]", l.c_in // 8, l.c_out // 8, 14, l.kernel, l.stride,
                        max(l.group // 8, 1)) for l in LAYERS]
        repeats = 3
    print(f"numpy {np.__version__}, onnxruntime {onnxruntime.__version__}; best / median of {repeats} runs, ms")
    print(f"{'layer':34} {'ours':>15} {'generic':>15} {'ort':>15} {'ours/ort':>13} {'generic/ours':>13}")
    for layer in layers:
        ours, generic, ort = bench(layer, repeats)
        cells = " ".join(f"{b:7.3f}/{m:7.3f}" for b, m in (ours, generic, ort))
        ratios = f"{ours[0] / ort[0]:6.2f}/{ours[1] / ort[1]:6.2f} {generic[0] / ours[0]:6.2f}/{generic[1] / ours[1]:6.2f}"
        print(f"{layer.name:34} {cells} {ratios}")


if __name__ == "__main__":
    main()
