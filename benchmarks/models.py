"""ONNX models for the speed benchmark, built here with ``onnx.helper`` so no download is needed.

Every builder is deterministic (weights drawn from a seeded NumPy generator), targets one opset,
and gives its input a symbolic ``batch`` dimension. BatchNormalization stays a separate node
after each convolution: folding it is the exporter's job, and the runtime must be fast without it.

``BENCHMARKS`` lists the models with their full-size arguments and a small configuration
(same architecture, tiny widths) that tests and ``--quick`` smoke runs use:

>>> spec = BENCHMARKS["mlp"]
>>> model = spec.build(quick=True)
>>> {name: x.shape for name, x in spec.feeds(model, quick=True).items()}
{'x': (4, 784)}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20  # Gelu entered the default domain in opset 20
IR_VERSION = 9  # the IR version that opset 20 needs; onnxruntime 1.31 reads it


class _GraphBuilder:
    """Accumulates nodes and initializers; every helper returns the name of its output."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: np.ndarray, hint: str = "w") -> str:
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, shape: tuple[int, ...], fan_in: int, hint: str = "w") -> str:
        # He-scaled so activations stay O(1) through deep random nets
        scale = np.sqrt(2.0 / fan_in)
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), hint)

    def bias(self, n: int, hint: str = "b") -> str:
        return self.const((self.rng.standard_normal(n) * 0.05).astype(np.float32), hint)

    def op(self, op_type: str, inputs: list[str], n_outputs: int = 1, **attrs: Any) -> Any:
        outputs = [self._name(op_type.lower()) for _ in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=self._name(f"n_{op_type}"), **attrs))
        return outputs[0] if n_outputs == 1 else outputs

    def name_last_output(self, name: str) -> None:
        """Give the graph output its public name (the last node added produces it)."""
        self.nodes[-1].output[0] = name

    # layers -------------------------------------------------------------------------------

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        stride: int = 1,
        group: int = 1,
        bias: bool = False,
        pad: int | None = None,
    ) -> str:
        """A square convolution, "same"-padded (k // 2) unless ``pad`` says otherwise."""
        w = self.weight((cout, cin // group, k, k), fan_in=(cin // group) * k * k)
        inputs = [x, w] + ([self.bias(cout)] if bias else [])
        pad = k // 2 if pad is None else pad
        return self.op("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group)

    def batch_norm(self, x: str, c: int) -> str:
        rng = self.rng
        scale = self.const(rng.uniform(0.5, 1.5, c).astype(np.float32), "bn_scale")
        shift = self.const((rng.standard_normal(c) * 0.1).astype(np.float32), "bn_bias")
        mean = self.const((rng.standard_normal(c) * 0.1).astype(np.float32), "bn_mean")
        var = self.const(rng.uniform(0.5, 1.5, c).astype(np.float32), "bn_var")
        return self.op("BatchNormalization", [x, scale, shift, mean, var], epsilon=1e-5)

    def relu6(self, x: str) -> str:
        lo = self.const(np.array(0.0, np.float32), "zero")
        hi = self.const(np.array(6.0, np.float32), "six")
        return self.op("Clip", [x, lo, hi])

    def gemm(self, x: str, n_in: int, n_out: int) -> str:
        # weight stored [out, in] with transB=1, as PyTorch's exporter writes Linear layers
        w = self.weight((n_out, n_in), fan_in=n_in)
        return self.op("Gemm", [x, w, self.bias(n_out)], transB=1)

    def dense(self, x: str, n_in: int, n_out: int) -> str:
        """A MatMul + Add linear layer on a rank-3 activation (Gemm takes only rank 2)."""
        return self.op("Add", [self.op("MatMul", [x, self.weight((n_in, n_out), fan_in=n_in)]), self.bias(n_out)])

    def layer_norm(self, x: str, d: int) -> str:
        gamma = self.const(self.rng.uniform(0.8, 1.2, d).astype(np.float32), "ln_scale")
        beta = self.const((self.rng.standard_normal(d) * 0.05).astype(np.float32), "ln_bias")
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def model(
        self, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="flowstack benchmarks"
        )
        model.ir_version = IR_VERSION
        return model


def _float_input(name: str, shape: list[Any]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# builders ---------------------------------------------------------------------------------


def mlp(sizes: tuple[int, ...] = (784, 512, 512, 10), seed: int = 0) -> onnx.ModelProto:
    """Fully connected classifier: Gemm + Relu per hidden layer, Softmax on the logits."""
    g = _GraphBuilder(seed)
    h = "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        h = g.gemm(h, n_in, n_out)
        if i < len(sizes) - 2:
            h = g.op("Relu", [h])
    g.op("Softmax", [h], axis=-1)
    g.name_last_output("probs")
    return g.model("mlp", [_float_input("x", ["batch", sizes[0]])], [_float_input("probs", ["batch", sizes[-1]])])


def lenet(
    image: int = 28,
    channels: tuple[int, int] = (6, 16),
    hidden: tuple[int, int] = (120, 84),
    classes: int = 10,
    seed: int = 0,
) -> onnx.ModelProto:
    """LeNet-5 with BatchNormalization after each convolution: (conv5x5 + BN + Relu + MaxPool2) x 2,
    the first conv padded to keep 28x28 and the second unpadded (14 -> 10), as in the original; 3 Gemms."""
    g = _GraphBuilder(seed)
    h, cin, side = "x", 1, image
    for i, cout in enumerate(channels):
        pad = 2 if i == 0 else 0
        h = g.op("Relu", [g.batch_norm(g.conv(h, cin, cout, 5, bias=True, pad=pad), cout)])
        h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
        cin, side = cout, (side + 2 * pad - 4) // 2
    h = g.op("Flatten", [h], axis=1)
    n_in = cin * side * side
    for n_out in hidden:
        h = g.op("Relu", [g.gemm(h, n_in, n_out)])
        n_in = n_out
    g.op("Softmax", [g.gemm(h, n_in, classes)], axis=-1)
    g.name_last_output("probs")
    return g.model(
        "lenet_bn", [_float_input("x", ["batch", 1, image, image])], [_float_input("probs", ["batch", classes])]
    )


def resnet18(image: int = 224, width: int = 64, classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """ResNet-18 (torchvision layout): stem conv7x7/2 + BN + Relu + MaxPool, 4 stages of 2 basic
    blocks with residual Adds (1x1/2 conv + BN on the shortcut where shape changes), GAP, Gemm."""
    g = _GraphBuilder(seed)
    h = g.op("Relu", [g.batch_norm(g.conv("x", 3, width, 7, stride=2), width)])
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, mult in enumerate((1, 2, 4, 8)):
        cout = width * mult
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.op("Relu", [g.batch_norm(g.conv(h, cin, cout, 3, stride=stride), cout)])
            y = g.batch_norm(g.conv(y, cout, cout, 3), cout)
            shortcut = h
            if stride != 1 or cin != cout:
                shortcut = g.batch_norm(g.conv(h, cin, cout, 1, stride=stride), cout)
            h = g.op("Relu", [g.op("Add", [y, shortcut])])
            cin = cout
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, cin, classes)
    g.name_last_output("logits")
    return g.model(
        "resnet18", [_float_input("x", ["batch", 3, image, image])], [_float_input("logits", ["batch", classes])]
    )


# (expansion t, output channels c, repeats n, first stride s): Sandler et al. 2018, table 2
MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _divisible(value: float, divisor: int = 8) -> int:
    """Channel rounding of the reference implementation: nearest multiple of 8, never below 90%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def mobilenet_v2(image: int = 224, width_mult: float = 1.0, classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2: conv3x3/2 stem, 17 inverted residual blocks (1x1 expand + BN + Relu6, 3x3
    depthwise + BN + Relu6, 1x1 project + BN, Add when stride 1 and channels match), 1x1 conv to
    1280, GAP, Gemm. Relu6 is Clip(0, 6), as exporters write it."""
    g = _GraphBuilder(seed)
    cin = _divisible(32 * width_mult)
    h = g.relu6(g.batch_norm(g.conv("x", 3, cin, 3, stride=2), cin))
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        cout = _divisible(c * width_mult)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = h
            if t != 1:
                y = g.relu6(g.batch_norm(g.conv(y, cin, hidden, 1), hidden))
            y = g.relu6(g.batch_norm(g.conv(y, hidden, hidden, 3, stride=stride, group=hidden), hidden))
            y = g.batch_norm(g.conv(y, hidden, cout, 1), cout)
            h = g.op("Add", [h, y]) if stride == 1 and cin == cout else y
            cin = cout
    last = _divisible(1280 * max(1.0, width_mult))
    h = g.relu6(g.batch_norm(g.conv(h, cin, last, 1), last))
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])], axis=1)
    g.gemm(h, last, classes)
    g.name_last_output("logits")
    return g.model(
        "mobilenet_v2", [_float_input("x", ["batch", 3, image, image])], [_float_input("logits", ["batch", classes])]
    )


