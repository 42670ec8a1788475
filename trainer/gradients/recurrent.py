"""Gradients of the LSTM ops: one step (LSTMBlockCell) and the fused whole sequence (LSTMBlockFused)."""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError


@register_gradient("LSTMBlockCell", "flowstack")
def _lstm_block_cell(node, grads):
    x, h_prev, c_prev, w, _ = node.inputs
    h, c, i, j, f, o, co = node.outputs
    dh = grads[0] if grads[0] is not None else fs("ZerosLike", [h])
    dc = grads[1] if grads[1] is not None else fs("ZerosLike", [c])
    dx, dh_prev, dc_prev, dw, db = fs("LSTMBlockCellGrad", [dh, dc, x, h_prev, c_prev, w, i, j, f, o, co], n=5)
    return [dx, dh_prev, dc_prev, dw, db]


@register_gradient("LSTMBlockFused", "flowstack")
def _lstm_block_fused(node, grads):
    x, h0, c0, w, _ = node.inputs
    y, _, _, gates, cs, co = node.outputs
    if any(gr is not None for gr in grads[3:]):
        raise GraphError(f"LSTMBlockFused node {node.name!r}: gates, cs and co are saved for the gradient and "
                         "are not differentiable; differentiate y, h_n or c_n")
    dz, dh0, dc0, dw, db = fs("LSTMBlockFusedGrad", [x, h0, c0, w, y, gates, cs, co] + list(grads[:3]), n=5)
    # dx = dz @ W_x^T as ops of their own: partial execution skips them where nothing reads dx
    # (the first layer over a fed sequence), a third of that layer's backward GEMM work.
    width = _input_size(node)
    w_x = onnx("Slice", [w, ints_const([0]), ints_const([width]), ints_const([0])])
    dx = onnx("Reshape", [onnx("Gemm", [dz, w_x], {"transB": 1}), onnx("Shape", [x])])
    return [dx, dh0, dc0, dw, db]


def _input_size(node) -> int:
    x, _, _, w, _ = node.inputs
    if x.shape is not None and x.shape[-1] is not None:
        return x.shape[-1]
    if w.shape is not None and None not in w.shape:
        return w.shape[0] - w.shape[1] // 4
    raise GraphError(f"LSTMBlockFused node {node.name!r}: the input size is unknown (x {x.shape}, W {w.shape}); "
                     "its gradient needs it")
