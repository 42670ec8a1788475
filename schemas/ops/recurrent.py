"""Recurrent layers: RNN, GRU, LSTM (ONNX semantics).

Not differentiable here: the trainer builds its own cells from primitive ops.
"""

from __future__ import annotations

from schemas.registry import Attr, TensorType, op

_COMMON_ATTRS = {
    "activation_alpha": Attr("floats"),
    "activation_beta": Attr("floats"),
    "activations": Attr("strings"),
    "clip": Attr("float"),
    "direction": Attr("string", "forward"),
    "hidden_size": Attr("int"),
    "layout": Attr("int", 0),
}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _recurrent_rule(gates: int, state_outputs: int):
    """Rule for a layer with ``gates`` weight blocks; outputs Y and ``state_outputs`` final states."""

    def rule(ctx):
        x, w, r = ctx.input(0), ctx.input(1), ctx.input(2)
        for name, t in (("X", x), ("W", w), ("R", r)):
            if t.rank is not None and t.rank != 3:
                raise ctx.fail(f"{name} must have rank 3, got shape {t.shape}")
        direction = ctx.attrs["direction"]
        if direction not in _DIRECTIONS:
            raise ctx.fail(f"direction must be one of {sorted(_DIRECTIONS)}, got {direction!r}")
        d = _DIRECTIONS[direction]
        for name, t in (("W", w), ("R", r)):
            if t.shape is not None and t.shape[0] is not None and t.shape[0] != d:
                raise ctx.fail(f"{name} has {t.shape[0]} directions; direction={direction!r} needs {d}")
        hidden = ctx.attrs["hidden_size"]
        if hidden is None and r.shape is not None:
            hidden = r.shape[2]
        if hidden is None and w.shape is not None and w.shape[1] is not None:
            hidden = w.shape[1] // gates
        for name, t, dim in (("W", w, 1), ("R", r, 1), ("R", r, 2)):
            expect = hidden * gates if dim == 1 else hidden
            if hidden is not None and t.shape is not None and t.shape[dim] not in (None, expect):
                raise ctx.fail(f"{name} dim {dim} is {t.shape[dim]}; hidden_size {hidden} needs {expect}")
        if x.shape is None:
            seq = batch = None
        elif ctx.attrs["layout"] == 0:
            seq, batch = x.shape[0], x.shape[1]
        else:
            batch, seq = x.shape[0], x.shape[1]
        if ctx.attrs["layout"] == 0:
            y, state = (seq, d, batch, hidden), (d, batch, hidden)
        else:
            y, state = (batch, seq, d, hidden), (batch, d, hidden)
        return [TensorType(x.dtype, y)] + [TensorType(x.dtype, state)] * state_outputs

    return rule


_INPUTS = ["X", "W", "R", "B?", "sequence_lens?", "initial_h?"]

op("RNN", inputs=_INPUTS, outputs=["Y?", "Y_h?"], attrs=_COMMON_ATTRS)(_recurrent_rule(1, 1))

op(
    "GRU",
    inputs=_INPUTS,
    outputs=["Y?", "Y_h?"],
    attrs={**_COMMON_ATTRS, "linear_before_reset": Attr("int", 0)},
)(_recurrent_rule(3, 1))

op(
    "LSTM",
    inputs=_INPUTS + ["initial_c?", "P?"],
    outputs=["Y?", "Y_h?", "Y_c?"],
    attrs={**_COMMON_ATTRS, "input_forget": Attr("int", 0)},
)(_recurrent_rule(4, 2))


# -- flowstack ops: TensorFlow's fused LSTM blocks, for training ----------------------------------
D = "flowstack"


@op("LSTMBlockCell", domain=D, inputs=["x", "h_prev", "c_prev", "W", "b"],
    outputs=["h", "c", "i", "j", "f", "o", "co"], attrs={"forget_bias": Attr("float", 0.0)}, differentiable=True,
    doc="One LSTM step, fused, in TensorFlow's gate layout: z = [x, h_prev] @ W + b split into column blocks "
        "i, j, f, o (input gate, candidate, forget gate, output gate, as TensorFlow 1.x's LSTM cells and "
        "LSTMBlockCell op); c = sigmoid(f + forget_bias)*c_prev + sigmoid(i)*tanh(j), h = sigmoid(o)*tanh(c). "
        "The gate activations and co = tanh(c) are outputs too, for the gradient.")
def _lstm_block_cell(ctx):
    x, h, w = ctx.input(0), ctx.input(1), ctx.input(3)
    if w.shape is not None and w.shape[1] is not None:
        if w.shape[1] % 4:
            raise ctx.fail(f"W must have 4*hidden columns, got shape {w.shape}")
        if x.shape is not None and h.shape is not None and None not in (x.shape[1], h.shape[1], w.shape[0]):
            if x.shape[1] + h.shape[1] != w.shape[0]:
                raise ctx.fail(f"W has {w.shape[0]} rows but x {x.shape} and h_prev {h.shape} give "
                               f"{x.shape[1] + h.shape[1]}")
    state = TensorType(x.dtype, None if h.shape is None else tuple(h.shape))
    return [state] * 7