def transformer_encoder(
    layers: int = 6, d_model: int = 256, heads: int = 4, ff: int = 1024, seq: int = 128, seed: int = 0
) -> onnx.ModelProto:
    """Pre-LayerNorm transformer encoder over embeddings [batch, seq, d_model]: per layer, multi-head
    self-attention (MatMul projections, Reshape/Transpose into heads, scaled QK^T, Softmax, MatMul
    with V) and a Gelu feed-forward block, each with a residual Add; a final LayerNormalization."""
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    g = _GraphBuilder(seed)
    head_dim = d_model // heads
    split_heads = g.const(np.array([0, -1, heads, head_dim], np.int64), "split_heads")  # 0 copies the batch dim
    merge_heads = g.const(np.array([0, -1, d_model], np.int64), "merge_heads")
    scale = g.const(np.array(1.0 / np.sqrt(head_dim), np.float32), "scale")
    x = "x"
    for _ in range(layers):
        h = g.layer_norm(x, d_model)
        q, k, v = (g.op("Reshape", [g.dense(h, d_model, d_model), split_heads]) for _ in range(3))
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])  # [b, h, s, hd]
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])  # [b, h, hd, s]
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = g.op("Mul", [g.op("MatMul", [q, k]), scale])
        attn = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        attn = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 2, 1, 3]), merge_heads])
        x = g.op("Add", [x, g.dense(attn, d_model, d_model)])
        h = g.op("Gelu", [g.dense(g.layer_norm(x, d_model), d_model, ff)])
        x = g.op("Add", [x, g.dense(h, ff, d_model)])
    g.layer_norm(x, d_model)
    g.name_last_output("y")
    return g.model(
        "transformer_encoder",
        [_float_input("x", ["batch", seq, d_model])],
        [_float_input("y", ["batch", seq, d_model])],
    )


