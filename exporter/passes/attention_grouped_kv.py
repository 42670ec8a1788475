"""Hand ``Attention`` its keys and values before grouped-query attention repeats them per query head.

Llama, Mistral and Qwen share each key/value head among ``n`` query heads, and their ``repeat_kv``
exports as ``Reshape(Expand(Unsqueeze(kv, 2), [B, H, n, S, D]), [B, H * n, S, D])``: two copies of
K and V, n times their size, before every attention. ONNX ``Attention`` takes 4-D K and V with
fewer heads than Q and gives query head i the key/value head i // n, which is what the repeat
builds (head h * n + r is a copy of head h); so the chain goes and Attention reads ``kv`` itself.

Applies to an Attention node whose K and V are both such chains (never one alone: Attention takes
as many key heads as value heads), where the Unsqueeze inserts axis 2 of a value known to be 4-D,
the Expand's target is ``kv``'s own dims 0, 1, 3 and 4 read from ``Shape(kv)`` around a constant n
(bare, or through the exporter's ``Where(Equal(shape, -1), 1, shape)``) and the Reshape's target
keeps ``kv``'s dims 0, 2 and 3, and the node takes no past_key/past_value (those have as many heads
as K and V). A chain whose values something else reads too (a Shape of the
repeated values, as a Llama export with a cache has) stays for that reader; the others go. Anything
else stays as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, constant, copy_model, readers, remove_nodes
from exporter.passes.pattern import ChainReader

KEY_AND_VALUE = (1, 2)  # Attention's inputs K and V
PAST_KEY_AND_VALUE = (4, 5)  # its own cache, which has as many heads as K and V


def hand_attention_grouped_kv(model: ir.Model) -> tuple[ir.Model, int]:
    """Let Attention read the key/value heads that repeat_kv would copy; returns the model and how
    many K or V inputs it rewired."""
    model = copy_model(model)
    found = 0
    for graph in all_graphs(model.graph):
        reader = ChainReader(graph)
        chains: dict[str, list[ir.Node]] = {}  # repeated value -> repeat_kv's nodes, for those rewired
        for node in graph.nodes:
            if node.domain != "" or node.op_type != "Attention" or len(node.inputs) < 3:
                continue
            if any(slot < len(node.inputs) and node.inputs[slot] for slot in PAST_KEY_AND_VALUE):
                continue
            matches = [_repeated(reader, node.inputs[slot]) for slot in KEY_AND_VALUE]
            if any(match is None for match in matches):
                continue
            for slot, (kv, chain) in zip(KEY_AND_VALUE, matches):
                chains[node.inputs[slot]] = chain
                node.inputs[slot] = kv
                found += 1
        remove_nodes(graph, _unread_chains(graph, chains.values()))
    return model, found


def _unread_chains(graph: ir.Graph, chains: Iterable[list[ir.Node]]) -> list[ir.Node]:
    """The nodes of those ``chains`` whose values nothing outside the chain reads any more."""
    read = readers(graph)
    doomed = []
    for chain in chains:
        inside = {id(n) for n in chain}
        if not any(out in graph.outputs or any(id(r) not in inside for r in read.get(out, []))
                   for n in chain for out in n.outputs):
            doomed += chain
    return doomed


def _repeated(reader: ChainReader, name: str) -> tuple[str, list[ir.Node]] | None:
    """``name`` as repeat_kv(kv): kv and the chain's three nodes (Unsqueeze, Expand, Reshape)."""
    reshape = reader.producer(name, "Reshape") if name else None
    expand = reader.producer(reshape.inputs[0], "Expand") if reshape is not None else None
    unsqueeze = reader.producer(expand.inputs[0], "Unsqueeze") if expand is not None else None
    if unsqueeze is None or len(unsqueeze.inputs) != 2:
        return None
    kv = unsqueeze.inputs[0]
    axes = constant(reader.graph, unsqueeze.inputs[1])
    if axes is None or axes.reshape(-1).tolist() not in ([2], [-3]) or _rank(reader, kv) != 4:
        return None
    target = _expand_target(reader, expand.inputs[1])
    if target is None or not all(_is_dim(reader, piece, kv, i) for piece, i in zip(target[:2] + target[3:], range(4))):
        return None
    if not isinstance(target[2], int) and _scalar_int(reader, target[2]) is None:
        return None
    merged = _shape_pieces(reader, reshape.inputs[1])
    if merged is None or len(merged) != 4 or not all(_is_dim(reader, merged[i], kv, i) for i in (0, 2, 3)):
        return None
    return kv, [unsqueeze, expand, reshape]


def _expand_target(reader: ChainReader, name: str) -> list[str | int] | None:
    """The five pieces of the Expand's target shape, through the exporter's Where(Equal(s, -1), 1, s)."""
    where = reader.producer(name, "Where")
    if where is not None:
        equal = reader.producer(where.inputs[0], "Equal")
        if equal is None or where.inputs[2] not in equal.inputs:
            return None
        name = where.inputs[2]
    pieces = _shape_pieces(reader, name)
    return pieces if pieces is not None and len(pieces) == 5 else None


def _shape_pieces(reader: ChainReader, name: str) -> list[str | int] | None:
    """The pieces of the shape ``name``: a constant's dims (once the shape arithmetic of known dims
    is folded, as for a fixed-shape export), else the one-element inputs of the Concat making it,
    those that are constants as their ints."""
    data = constant(reader.graph, name)
    if data is not None:
        return [int(d) for d in data.reshape(-1)] if np.issubdtype(data.dtype, np.integer) else None
    concat = reader.producer(name, "Concat")
    if concat is None or concat.attrs.get("axis", 0) != 0:
        return None
    return [_scalar_int(reader, piece) if constant(reader.graph, piece) is not None else piece
            for piece in concat.inputs]


def _is_dim(reader: ChainReader, piece: str | int | None, kv: str, index: int) -> bool:
    """Whether ``piece`` is kv's dim ``index``: read from Shape(kv), or a constant equal to that
    dim where kv's shape knows it."""
    if piece is None:
        return False
    if isinstance(piece, int):
        record = reader.graph.values.get(kv)
        known = None if record is None or record.shape is None else record.shape[index]
        return isinstance(known, int) and known == piece
    return _dim_of(reader, piece, kv) == index


def _dim_of(reader: ChainReader, piece: str, kv: str) -> int | None:
    """i where ``piece`` is Unsqueeze(Gather(Shape(kv), i)), kv's dim i; else None."""
    unsqueeze = reader.producer(piece, "Unsqueeze")
    gather = reader.producer(unsqueeze.inputs[0], "Gather") if unsqueeze is not None else None
    shape = reader.producer(gather.inputs[0], "Shape") if gather is not None else None
    if shape is None or shape.inputs[0] != kv or shape.attrs.get("start") or shape.attrs.get("end") is not None:
        return None
    index = _scalar_int(reader, gather.inputs[1])
    return index if index is not None and 0 <= index < 4 else None


def _scalar_int(reader: ChainReader, name: str) -> int | None:
    data = constant(reader.graph, name)
    if data is None or data.size != 1 or not np.issubdtype(data.dtype, np.integer):
        return None
    return int(data.reshape(-1)[0])


def _rank(reader: ChainReader, name: str) -> int | None:
    record = reader.graph.values.get(name)
    return None if record is None or record.shape is None else len(record.shape)
