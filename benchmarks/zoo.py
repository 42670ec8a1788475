"""A zoo of real PyTorch exports, built at benchmark time (no download): what users bring to the edge runtime.

Each entry builds a ``torch.nn.Module`` with seeded random weights, exports it with
``torch.onnx.export`` (the TorchScript exporter at opset 17 by default, or the dynamo exporter) and
returns the ONNX model with random inputs at the batch users run it (1 for 224x224 vision, 4-8
for text, 16-32 for small nets). torch is a peer of the benchmarks, never a dependency of the
packages: importing this module needs it, ``benchmarks.edge_vs_onnxruntime --zoo`` and the zoo
tests import it only where it is installed.

>>> spec = ZOO["mlp"]
>>> model, feeds = spec.export(quick=True)
>>> {name: x.shape for name, x in feeds.items()}
{'input': (4, 784)}
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import onnx
import torch
from torch import nn

OPSET = 17

# --------------------------------------------------------------------------------- the models


def mlp(sizes: tuple[int, ...] = (784, 512, 512, 10)) -> nn.Module:
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def lenet_bn(classes: int = 10) -> nn.Module:
    """LeNet-5 on 1x28x28 digits with BatchNorm after each convolution."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes),
    )


def _conv_bn(n_in: int, n_out: int, kernel: int, stride: int = 1, groups: int = 1, act: type | None = nn.ReLU):
    layers = [nn.Conv2d(n_in, n_out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(n_out)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class _BasicBlock(nn.Module):
    def __init__(self, n_in: int, n_out: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(n_in, n_out, 3, stride), _conv_bn(n_out, n_out, 3, act=None))
        self.skip = _conv_bn(n_in, n_out, 1, stride, act=None) if stride != 1 or n_in != n_out else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet18(width: int = 64, classes: int = 1000) -> nn.Module:
    """torchvision's ResNet-18 layout: 7x7 stem, max pool, four stages of two basic blocks."""
    widths = [width, width * 2, width * 4, width * 8]
    blocks: list[nn.Module] = [_conv_bn(3, width, 7, 2), nn.MaxPool2d(3, 2, 1)]
    n_in = width
    for stage, n_out in enumerate(widths):
        blocks += [_BasicBlock(n_in, n_out, 1 if stage == 0 else 2), _BasicBlock(n_out, n_out, 1)]
        n_in = n_out
    return nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(n_in, classes))


def _divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class _InvertedResidual(nn.Module):
    """MobileNetV2's and EfficientNet's block: expand 1x1, depthwise kxk, optional squeeze-excite, project."""

    def __init__(self, n_in: int, n_out: int, stride: int, expand: int, kernel: int = 3,
                 act: type = nn.ReLU6, squeeze: float = 0.0):
        super().__init__()
        hidden = n_in * expand
        layers: list[nn.Module] = [_conv_bn(n_in, hidden, 1, act=act)] if expand != 1 else []
        layers.append(_conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=act))
        if squeeze:
            layers.append(_SqueezeExcite(hidden, max(1, int(n_in * squeeze))))
        layers.append(_conv_bn(hidden, n_out, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and n_in == n_out

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class _SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.expand = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        scale = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.expand(nn.functional.silu(self.reduce(scale))))


def _inverted_net(table, width_mult: float, classes: int, act: type, last: int, squeeze: float) -> nn.Module:
    stem = _divisible(32 * width_mult)
    layers: list[nn.Module] = [_conv_bn(3, stem, 3, 2, act=act)]
    n_in = stem
    for expand, channels, repeats, stride, kernel in table:
        n_out = _divisible(channels * width_mult)
        for i in range(repeats):
            layers.append(_InvertedResidual(n_in, n_out, stride if i == 0 else 1, expand, kernel, act, squeeze))
            n_in = n_out
    head = _divisible(last * max(1.0, width_mult))
    layers += [_conv_bn(n_in, head, 1, act=act), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(head, classes)]
    return nn.Sequential(*layers)


def mobilenet_v2(width_mult: float = 1.0, classes: int = 1000) -> nn.Module:
    # (expansion, channels, repeats, first stride, kernel): the paper's table
    table = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3),
             (6, 160, 3, 2, 3), (6, 320, 1, 1, 3)]
    return _inverted_net(table, width_mult, classes, nn.ReLU6, 1280, squeeze=0.0)


