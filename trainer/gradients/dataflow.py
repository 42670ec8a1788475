"""Gradients of the dataflow primitives (cond); loops are differentiated whole (trainer/control_flow.py)."""

from __future__ import annotations

from trainer.gradients.helpers import fs
from trainer.gradients.registry import register_gradient

D = "flowstack"


@register_gradient("Switch", D)
def _switch(node, grads):
    # The taken branch sent gradient back; the other output is dead at run time, so a zero
    # stand-in guarded by the same predicate keeps the Merge well formed.
    data, pred = node.inputs
    gf, gt = grads
    if gf is None and gt is None:
        return [None, None]
    if gf is None:
        gf = fs("Switch", [fs("ZerosLike", [data]), pred], n=2)[0]
    if gt is None:
        gt = fs("Switch", [fs("ZerosLike", [data]), pred], n=2)[1]
    return [fs("Merge", [gf, gt], n=2)[0], None]


@register_gradient("Merge", D)
def _merge(node, grads):
    pred = node.cond_pred
    g = grads[0]
    if g is None:
        return [None] * len(node.inputs)
    false_g, true_g = fs("Switch", [g, pred], n=2)
    return [false_g, true_g]
