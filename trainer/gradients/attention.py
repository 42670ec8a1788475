"""Gradients of the transformer ops: Attention and RotaryEmbedding."""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError

reg = register_gradient


@reg("Attention")
def _attention(node, grads):
    # Every output can carry gradient: Y, the present key/value cache (past concatenated with
    # K/V) and the qk_matmul_output; AttentionGrad takes them all in one pass.
    ins = list(node.inputs) + [None] * (7 - len(node.inputs))
    mask, past_key, past_value = ins[3:6]
    dy = grads[0] if grads[0] is not None else fs("ZerosLike", [node.outputs[0]])
    inputs = [dy, *(list(grads[1:]) + [None] * 3)[:3], *ins]
    while inputs[-1] is None:
        inputs.pop()
    dq, dk, dv, dmask, dpast_key, dpast_value = fs("AttentionGrad", inputs, dict(node.attrs), n=6)
    float_mask = mask is not None and mask.dtype is not None and mask.dtype.kind == "f"
    result = [dq, dk, dv, dmask if float_mask else None, dpast_key if past_key is not None else None,
              dpast_value if past_value is not None else None, None]
    return result[: len(node.inputs)]


def _halves(t, node, half):
    """The two halves that RotaryEmbedding rotates against each other, as (B, S, heads, half)."""
    if len(t.shape) == 4:  # (B, H, S, D)
        t = onnx("Transpose", [t], {"perm": [0, 2, 1, 3]})
    else:  # (B, S, H*D)
        t = onnx("Reshape", [t, ints_const([0, 0, node.attrs["num_heads"], -1])])
    if node.attrs["interleaved"]:
        starts, step = (0, 1), 2
    else:
        starts, step = (0, half), 1
    return [onnx("Slice", [t, ints_const([s]), ints_const([s + step * half]), ints_const([3]), ints_const([step])])
            for s in starts]


def _to_cache(d, cache, position_ids):
    """Per-position cache gradient (B, S, half) summed into the cache rows the positions read."""
    if position_ids is None:
        return d
    rows = onnx("Unsqueeze", [position_ids, ints_const([-1])])
    return onnx("ScatterND", [fs("ZerosLike", [cache]), rows, d], {"reduction": "add"})


@reg("RotaryEmbedding")
def _rotary_embedding(node, grads):
    # A rotation by the cached angle; its transpose rotates back, i.e. the same op with -sin.
    x, cos, sin = node.inputs[:3]
    position_ids = node.inputs[3] if len(node.inputs) > 3 else None
    g = grads[0]
    dx = onnx("RotaryEmbedding", [g, cos, -sin] + ([position_ids] if position_ids is not None else []),
              dict(node.attrs))
    # real = cos*x1 - sin*x2 and imag = sin*x1 + cos*x2, summed over heads for the caches.
    half = None if cos.shape is None else cos.shape[-1]
    if half is None or x.shape is None:
        raise GraphError(f"RotaryEmbedding gradient needs the rank of {x.name} and the last dim of {cos.name}")
    x1, x2 = _halves(x, node, half)
    g1, g2 = _halves(g, node, half)
    heads = ints_const([2])
    dcos = onnx("ReduceSum", [g1 * x1 + g2 * x2, heads], {"keepdims": 0})
    dsin = onnx("ReduceSum", [g2 * x1 - g1 * x2, heads], {"keepdims": 0})
    return [dx, _to_cache(dcos, cos, position_ids), _to_cache(dsin, sin, position_ids), None][: len(node.inputs)]
