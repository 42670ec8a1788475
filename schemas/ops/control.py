"""Control flow (If, Loop, Scan), sequences and optionals.

Sequences and optionals are not tensors, but the registry describes every value with a
``TensorType``. By convention a sequence's type is ``TensorType(element dtype, None)`` (rank
unknown, as no single shape describes it) and an optional's type is its element's type. Outputs
that depend on what a subgraph computes are ``UNKNOWN``: the rule sees graph attributes as opaque
values.
"""

from __future__ import annotations

import numpy as np

from schemas import dtypes
from schemas.ops.rules import BOOL, INT64, const_ints
from schemas.registry import REQUIRED, UNKNOWN, Attr, TensorType, op


def _check_scalar_condition(ctx, index: int, what: str) -> None:
    t = ctx.input(index)
    if t.dtype is not None and t.dtype != BOOL:
        raise ctx.fail(f"{what} must be bool, got {t.dtype}")
    if t.shape is not None and any(d is not None and d != 1 for d in t.shape):
        raise ctx.fail(f"{what} must hold exactly one element, got shape {t.shape}")


@op(
    "If",
    inputs=["cond"],
    outputs=["outputs+"],
    attrs={"then_branch": Attr("graph", REQUIRED), "else_branch": Attr("graph", REQUIRED)},
)
def _if(ctx):
    """Runs one of two subgraphs; its outputs are whatever the chosen branch yields."""
    _check_scalar_condition(ctx, 0, "cond")
    return [UNKNOWN] * ctx.num_outputs


@op(
    "Loop",
    inputs=["M?", "cond?", "v_initial*"],
    outputs=["v_final_and_scan_outputs+"],
    attrs={"body": Attr("graph", REQUIRED)},
)
def _loop(ctx):
    """Loop-carried values keep their dtype (shapes may change per iteration); scan outputs are unknown."""
    m = ctx.input(0)
    if m.dtype is not None and m.dtype != INT64:
        raise ctx.fail(f"trip count M must be int64, got {m.dtype}")
    _check_scalar_condition(ctx, 1, "cond")
    carried = [TensorType(ctx.input(i).dtype, None) for i in range(2, ctx.num_inputs)]
    return (carried + [UNKNOWN] * ctx.num_outputs)[: ctx.num_outputs]


@op(
    "Scan",
    inputs=["initial_state_and_scan_inputs+"],
    outputs=["final_state_and_scan_outputs+"],
    attrs={
        "body": Attr("graph", REQUIRED),
        "num_scan_inputs": Attr("int", REQUIRED),
        "scan_input_axes": Attr("ints"),
        "scan_input_directions": Attr("ints"),
        "scan_output_axes": Attr("ints"),
        "scan_output_directions": Attr("ints"),
    },
)
def _scan(ctx):
    """Final states have the initial states' types; scan outputs depend on the body."""
    n_scan = ctx.attrs["num_scan_inputs"]
    n_state = ctx.num_inputs - n_scan
    if not 1 <= n_scan <= ctx.num_inputs:
        raise ctx.fail(f"num_scan_inputs={n_scan} but the node has {ctx.num_inputs} inputs")
    for key in ("scan_input_axes", "scan_input_directions"):
        given = ctx.attrs[key]
        if given is not None and len(given) != n_scan:
            raise ctx.fail(f"{key} has {len(given)} entries for {n_scan} scan inputs")
    states = [ctx.input(i) for i in range(n_state)]
    return (states + [UNKNOWN] * ctx.num_outputs)[: ctx.num_outputs]


# --- sequences ------------------------------------------------------------------------------


def _sequence_of(dtype) -> TensorType:
    return TensorType(dtype, None)


@op("SequenceEmpty", inputs=[], outputs=["output"], attrs={"dtype": Attr("int")})
def _sequence_empty(ctx):
    """An empty sequence; ``dtype`` is the ONNX element type code (float when absent)."""
    code = dtypes.FLOAT if ctx.attrs["dtype"] is None else ctx.attrs["dtype"]
    try:
        return [_sequence_of(dtypes.to_numpy(code))]
    except dtypes.DTypeError:
        return [_sequence_of(None)]


