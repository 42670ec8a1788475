"""Debugging ops (domain ``flowstack``): Print, PrintV2 and Assert, stateful for their side effects;
EnsureShape, a run-time shape check; Timestamp, the wall clock."""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import same_as_input
from schemas.registry import Attr, TensorType, op

D = "flowstack"

op("Print", domain=D, inputs=["input", "data+"], outputs=["output"], stateful=True,
   attrs={"message": Attr("string", ""), "first_n": Attr("int", -1), "summarize": Attr("int", 3)},
   doc="``input`` unchanged, printing ``message`` and the first ``summarize`` entries of each ``data`` "
       "tensor to stderr (the first ``first_n`` runs; -1: every run). Stateful: a side effect.")(same_as_input(0))
op("Assert", domain=D, inputs=["condition", "data+"], outputs=["output"], stateful=True,
   attrs={"summarize": Attr("int", 3), "message": Attr("string", "")},
   doc="Fails the run, showing ``data``, unless the boolean ``condition`` holds everywhere; outputs it.")(
    same_as_input(0))
op("PrintV2", domain=D, inputs=["inputs*"], outputs=["dummy*"], stateful=True,
   attrs={"template": Attr("string", ""), "output_stream": Attr("string", "stderr"), "end": Attr("string", "\n"),
          "summarize": Attr("int", 3)},
   doc="Writes ``template`` with each ``{}`` replaced by the next input (tensors shown with the first and last "
       "``summarize`` entries of each dim; -1: all) and ``end`` to ``output_stream`` (stderr, stdout, or "
       "file://PATH, appended). TensorFlow's tf.print; no outputs, a side effect.")(lambda ctx: [])


@op("EnsureShape", domain=D, inputs=["input"], outputs=["output"], attrs={"shape": Attr("ints")},
    doc="``input`` unchanged, failing the run unless its shape matches ``shape`` (-1: any size). The static "
        "shape is the two merged.")
def _ensure_shape(ctx):
    x = ctx.input(0)
    want = tuple(None if d < 0 else d for d in ctx.attrs["shape"])
    if x.shape is None:
        return [TensorType(x.dtype, want)]
    if len(x.shape) != len(want):
        raise ctx.fail(f"input of rank {len(x.shape)} (shape {x.shape}) is not compatible with shape {want}")
    merged = []
    for have, need in zip(x.shape, want):
        if have is not None and need is not None and have != need:
            raise ctx.fail(f"input shape {x.shape} is not compatible with shape {want}")
        merged.append(have if have is not None else need)
    return [TensorType(x.dtype, tuple(merged))]


op("Timestamp", domain=D, inputs=[], outputs=["ts"], stateful=True,
   doc="Seconds since the Unix epoch (float64, microsecond resolution) when the op runs.")(
    lambda ctx: [TensorType(np.dtype(np.float64), ())])
