"""Debugging ops (domain ``flowstack``): Print and Assert, stateful for their side effects."""

from __future__ import annotations

from schemas.ops.rules import same_as_input
from schemas.registry import Attr, op

D = "flowstack"

op("Print", domain=D, inputs=["input", "data+"], outputs=["output"], stateful=True,
   attrs={"message": Attr("string", ""), "first_n": Attr("int", -1), "summarize": Attr("int", 3)},
   doc="``input`` unchanged, printing ``message`` and the first ``summarize`` entries of each ``data`` "
       "tensor to stderr (the first ``first_n`` runs; -1: every run). Stateful: a side effect.")(same_as_input(0))
op("Assert", domain=D, inputs=["condition", "data+"], outputs=["output"], stateful=True,
   attrs={"summarize": Attr("int", 3), "message": Attr("string", "")},
   doc="Fails the run, showing ``data``, unless the boolean ``condition`` holds everywhere; outputs it.")(
    same_as_input(0))