def efficientnet_b0(width_mult: float = 1.0, classes: int = 1000) -> nn.Module:
    """EfficientNet-B0's stage table: SiLU everywhere, squeeze-excite at a quarter of each block's input."""
    table = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5),
             (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
    return _inverted_net(table, width_mult, classes, nn.SiLU, 1280, squeeze=0.25)


class _ViT(nn.Module):
    """ViT: 16x16 patch embedding, class token, learned positions, pre-LN encoder with exact GELU."""

    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, classes: int):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 4, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], 1) + self.pos
        return self.head(self.norm(self.encoder(tokens))[:, 0])


def vit(image: int = 224, patch: int = 16, dim: int = 192, depth: int = 12, heads: int = 3,
        classes: int = 1000) -> nn.Module:
    """ViT-Tiny's sizes by default."""
    return _ViT(image, patch, dim, depth, heads, classes)


class _Bert(nn.Module):
    """A ``transformers`` BertModel (random weights from a config) returning the last hidden state."""

    def __init__(self, hidden: int, layers: int, heads: int, vocab: int, max_len: int):
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=hidden * 4,
                            max_position_embeddings=max_len, hidden_act="gelu")
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _HandBert(nn.Module):
    """BERT's shape without ``transformers``: embeddings, post-LN encoder with exact GELU, padding mask."""

    def __init__(self, hidden: int, layers: int, heads: int, vocab: int, max_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, hidden * 4, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.norm(self.tokens(input_ids) + self.positions(positions))
        bias = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        bias = bias.expand(-1, self.encoder.layers[0].self_attn.num_heads, input_ids.shape[1], -1)
        return self.encoder(x, mask=bias.reshape(-1, input_ids.shape[1], input_ids.shape[1]))


def bert(hidden: int = 384, layers: int = 6, heads: int = 12, vocab: int = 8192, max_len: int = 512) -> nn.Module:
    """transformers' BertModel where that optional peer is installed, else the same shape by hand."""
    if importlib.util.find_spec("transformers") is None:
        return _HandBert(hidden, layers, heads, vocab, max_len)
    return _Bert(hidden, layers, heads, vocab, max_len)


class _LstmTagger(nn.Module):
    """Embedding, a 2-layer LSTM, a per-token linear classifier: a part-of-speech tagger's shape."""

    def __init__(self, vocab: int, embed: int, hidden: int, tags: int, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.tag = nn.Linear(hidden, tags)

    def forward(self, tokens):
        return self.tag(self.lstm(self.embed(tokens))[0])


def lstm_tagger(vocab: int = 5000, embed: int = 128, hidden: int = 256, tags: int = 20) -> nn.Module:
    return _LstmTagger(vocab, embed, hidden, tags)


# ------------------------------------------------------------------------------- the zoo table

Feeds = Callable[[int, np.random.Generator], dict[str, np.ndarray]]


def _images(size: int, channels: int = 3) -> Feeds:
    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"input": rng.standard_normal((batch, channels, size, size)).astype(np.float32)}
    return make


def _vectors(width: int) -> Feeds:
    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"input": rng.standard_normal((batch, width)).astype(np.float32)}
    return make


