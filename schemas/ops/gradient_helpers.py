"""Gradient helper ops (domain ``flowstack``) for imported ONNX ops whose adjoint is no composite of
other ops: resampling (Resize, GridSample), attention, cumulative products and the matrix inverse
that the determinant's gradient needs. Kernels in ``edge_runtime/kernels/gradient_helpers.py``.
"""

from __future__ import annotations

from schemas.ops import nn  # noqa: F401  (Resize, GridSample and Attention are declared first; their attrs are reused)
from schemas.ops.rules import same_as_input
from schemas.registry import Attr, get_schema, op

D = "flowstack"

op("MatrixInverse", domain=D, inputs=["X"], outputs=["Y"], differentiable=True,
   doc="Inverse of each square matrix in the last two axes (TensorFlow's MatrixInverse).")(same_as_input(0))

op("CumProdGrad", domain=D, inputs=["dY", "X", "axis"], outputs=["dX"],
   attrs={"exclusive": Attr("int", 0), "reverse": Attr("int", 0)},
   doc="Gradient of CumProd, exact where X has zeros (no division by X).")(same_as_input(1))

op("ResizeGrad", domain=D, inputs=["dY", "X", "roi?", "scales?", "sizes?"], outputs=["dX"],
   attrs=get_schema("Resize").attrs,
   doc="Gradient of Resize with respect to X: the transpose of its per-axis interpolation (X supplies the shape).")(
    same_as_input(1))


@op("GridSampleGrad", domain=D, inputs=["dY", "X", "grid"], outputs=["dX", "dgrid"],
    attrs=get_schema("GridSample").attrs, doc="Gradients of GridSample with respect to X and the grid.")
def _grid_sample_grad(ctx):
    return [ctx.input(1), ctx.input(2)]


@op("AttentionGrad", domain=D,
    inputs=["dY", "dpresent_key?", "dpresent_value?", "dqk_matmul_output?", "Q", "K", "V", "attn_mask?",
            "past_key?", "past_value?", "nonpad_kv_seqlen?"],
    outputs=["dQ", "dK", "dV", "dattn_mask?", "dpast_key?", "dpast_value?"],
    attrs=get_schema("Attention").attrs,
    doc="Gradients of Attention with respect to Q, K, V, a float attn_mask and the past key/value cache "
        "(None where that input is absent or a boolean mask).")
def _attention_grad(ctx):
    return [ctx.input(i) for i in range(4, 10)][: ctx.num_outputs]
