"""Control flow (If, Loop, Scan), sequences and optionals.

Graph attributes arrive as callables ``body(*formal_inputs) -> list of outputs``; the runtime has
already bound whatever outer-scope values the subgraph captures.

Non-tensor values:

- a sequence is a Python ``list`` of arrays. Kernels never mutate a list they receive (the same
  list may be read by several nodes); they return new lists.
- an optional holding a value is that value itself (an array or a list), so an op that expects a
  plain tensor or sequence accepts a full optional unchanged and vice versa. An empty optional is
  the sentinel ``EMPTY_OPTIONAL``. ``None`` keeps its meaning of "omitted optional input"; the
  optional ops treat it as empty too, so a graph input fed ``None`` reads as an empty optional.
"""

from __future__ import annotations

from typing import Any

from edge_runtime.kernels.registry import kernel

__all__ = ["EMPTY_OPTIONAL"]


class _EmptyOptional:
    """The value of an optional that holds nothing (ONNX ``Optional()`` with no input)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"

    def __reduce__(self):
        return (_EmptyOptional, ())


EMPTY_OPTIONAL: Any = _EmptyOptional()


# A loop that never ran cannot know how many scan outputs its body has (the kernel sees only a
# callable); it returns this many empty ones and the runtime keeps as many as the node declares.
_UNRAN_OUTPUTS = 64


def _truth(value) -> bool:
    # One-element condition tensors; bool() works on numpy and cupy arrays of any rank 0 or 1.
    return bool(value.reshape(-1)[0]) if getattr(value, "ndim", 0) else bool(value)


# --- control flow ---------------------------------------------------------------------------


@kernel("If", output_count=True)
def if_(cond, *, xp, then_branch, else_branch, n_outputs):
    """The edge runtime checks branch arity at load; a caller handing callables (the trainer) is
    checked here, since a short tuple would leave the node's last outputs silently unset."""
    which, branch = ("then_branch", then_branch) if _truth(cond) else ("else_branch", else_branch)
    outs = tuple(branch())
    if len(outs) != n_outputs:
        raise ValueError(f"If: {which} returned {len(outs)} values but the node has {n_outputs} outputs")
    return outs


@kernel("Loop")
def loop(m, cond, *v_initial, xp, body):
    """ONNX Loop: ``body(iter_num, cond, *carried) -> [cond, *carried, *scan_outputs]``.

    Runs while ``iter_num < M`` (when M is given) and the condition holds (when cond is given; a
    loop without a cond input ignores the body's condition output, as the ONNX spec says).
    Scan outputs are stacked along a new axis 0.
    """
    trip_count = None if m is None else int(m.reshape(-1)[0])
    keep_going = True if cond is None else _truth(cond)
    carried = list(v_initial)
    n = len(carried)
    scans: list[list] | None = None
    i = 0
    while keep_going and (trip_count is None or i < trip_count):
        outs = body(xp.asarray(i, dtype=xp.int64), xp.asarray(keep_going), *carried)
        if len(outs) < 1 + n:
            raise ValueError(f"Loop body returned {len(outs)} values; expected at least {1 + n}")
        if cond is not None:
            keep_going = _truth(outs[0])
        carried = list(outs[1 : 1 + n])
        if scans is None:
            scans = [[] for _ in outs[1 + n :]]
        for acc, value in zip(scans, outs[1 + n :]):
            acc.append(value)
        i += 1
    if scans is None:
        # No iteration ran, so the body never said what its scan outputs look like.
        return tuple(carried) + (xp.zeros((0,), dtype=xp.float32),) * _UNRAN_OUTPUTS
    return tuple(carried) + tuple(xp.stack(acc) for acc in scans)


@kernel("Scan")
def scan(
    *inputs,
    xp,
    body,
    num_scan_inputs,
    scan_input_axes,
    scan_input_directions,
    scan_output_axes,
    scan_output_directions,
):
    """ONNX Scan (opset 9+): ``body(*state, *scan_slices) -> [*state, *scan_output_slices]``."""
    n_state = len(inputs) - num_scan_inputs
    state = list(inputs[:n_state])
    sequences = []
    for j, x in enumerate(inputs[n_state:]):
        axis = scan_input_axes[j] if scan_input_axes else 0
        x = xp.moveaxis(x, axis % x.ndim, 0)
        if scan_input_directions and scan_input_directions[j]:
            x = x[::-1]
        sequences.append(x)
    lengths = {x.shape[0] for x in sequences}
    if len(lengths) != 1:
        raise ValueError(f"Scan inputs disagree on the sequence length: {sorted(lengths)}")
    steps = lengths.pop()
    scans: list[list] | None = None
    for t in range(steps):
        outs = body(*state, *(x[t] for x in sequences))
        state = list(outs[:n_state])
        if scans is None:
            scans = [[] for _ in outs[n_state:]]
        for acc, value in zip(scans, outs[n_state:]):
            acc.append(value)
    if scans is None:
        return tuple(state) + (xp.zeros((0,), dtype=xp.float32),) * _UNRAN_OUTPUTS
    results = []
    for k, acc in enumerate(scans):
        y = xp.stack(acc)
        if scan_output_directions and scan_output_directions[k]:
            y = y[::-1]
        axis = scan_output_axes[k] if scan_output_axes else 0
        results.append(xp.ascontiguousarray(xp.moveaxis(y, 0, axis % y.ndim)))
    return tuple(state) + tuple(results)