def lstm(layers: int = 2, seq: int = 32, input_size: int = 128, hidden: int = 128, seed: int = 0) -> onnx.ModelProto:
    """Stacked unidirectional LSTM over [seq, batch, input]: one ONNX LSTM node per layer, its
    Y [seq, 1, batch, hidden] squeezed on the direction axis to feed the next."""
    g = _GraphBuilder(seed)
    squeeze_axes = g.const(np.array([1], np.int64), "direction_axis")
    h, n_in = "x", input_size
    for _ in range(layers):
        bound = 1.0 / np.sqrt(hidden)  # PyTorch's LSTM initialisation
        w = g.const(g.rng.uniform(-bound, bound, (1, 4 * hidden, n_in)).astype(np.float32), "lstm_w")
        r = g.const(g.rng.uniform(-bound, bound, (1, 4 * hidden, hidden)).astype(np.float32), "lstm_r")
        b = g.const(g.rng.uniform(-bound, bound, (1, 8 * hidden)).astype(np.float32), "lstm_b")
        y = g.op("LSTM", [h, w, r, b], n_outputs=3, hidden_size=hidden)[0]
        h, n_in = g.op("Squeeze", [y, squeeze_axes]), hidden
    g.name_last_output("y")
    return g.model("lstm", [_float_input("x", [seq, "batch", input_size])], [_float_input("y", [seq, "batch", hidden])])


# the benchmark table ---------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkModel:
    """A builder with its full-size and quick arguments and the batch each is run at."""

    name: str
    builder: Callable[..., onnx.ModelProto]
    batch: int
    full: dict[str, Any] = field(default_factory=dict)
    quick_args: dict[str, Any] = field(default_factory=dict)
    quick_batch: int = 2
    conv_net: bool = False  # the ">= 10x the reference evaluator" target applies to these

    def build(self, quick: bool = False) -> onnx.ModelProto:
        return self.builder(**(self.quick_args if quick else self.full))

    def feeds(self, model: onnx.ModelProto, quick: bool = False, seed: int = 1) -> dict[str, np.ndarray]:
        """Random float32 inputs for ``model``, its symbolic ``batch`` dim set to this model's batch."""
        batch = self.quick_batch if quick else self.batch
        rng = np.random.default_rng(seed)
        feeds = {}
        for vi in model.graph.input:
            dims = [d.dim_value if d.HasField("dim_value") else batch for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = rng.standard_normal(dims).astype(np.float32)
        return feeds


BENCHMARKS: dict[str, BenchmarkModel] = {
    spec.name: spec
    for spec in (
        # the batch is part of the workload: small dense nets at a small serving batch, the
        # 224x224 nets and the transformer at batch 1, the LSTM at the batch the issue gives
        BenchmarkModel("mlp", mlp, batch=32, quick_args={"sizes": (784, 64, 64, 10)}, quick_batch=4),
        BenchmarkModel("lenet_bn", lenet, batch=32, quick_batch=4, conv_net=True),
        BenchmarkModel("resnet18", resnet18, batch=1, quick_args={"image": 32, "width": 8}, conv_net=True),
        BenchmarkModel(
            "mobilenet_v2", mobilenet_v2, batch=1, quick_args={"image": 32, "width_mult": 0.25}, conv_net=True
        ),
        BenchmarkModel(
            "transformer",
            transformer_encoder,
            batch=1,
            quick_args={"layers": 2, "d_model": 32, "heads": 4, "ff": 64, "seq": 8},
        ),
        BenchmarkModel("lstm", lstm, batch=32, quick_args={"seq": 4, "input_size": 8, "hidden": 8}, quick_batch=3),
    )
}