op("LSTMBlockCellGrad", domain=D,
   inputs=["dh", "dc", "x", "h_prev", "c_prev", "W", "i", "j", "f", "o", "co"],
   outputs=["dx", "dh_prev", "dc_prev", "dW", "db"], attrs={"need_dx": Attr("int", 1)},
   doc="Gradient of LSTMBlockCell. need_dx=0 skips dx (None) where nothing reads it, e.g. a fed "
       "input sequence: a fifth of the step's backward GEMM work for the first layer.")(
    lambda ctx: [ctx.input(2), ctx.input(3), ctx.input(4), ctx.input(5),
                 TensorType(ctx.input(5).dtype, None if ctx.input(5).shape is None else (ctx.input(5).shape[1],))])


def _differ(a, b) -> bool:
    return a is not None and b is not None and a != b


def _lstm_fused_dims(ctx):
    """(T, B, I, H) of LSTMBlockFused's inputs, None where unknown; fails naming the shapes that disagree."""
    x, h0, c0, w = (ctx.input(k) for k in range(4))
    for name, t, rank in (("x", x, 3), ("h0", h0, 2), ("c0", c0, 2), ("W", w, 2)):
        if t.shape is not None and len(t.shape) != rank:
            layout = {"x": "[time, batch, input]", "W": "[input + hidden, 4 * hidden]"}.get(name, "[batch, hidden]")
            raise ctx.fail(f"{name} must be {layout}, got shape {t.shape}")
    xs = x.shape or (None,) * 3
    rows, cols = w.shape or (None, None)
    if cols is not None and cols % 4:
        raise ctx.fail(f"W must have 4 * hidden columns, got shape {w.shape}")
    hidden = cols // 4 if cols is not None else None
    batch = xs[1]
    for name, t in (("h0", h0), ("c0", c0)):
        if t.shape is None:
            continue
        if hidden is None:
            hidden = t.shape[1]
        if batch is None:
            batch = t.shape[0]
        if _differ(t.shape[0], batch) or _differ(t.shape[1], hidden):
            raise ctx.fail(f"{name} of shape {t.shape} does not match x {x.shape} and W {w.shape} "
                           f"(expected [batch {batch}, hidden {hidden}])")
    if None not in (rows, xs[2], hidden) and rows != xs[2] + hidden:
        raise ctx.fail(f"W has {rows} rows but x {x.shape} (input size {xs[2]}) and hidden size {hidden} "
                       f"need {xs[2] + hidden}")
    return xs[0], batch, xs[2], hidden


@op("LSTMBlockFused", domain=D, inputs=["x", "h0", "c0", "W", "b"],
    outputs=["y", "h_n", "c_n", "gates", "cs", "co"], attrs={"forget_bias": Attr("float", 0.0)},
    differentiable=True,
    doc="A whole time-major LSTM sequence as one op (TensorFlow's LSTMBlockFusedCell / BlockLSTM): "
        "x [T, B, I] from state h0, c0 [B, H] with W [I + H, 4H] and b [4H] in LSTMBlockCell's gate layout "
        "(TensorFlow's i, j, f, o), so the weights are interchangeable. y [T, B, H] holds every step's h, h_n "
        "and c_n [B, H] the final state. gates [T, B, 4H] (the activations i, j, f, o), cs [T, B, H] (each c) and "
        "co [T, B, H] (tanh(c)) are saved for the gradient, not differentiable.")
def _lstm_block_fused(ctx):
    steps, batch, _, hidden = _lstm_fused_dims(ctx)
    dtype = ctx.input(0).dtype
    four = None if hidden is None else 4 * hidden
    seq, state = TensorType(dtype, (steps, batch, hidden)), TensorType(dtype, (batch, hidden))
    return [seq, state, state, TensorType(dtype, (steps, batch, four)), seq, seq]


@op("LSTMBlockFusedGrad", domain=D,
    inputs=["x", "h0", "c0", "W", "y", "gates", "cs", "co", "dy?", "dh_n?", "dc_n?"],
    outputs=["dz", "dh0", "dc0", "dW", "db"],
    doc="Gradient of LSTMBlockFused from those of y, h_n and c_n (each optional: absent is zero). dz "
        "[T * B, 4H] is the gates' pre-activation gradient; the gradient rule builds dx = dz @ W[:I]^T "
        "from it as ops of their own, which partial execution skips where nothing reads dx.")
def _lstm_block_fused_grad(ctx):
    steps, batch, _, hidden = _lstm_fused_dims(ctx)
    dtype = ctx.input(0).dtype
    rows = None if None in (steps, batch) else steps * batch
    state = TensorType(dtype, (batch, hidden))
    return [TensorType(dtype, (rows, None if hidden is None else 4 * hidden)), state, state, ctx.input(3),
            TensorType(dtype, (None if hidden is None else 4 * hidden,))]