# --- sequences ------------------------------------------------------------------------------


def _position(position, length: int, *, insert: bool = False) -> int:
    p = int(position.reshape(-1)[0])
    hi = length if insert else length - 1
    if not -length <= p <= hi:
        raise IndexError(f"sequence position {p} is out of range for a sequence of length {length}")
    return p + length if p < 0 else p


@kernel("SequenceEmpty")
def sequence_empty(*, xp, dtype):
    return []


@kernel("SequenceConstruct")
def sequence_construct(*tensors, xp):
    return list(tensors)


@kernel("SequenceInsert")
def sequence_insert(sequence, tensor, position, *, xp):
    out = list(sequence)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(position, len(out), insert=True), tensor)
    return out


@kernel("SequenceAt")
def sequence_at(sequence, position, *, xp):
    return sequence[_position(position, len(sequence))]


@kernel("SequenceErase")
def sequence_erase(sequence, position, *, xp):
    out = list(sequence)
    del out[-1 if position is None else _position(position, len(out))]
    return out


@kernel("SequenceLength")
def sequence_length(sequence, *, xp):
    return xp.asarray(len(sequence), dtype=xp.int64)


@kernel("SplitToSequence")
def split_to_sequence(x, split, *, xp, axis, keepdims):
    axis = axis % x.ndim
    size = x.shape[axis]
    if split is None:
        parts = xp.split(x, size, axis=axis)
        return [xp.squeeze(p, axis=axis) for p in parts] if not keepdims else parts
    if split.ndim == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ValueError(f"split size must be positive, got {chunk}")
        bounds = list(range(chunk, size, chunk))
    else:
        sizes = [int(s) for s in split.tolist()]
        if sum(sizes) != size:
            raise ValueError(f"split sizes {sizes} do not add up to dimension {size} of axis {axis}")
        bounds = [sum(sizes[: k + 1]) for k in range(len(sizes) - 1)]
    return xp.split(x, bounds, axis=axis)


@kernel("ConcatFromSequence")
def concat_from_sequence(sequence, *, xp, axis, new_axis):
    if not sequence:
        raise ValueError("ConcatFromSequence needs at least one tensor")
    if new_axis:
        return xp.stack(sequence, axis=axis % (sequence[0].ndim + 1))
    return xp.concatenate(sequence, axis=axis % sequence[0].ndim)


@kernel("SequenceMap")
def sequence_map(sequence, *additional, xp, body):
    """Runs ``body`` on the i-th element of every sequence input (tensor inputs are shared)."""
    n = len(sequence)
    for extra in additional:
        if isinstance(extra, list) and len(extra) != n:
            raise ValueError(f"SequenceMap sequences differ in length: {n} and {len(extra)}")
    outputs: list[list] | None = None
    for i in range(n):
        args = [sequence[i]] + [e[i] if isinstance(e, list) else e for e in additional]
        outs = body(*args)
        if outputs is None:
            outputs = [[] for _ in outs]
        for acc, value in zip(outputs, outs):
            acc.append(value)
    if outputs is None:
        return tuple([] for _ in range(_UNRAN_OUTPUTS))
    return tuple(outputs)


# --- optionals ------------------------------------------------------------------------------


def _is_empty(value) -> bool:
    return value is None or value is EMPTY_OPTIONAL


@kernel("Optional")
def optional(value, *, xp, type):
    return EMPTY_OPTIONAL if value is None else value


@kernel("OptionalHasElement")
def optional_has_element(value, *, xp):
    return xp.asarray(not _is_empty(value))


@kernel("OptionalGetElement")
def optional_get_element(value, *, xp):
    if _is_empty(value):
        raise ValueError("OptionalGetElement on an empty optional")
    return value