@op("SequenceConstruct", inputs=["inputs+"], outputs=["output_sequence"])
def _sequence_construct(ctx):
    dtypes = {ctx.input(i).dtype for i in range(ctx.num_inputs)} - {None}
    if len(dtypes) > 1:
        raise ctx.fail(f"all tensors of a sequence share one dtype, got {sorted(map(str, dtypes))}")
    return [_sequence_of(dtypes.pop() if dtypes else None)]


def _check_position(ctx, index: int) -> None:
    t = ctx.input(index)
    if t.dtype is not None and t.dtype not in (np.dtype(np.int32), INT64):
        raise ctx.fail(f"position must be int32 or int64, got {t.dtype}")
    if t.shape is not None and len(t.shape) != 0:
        raise ctx.fail(f"position must be a scalar, got shape {t.shape}")


@op("SequenceInsert", inputs=["input_sequence", "tensor", "position?"], outputs=["output_sequence"])
def _sequence_insert(ctx):
    seq, tensor = ctx.input(0), ctx.input(1)
    if seq.dtype is not None and tensor.dtype is not None and seq.dtype != tensor.dtype:
        raise ctx.fail(f"cannot insert a {tensor.dtype} tensor into a sequence of {seq.dtype}")
    _check_position(ctx, 2)
    return [_sequence_of(seq.dtype or tensor.dtype)]


@op("SequenceAt", inputs=["input_sequence", "position"], outputs=["tensor"])
def _sequence_at(ctx):
    _check_position(ctx, 1)
    return [TensorType(ctx.input(0).dtype, None)]


@op("SequenceErase", inputs=["input_sequence", "position?"], outputs=["output_sequence"])
def _sequence_erase(ctx):
    _check_position(ctx, 1)
    return [_sequence_of(ctx.input(0).dtype)]


@op("SequenceLength", inputs=["input_sequence"], outputs=["length"])
def _sequence_length(ctx):
    return [TensorType(INT64, ())]


@op(
    "SplitToSequence",
    inputs=["input", "split?"],
    outputs=["output_sequence"],
    attrs={"axis": Attr("int", 0), "keepdims": Attr("int", 1)},
)
def _split_to_sequence(ctx):
    x = ctx.input(0)
    if x.shape is not None and not -max(len(x.shape), 1) <= ctx.attrs["axis"] < max(len(x.shape), 1):
        raise ctx.fail(f"axis {ctx.attrs['axis']} is out of range for rank {len(x.shape)}")
    split = const_ints(ctx, 1)
    if split is not None and any(s < 0 for s in split):
        raise ctx.fail(f"split sizes must be non-negative, got {split}")
    return [_sequence_of(x.dtype)]


@op(
    "ConcatFromSequence",
    inputs=["input_sequence"],
    outputs=["concat_result"],
    attrs={"axis": Attr("int", REQUIRED), "new_axis": Attr("int", 0)},
)
def _concat_from_sequence(ctx):
    return [TensorType(ctx.input(0).dtype, None)]


@op(
    "SequenceMap",
    inputs=["input_sequence", "additional_inputs*"],
    outputs=["out_sequence+"],
    attrs={"body": Attr("graph", REQUIRED)},
)
def _sequence_map(ctx):
    """Each output is a sequence whose element type the body decides."""
    return [_sequence_of(None)] * ctx.num_outputs


# --- optionals ------------------------------------------------------------------------------


@op("Optional", inputs=["input?"], outputs=["output"], attrs={"type": Attr("string")})
def _optional(ctx):
    """Wraps a value (or nothing) as an optional. ``type`` names the element type of an empty
    optional; it is informational only, as an empty optional needs no element type to run."""
    return [ctx.input(0)]


@op("OptionalHasElement", inputs=["input?"], outputs=["output"])
def _optional_has_element(ctx):
    return [TensorType(BOOL, ())]


@op("OptionalGetElement", inputs=["input"], outputs=["output"])
def _optional_get_element(ctx):
    return [ctx.input(0)]
