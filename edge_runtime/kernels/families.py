"""Imports every kernel family so their decorators run (explicit registration, one line each)."""

from edge_runtime.kernels import control, fused, math, nn, quantize, recurrent, reduce, shape  # noqa: F401
