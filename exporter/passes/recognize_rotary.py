"""Recognise the rotary position embedding that Llama-style models export op by op, and make it one
``RotaryEmbedding`` node.

transformers' ``apply_rotary_pos_emb`` (Llama, Mistral, Qwen, ...) rotates each query and key head
as ``x * cos + rotate_half(x) * sin`` with ``rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2])``
and ``cos = Unsqueeze(Cos(Concat(f, f)) [* c], 1)`` (``sin`` alike): eight nodes (two Slices, Neg,
Concat, three Muls, Add) on each of Q and K in every layer. ONNX ``RotaryEmbedding`` (opset 23,
non-interleaved, no position ids) computes the same from caches of half the head size, (B, S, D/2):
the first half of the (B, S, D) cos and sin, which a Slice added once per cos/sin makes.

Applies where x is 4-D, cos and sin are ``Unsqueeze(t, 1)`` of 3-D values t with the same known,
even last dim D (the head size, which x * cos asks of x), the Slices split x's last axis at
D/2 (a constant, or ``Shape(x)[3] / 2`` as the exporter computes it), the Concat puts the negated
second half first, each t is
``Cos``/``Sin`` of the same ``Concat(f, f)`` over the last axis (so its two halves are equal),
optionally times a scalar constant, and every value inside the chain is read by the chain alone.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model, fresh_name
from exporter.passes.pattern import ChainReader, replace_chain

LAST_OF_4D = (-1, 3)


def recognize_rotary_embeddings(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace x * cos + rotate_half(x) * sin chains by ``RotaryEmbedding``; returns the model and how many."""
    model = copy_model(model)
    found = 0
    for graph in all_graphs(model.graph):
        halves: dict[str, str] = {}  # a (B, S, D) cos or sin -> its first half, sliced once
        reader = ChainReader(graph)
        for node in list(graph.nodes):
            match = _match(reader, node)
            if match is None:
                continue
            chain, x, cos, sin, head = match
            caches = [halves.get(t) or _first_half(graph, t, head // 2, halves) for t in (cos, sin)]
            out = chain[-1].outputs[0]
            rotary = ir.Node("RotaryEmbedding", [x, *caches], [out], {}, chain[-1].name or f"{out}_rotary")
            replace_chain(graph, chain, rotary)
            found += 1
            reader = ChainReader(graph)
    return model, found


def _first_half(graph: ir.Graph, table: str, half: int, halves: dict[str, str]) -> str:
    """A Slice of ``table``'s first ``half`` entries along the last axis, placed after its producer."""
    starts = add_constant(graph, f"{table}_half_start", np.array([0], np.int64))
    ends = add_constant(graph, f"{table}_half_end", np.array([half], np.int64))
    axes = add_constant(graph, f"{table}_half_axis", np.array([-1], np.int64))
    out = fresh_name(graph, f"{table}_half")
    node = ir.Node("Slice", [table, starts, ends, axes], [out], {}, out)
    made_at = next(i for i, n in enumerate(graph.nodes) if table in n.outputs)
    graph.nodes.insert(made_at + 1, node)
    halves[table] = out
    return out


def _match(reader: ChainReader, add: ir.Node) -> tuple[list[ir.Node], str, str, str, int] | None:
    """From the final Add: its chain, x, the (B, S, D) cos and sin, and D."""
    if add.domain != "" or add.op_type != "Add" or len(add.inputs) != 2:
        return None
    for direct, rotated in (add.inputs, add.inputs[::-1]):
        found = _rotated_terms(reader, add, direct, rotated)
        if found is not None:
            return found
    return None


def _rotated_terms(reader: ChainReader, add: ir.Node, direct: str, rotated: str):
    times_cos = reader.producer(direct, "Mul")
    times_sin = reader.producer(rotated, "Mul")
    if times_cos is None or times_sin is None or direct == rotated:
        return None
    if not (reader.only_read_by(direct, add) and reader.only_read_by(rotated, add)):
        return None
    for x, cos_u in (times_cos.inputs, times_cos.inputs[::-1]):
        cos = _table(reader, cos_u, "Cos")
        if cos is None or _rank(reader, x) != 4:
            continue
        head = reader.graph.values[cos].shape[2]
        half_turn = _rotate_half(reader, times_sin, x, head)
        if half_turn is None:
            continue
        nodes, sin_u = half_turn
        sin = _table(reader, sin_u, "Sin")
        if sin is None or reader.graph.values[sin].shape[2] != head:
            continue
        if _source(reader, cos, "Cos") != _source(reader, sin, "Sin"):
            continue
        return [times_cos, *nodes, times_sin, add], x, cos, sin, head
    return None


def _rank(reader: ChainReader, name: str) -> int | None:
    record = reader.graph.values.get(name)
    return None if record is None or record.shape is None else len(record.shape)


def _rotate_half(reader: ChainReader, times_sin: ir.Node, x: str, head: int) -> tuple[list[ir.Node], str] | None:
    """``times_sin`` as Concat(-x[..., D/2:], x[..., :D/2]) * sin: the rotation's nodes and sin."""
    for rotated, sin_u in (times_sin.inputs, times_sin.inputs[::-1]):
        concat = reader.producer(rotated, "Concat")
        if concat is None or concat.attrs.get("axis") not in LAST_OF_4D or len(concat.inputs) != 2:
            continue
        neg = reader.producer(concat.inputs[0], "Neg")
        first = reader.producer(concat.inputs[1], "Slice")
        second = reader.producer(neg.inputs[0], "Slice") if neg is not None else None
        if first is None or second is None or not reader.only_read_by(rotated, times_sin):
            continue
        if not (reader.only_read_by(concat.inputs[0], concat) and reader.only_read_by(concat.inputs[1], concat)
                and reader.only_read_by(neg.inputs[0], neg)):
            continue
        if _slice_bounds(reader, first, x, head) == (0, head // 2) and \
                _slice_bounds(reader, second, x, head) == (head // 2, head):
            return [first, second, neg, concat], sin_u
    return None


def _slice_bounds(reader: ChainReader, node: ir.Node, x: str, head: int) -> tuple[int, int] | None:
    """(start, end) of a unit-step Slice of ``x``'s last axis, end clipped to ``head``; else None."""
    if node.inputs[0] != x or len(node.inputs) < 4:
        return None
    axes = constant(reader.graph, node.inputs[3])
    steps = constant(reader.graph, node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else None
    if axes is None or axes.reshape(-1).tolist() not in ([-1], [3]):
        return None
    if steps is not None and steps.reshape(-1).tolist() != [1]:
        return None
    bounds = [_bound(reader, name, x, head) for name in node.inputs[1:3]]
    if None in bounds:
        return None
    return bounds[0], min(bounds[1], head)


def _bound(reader: ChainReader, name: str, x: str, head: int) -> int | None:
    """A one-element Slice bound: a constant, or Unsqueeze(Shape(x)[3] / 2) (= head / 2)."""
    data = constant(reader.graph, name)
    if data is not None:
        return int(data.reshape(-1)[0]) if data.size == 1 and np.issubdtype(data.dtype, np.integer) else None
    unsqueeze = reader.producer(name, "Unsqueeze")
    div = reader.producer(unsqueeze.inputs[0], "Div") if unsqueeze is not None else None
    gather = reader.producer(div.inputs[0], "Gather") if div is not None else None
    shape = reader.producer(gather.inputs[0], "Shape") if gather is not None else None
    if shape is None or shape.inputs[0] != x or shape.attrs.get("start") or shape.attrs.get("end") is not None:
        return None
    index, two = constant(reader.graph, gather.inputs[1]), constant(reader.graph, div.inputs[1])
    if index is None or two is None or index.size != 1 or two.size != 1 or int(index.reshape(-1)[0]) not in (3, -1):
        return None
    return head // 2 if int(two.reshape(-1)[0]) == 2 else None


def _table(reader: ChainReader, unsqueezed: str, trig: str) -> str | None:
    """t where ``unsqueezed`` is Unsqueeze(t, 1) and t a 3-D ``trig`` table with a known, even last dim."""
    unsqueeze = reader.producer(unsqueezed, "Unsqueeze")
    if unsqueeze is None or len(unsqueeze.inputs) != 2:
        return None
    axes = constant(reader.graph, unsqueeze.inputs[1])
    table = unsqueeze.inputs[0]
    record = reader.graph.values.get(table)
    if axes is None or axes.reshape(-1).tolist() != [1] or record is None or record.shape is None:
        return None
    if len(record.shape) != 3 or record.shape[2] <= 0 or record.shape[2] % 2:
        return None
    return table if _source(reader, table, trig) is not None else None


def _source(reader: ChainReader, table: str, trig: str) -> str | None:
    """f where ``table`` is ``trig``(Concat(f, f) over the last axis) [* scalar constant]; else None."""
    node = reader.producer(table, "Mul", trig)
    if node is not None and node.op_type == "Mul":
        inner = next((a for a, b in (node.inputs, node.inputs[::-1]) if reader.scalar(b) is not None), None)
        node = reader.producer(inner, trig) if inner is not None else None
    if node is None or node.op_type != trig:
        return None
    concat = reader.producer(node.inputs[0], "Concat")
    if concat is None or concat.attrs.get("axis") not in (-1, 2) or len(concat.inputs) != 2:
        return None
    return concat.inputs[0] if concat.inputs[0] == concat.inputs[1] else None
