"""A small CNN as ONNX, seeded, for the quantization tests: conv-relu-maxpool, conv-relu, gemm-relu, gemm."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IMAGE = (1, 12, 12)
CLASSES = 10


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """Input ``x`` [batch, 1, 12, 12] -> ``logits`` [batch, 10]; weights He-scaled, biases small.
    The second conv's output channels differ in scale 100-fold (as trained layers' do), which only
    per-channel weight scales represent well."""
    rng = np.random.default_rng(seed)

    def weight(*shape):
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    w2 = weight(16, 8, 3, 3) * np.geomspace(0.1, 10, 16, dtype=np.float32).reshape(16, 1, 1, 1)
    initializers = {
        "w1": weight(8, 1, 3, 3), "b1": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "w2": w2, "b2": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "w3": weight(64, 16 * 4 * 4).T.copy() / 3, "b3": (rng.standard_normal(64) * 0.1).astype(np.float32),
        "w4": weight(CLASSES, 64).T.copy(), "b4": np.zeros(CLASSES, np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["g3"]),
        helper.make_node("Relu", ["g3"], ["r3"]),
        helper.make_node("Gemm", ["r3", "w4", "b4"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", *IMAGE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def images(count: int, seed: int = 1) -> np.ndarray:
    """Smooth non-negative images (blurred noise in [0, 1]), closer to pictures than white noise."""
    rng = np.random.default_rng(seed)
    x = rng.random((count, *IMAGE)).astype(np.float32)
    x = (x + np.roll(x, 1, axis=-1) + np.roll(x, 1, axis=-2) + np.roll(x, (1, 1), axis=(-1, -2))) / 4
    return x.astype(np.float32)
