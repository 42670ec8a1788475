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
