"""Architectures users bring that the zoo lacks, written in PyTorch, against onnxruntime.

    python -m benchmarks.user_models                     # every model, 3 s of timed pairs each
    python -m benchmarks.user_models --models unet --budget 5
    python -m benchmarks.user_models --quick             # small inputs: a smoke run
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.user_models

``benchmarks.zoo`` holds the models issue 20's targets are judged on and ``benchmarks.hf_zoo`` the
Hugging Face ones; these three are what a mobile or edge user also exports and neither covers: a
MobileNetV3-style classifier (HardSwish, Hardsigmoid-gated squeeze-excite, 5x5 depthwise), a
4-level U-Net (transposed-convolution upsampling, concatenated skips, a large-plane decoder) and a
YOLOv8-style detector backbone and neck (SiLU, C2f blocks, SPPF's chained 5x5 max pools, nearest
upsampling). Each is exported as the zoo exports (``benchmarks.zoo.export``), converted as
``flowstack convert`` does, checked against onnxruntime and timed against it as
``benchmarks.edge_vs_onnxruntime`` times models. torch is a benchmark peer, never a dependency.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from benchmarks.edge_vs_onnxruntime import Row, bench_onnx, chosen_models, ratio_table, run_sweep
from benchmarks.zoo import export, trained_looking_parameters


def _conv(n_in: int, n_out: int, kernel: int = 1, stride: int = 1, groups: int = 1, act: type = nn.ReLU) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(n_in, n_out, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(n_out), act())


class _HardSqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(channels, channels // 4, 1), nn.Conv2d(channels // 4, channels, 1)

    def forward(self, x):
        gate = self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True))))
        return x * nn.functional.hardsigmoid(gate)


class _MobileV3Block(nn.Module):
    def __init__(self, n_in: int, expand: int, n_out: int, kernel: int, stride: int, squeeze: bool):
        super().__init__()
        self.body = nn.Sequential(
            _conv(n_in, expand, act=nn.Hardswish), _conv(expand, expand, kernel, stride, expand, nn.Hardswish),
            _HardSqueezeExcite(expand) if squeeze else nn.Identity(), _conv(expand, n_out, act=nn.Identity))
        self.residual = stride == 1 and n_in == n_out

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


def mobilenet_v3_style(classes: int = 1000) -> nn.Module:
    blocks = [(16, 64, 24, 3, 2, False), (24, 72, 24, 3, 1, False), (24, 96, 40, 5, 2, True),
              (40, 240, 40, 5, 1, True), (40, 240, 80, 3, 2, False), (80, 480, 112, 3, 1, True),
              (112, 672, 160, 5, 2, True)]
    return nn.Sequential(_conv(3, 16, 3, 2, act=nn.Hardswish), *(_MobileV3Block(*b) for b in blocks),
                         _conv(160, 576, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, classes))


class _UNet(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (16, 32, 64, 128), classes: int = 2):
        super().__init__()
        self.down = nn.ModuleList()
        n_in = 3
        for width in widths:
            self.down.append(nn.Sequential(_conv(n_in, width, 3), _conv(width, width, 3)))
            n_in = width
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        for width in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(n_in, width, 2, 2))
            self.merge.append(nn.Sequential(_conv(2 * width, width, 3), _conv(width, width, 3)))
            n_in = width
        self.head = nn.Conv2d(n_in, classes, 1)

    def forward(self, x):
        skips = []
        for i, down in enumerate(self.down):
            x = down(x)
            if i < len(self.down) - 1:
                skips.append(x)
                x = nn.functional.max_pool2d(x, 2)
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def unet() -> nn.Module:
    return _UNet()


class _C2f(nn.Module):
    def __init__(self, n_in: int, n_out: int, blocks: int = 1):
        super().__init__()
        self.half = n_out // 2
        self.split = _conv(n_in, 2 * self.half, act=nn.SiLU)
        self.join = _conv((2 + blocks) * self.half, n_out, act=nn.SiLU)
        self.blocks = nn.ModuleList(nn.Sequential(_conv(self.half, self.half, 3, act=nn.SiLU),
                                                  _conv(self.half, self.half, 3, act=nn.SiLU)) for _ in range(blocks))

    def forward(self, x):
        parts = list(self.split(x).chunk(2, 1))
        for block in self.blocks:
            parts.append(parts[-1] + block(parts[-1]))
        return self.join(torch.cat(parts, 1))


class _Sppf(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.reduce, self.join = _conv(n_in, n_in // 2, act=nn.SiLU), _conv(n_in * 2, n_out, act=nn.SiLU)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.reduce(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.join(torch.cat([x, y1, y2, self.pool(y2)], 1))


class _YoloStyle(nn.Module):
    def __init__(self, outputs: int = 84):
        super().__init__()
        s = nn.SiLU
        self.p3 = nn.Sequential(_conv(3, 16, 3, 2, act=s), _conv(16, 32, 3, 2, act=s), _C2f(32, 32),
                                _conv(32, 64, 3, 2, act=s), _C2f(64, 64, 2))
        self.p4 = nn.Sequential(_conv(64, 128, 3, 2, act=s), _C2f(128, 128, 2))
        self.p5 = nn.Sequential(_conv(128, 256, 3, 2, act=s), _C2f(256, 256), _Sppf(256, 256))
        self.neck4, self.neck3 = _C2f(256 + 128, 128), _C2f(128 + 64, 64)
        self.head = nn.Conv2d(64, outputs, 1)

    def forward(self, x):
        p3 = self.p3(x)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        up = nn.functional.interpolate
        h = self.neck4(torch.cat([up(p5, scale_factor=2, mode="nearest"), p4], 1))
        h = self.neck3(torch.cat([up(h, scale_factor=2, mode="nearest"), p3], 1))
        return self.head(h)


def yolo_style() -> nn.Module:
    return _YoloStyle()


@dataclass(frozen=True)
class UserModel:
    """A module builder and the square input side it runs at (full, and in --quick)."""

    build: Callable[[], nn.Module]
    side: int
    quick_side: int

    def feeds(self, quick: bool = False) -> dict[str, np.ndarray]:
        side = self.quick_side if quick else self.side
        return {"image": np.random.default_rng(0).random((1, 3, side, side), dtype=np.float32)}


USER_MODELS: dict[str, UserModel] = {
    "mobilenet_v3_style": UserModel(mobilenet_v3_style, 224, 64),
    "unet": UserModel(unet, 128, 32),
    "yolo_style": UserModel(yolo_style, 320, 64),
}


def run_model(name: str, quick: bool, budget_s: float) -> Row:
    spec = USER_MODELS[name]
    torch.manual_seed(0)
    module = spec.build().eval()
    trained_looking_parameters(module, 0)
    feeds = spec.feeds(quick)
    return bench_onnx(name, export(module, feeds), feeds, budget_s, conv_net=True)


def render(rows: list[Row]) -> str:
    return ratio_table(rows, "models")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(USER_MODELS)}")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timed pairs a model (default 3, quick 0.2)")
    parser.add_argument("--quick", action="store_true", help="small inputs and budgets: a smoke run, not a measurement")
    args = parser.parse_args(argv)
    names = chosen_models(parser, args.models, USER_MODELS)
    budget = args.budget if args.budget is not None else (0.2 if args.quick else 3.0)
    return run_sweep([lambda name=name: run_model(name, args.quick, budget) for name in names], render)


if __name__ == "__main__":
    raise SystemExit(main())
