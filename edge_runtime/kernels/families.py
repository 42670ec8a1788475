"""Imports every kernel family so their decorators run (explicit registration, one line each)."""

from edge_runtime.kernels import (  # noqa: F401
    control,
    detection,
    fused,
    layout,
    math,
    nn,
    quantize,
    recurrent,
    reduce,
    shape,
    signal,
    sparse,
    text,
)
