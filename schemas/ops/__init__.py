"""The op families. Importing this package registers every op schema (explicitly, one import per family)."""

from schemas.ops import (  # noqa: F401
    accumulators,
    control,
    data,
    dataflow,
    debugging,
    detection,
    fused,
    layout,
    math,
    nn,
    quantize,
    random,
    recurrent,
    reduce,
    shape,
    signal,
    sparse,
    summary,
    text,
    training,
)
