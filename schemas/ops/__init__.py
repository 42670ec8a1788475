"""The op families. Importing this package registers every op schema (explicitly, one import per family)."""

from schemas.ops import (  # noqa: F401
    accumulators,
    control,
    data,
    dataflow,
    detection,
    fused,
    gradient_helpers,
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
    training,
)