def _tokens(seq: int, vocab: int, mask: bool) -> Feeds:
    """Token ids; with ``mask``, an attention mask whose later rows are padded (a real batch's shape)."""

    def make(batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        feeds = {"input_ids": rng.integers(0, vocab, (batch, seq), dtype=np.int64)}
        if mask:
            lengths = np.maximum(1, seq - np.arange(batch) * max(1, seq // (2 * batch)))
            feeds["attention_mask"] = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
        return feeds
    return make




@dataclass(frozen=True)
class ZooModel:
    """A PyTorch module builder with its full and quick sizes, input makers and batches."""

    name: str
    module: Callable[..., nn.Module]
    inputs: Feeds
    batch: int
    quick_inputs: Feeds
    quick_batch: int = 2
    full: dict[str, Any] = field(default_factory=dict)
    quick_args: dict[str, Any] = field(default_factory=dict)

    def feeds(self, batch: int, quick: bool = False, seed: int = 1) -> dict[str, np.ndarray]:
        return (self.quick_inputs if quick else self.inputs)(batch, np.random.default_rng(seed))

    def build(self, quick: bool = False, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        module = self.module(**(self.quick_args if quick else self.full)).eval()
        _distinct_weights(module)
        trained_looking_parameters(module, seed)
        return module

    def export(self, quick: bool = False, dynamo: bool = False, opset: int = OPSET
               ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        """The module exported with a dynamic batch, and feeds at this model's batch."""
        module = self.build(quick)
        feeds = self.feeds(self.quick_batch if quick else self.batch, quick)
        return export(module, feeds, dynamo=dynamo, opset=opset), feeds


def _distinct_weights(module: nn.Module) -> None:
    """Fresh weights for layers that start as copies: nn.TransformerEncoder deep-copies its layer, and
    identical layers would let common-subexpression elimination share their weights, as no trained
    model does."""
    for layer in module.modules():
        if isinstance(layer, nn.TransformerEncoderLayer):
            for sub in layer.modules():
                if sub is not layer and hasattr(sub, "_reset_parameters"):
                    sub._reset_parameters()
                elif sub is not layer and isinstance(sub, nn.Linear):
                    sub.reset_parameters()


def trained_looking_parameters(module: nn.Module, seed: int) -> None:
    """Trained-looking biases, normalization parameters and BatchNorm statistics: fresh ones (bias 0,
    scale 1, shift 0, mean 0, var 1) would make folding them trivial and let every layer share one
    constant."""
    generator = torch.Generator().manual_seed(seed + 1)
    for layer in module.modules():
        if isinstance(layer, nn.Linear) and layer.bias is not None and not layer.bias.any():
            with torch.no_grad():  # BERT starts its biases at zero
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 0.02)
        if isinstance(layer, nn.LayerNorm):
            n = layer.weight.shape
            with torch.no_grad():
                layer.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                layer.bias.copy_(torch.randn(n, generator=generator) * 0.1)
        if isinstance(layer, nn.BatchNorm2d):
            n = layer.num_features
            with torch.no_grad():
                layer.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                layer.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                layer.weight.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
                layer.bias.copy_(torch.randn(n, generator=generator) * 0.1)


@contextlib.contextmanager
def _no_fast_path():
    """The TorchScript exporter has no symbolic for nn.TransformerEncoderLayer's fused inference
    kernel (``aten::_transformer_encoder_layer_fwd``), which eval mode under no_grad picks."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def export(module: nn.Module, feeds: dict[str, np.ndarray], dynamo: bool = False, opset: int = OPSET) -> onnx.ModelProto:
    """``module`` exported by ``torch.onnx.export`` with the feeds' names as inputs and dim 0 dynamic."""
    args = tuple(torch.from_numpy(x) for x in feeds.values())
    names = list(feeds)
    with warnings.catch_warnings(), _no_fast_path():  # the exporters' own deprecation and tracer warnings
        warnings.simplefilter("ignore")
        if dynamo:
            batch = torch.export.Dim("batch")
            program = torch.onnx.export(module, args, input_names=names, output_names=["output"],
                                        dynamic_shapes={n: {0: batch} for n in names}, opset_version=opset,
                                        dynamo=True, verbose=False)
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(module, args, buffer, input_names=names, output_names=["output"], opset_version=opset,
                          dynamic_axes={n: {0: "batch"} for n in [*names, "output"]}, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


def torch_outputs(module: nn.Module, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        return module(*(torch.from_numpy(x) for x in feeds.values())).numpy()


ZOO: dict[str, ZooModel] = {
    spec.name: spec
    for spec in (
        ZooModel("mlp", mlp, _vectors(784), 32, _vectors(784), 4, quick_args={"sizes": (784, 64, 64, 10)}),
        ZooModel("lenet_bn", lenet_bn, _images(28, 1), 16, _images(28, 1), 4),
        ZooModel("resnet18", resnet18, _images(224), 1, _images(32), quick_args={"width": 8, "classes": 10}),
        ZooModel("mobilenet_v2", mobilenet_v2, _images(224), 1, _images(32),
                 quick_args={"width_mult": 0.25, "classes": 10}),
        ZooModel("efficientnet_b0", efficientnet_b0, _images(224), 1, _images(32),
                 quick_args={"width_mult": 0.25, "classes": 10}),
        ZooModel("vit", vit, _images(224), 1, _images(32),
                 quick_args={"image": 32, "patch": 8, "dim": 32, "depth": 2, "heads": 4, "classes": 10}),
        ZooModel("bert", bert, _tokens(64, 8192, mask=True), 4, _tokens(12, 100, mask=True),
                 quick_args={"hidden": 32, "layers": 2, "heads": 4, "vocab": 100, "max_len": 64}),
        ZooModel("lstm_tagger", lstm_tagger, _tokens(32, 5000, mask=False), 8, _tokens(6, 50, mask=False), 3,
                 quick_args={"vocab": 50, "embed": 8, "hidden": 16, "tags": 5}),
    )
}

