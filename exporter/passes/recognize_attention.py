"""Recognise the scaled dot-product attention that exporters write op by op, and make it one node.

PyTorch (``nn.MultiheadAttention``, ``F.scaled_dot_product_attention``, transformers' BERT) exports
attention over (batch, heads, sequence, head) tensors as::

    MatMul(Q * s, Transpose(K) * s) [* c | / c] [+ mask] -> Softmax(last axis)
        [-> Where(IsNaN(p), 0, p)] -> MatMul(p, V)

with ``s`` a scalar constant or ``sqrt(1 / sqrt(head size))`` computed from ``Shape(Q)`` (the
default scale), or the scale applied to the product instead. The ONNX ``Attention`` op (4-D
inputs) computes the same in one node: the scale becomes its ``scale`` attribute (left out for the
default), the additive mask its ``attn_mask``. ``Attention`` gives zeros for a row whose mask
disallows every key, which is what the ``Where(IsNaN)`` guard turns Softmax's NaN into.

Near misses stay as they are: a mask added after the Softmax, a scale on V or on the
probabilities, a Softmax over another axis, an inner value read outside the chain.
"""

from __future__ import annotations

from exporter import ir
from exporter.passes.graph_edit import constant
from exporter.passes.pattern import ChainReader, rewrite_matches

# Marks a factor of sqrt(1 / sqrt(x's last dim)), as (SQRT_DEFAULT, x): on both operands with x = Q
# it makes Attention's default scale.
SQRT_DEFAULT = "sqrt_default"
LAST_AXIS_OF_4D = (-1, 3)


def recognize_attention(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace MatMul-scale-(mask)-Softmax-MatMul chains over 4-D heads by ``Attention``."""
    return rewrite_matches(model, _match)


def _match(reader: ChainReader, softmax: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    if softmax.domain != "" or softmax.op_type != "Softmax" or softmax.attrs.get("axis") not in LAST_AXIS_OF_4D:
        return None
    after = _probabilities_times_v(reader, softmax)
    if after is None:
        return None
    tail, v, out_node = after
    if _rank(reader, v) not in (None, 4):
        return None  # Attention reads 3-D Q and V as (batch, sequence, heads * size)
    logits = softmax.inputs[0]
    if not reader.only_read_by(logits, softmax):
        return None
    chain, mask, head = [], None, _scaled_product(reader, logits)
    add = reader.producer(logits, "Add")
    if head is None and add is not None:
        for candidate in dict.fromkeys(add.inputs):
            head = _scaled_product(reader, candidate) if reader.only_read_by(candidate, add) else None
            if head is not None:
                chain, mask = [add], reader.operand_besides(add, candidate)
                break
    if head is None:
        return None
    product_chain, q, k, scale = head
    attrs = {} if scale is None else {"scale": float(scale)}
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    node = ir.Node("Attention", inputs, list(out_node.outputs), attrs, out_node.name or f"{out_node.outputs[0]}_attention")
    return product_chain + chain + [softmax] + tail, node


def _probabilities_times_v(reader: ChainReader, softmax: ir.Node) -> tuple[list[ir.Node], str, ir.Node] | None:
    """From the Softmax on: MatMul(p, V), or through ``Where(IsNaN(p), 0, p)`` first."""
    p = softmax.outputs[0]
    matmul = reader.sole_reader(p, "MatMul")
    guard: list[ir.Node] = []
    if matmul is None:
        guard = _nan_guard(reader, p)
        if guard is None:
            return None
        matmul = reader.sole_reader(guard[-1].outputs[0], "MatMul")
        p = guard[-1].outputs[0]
    if matmul is None or matmul.inputs[0] != p or matmul.inputs[1] == p:
        return None
    return guard + [matmul], matmul.inputs[1], matmul


def _nan_guard(reader: ChainReader, p: str) -> list[ir.Node] | None:
    """``Where(IsNaN(p), 0, p)`` reading ``p`` with nothing else: its two nodes."""
    if p in reader.graph.outputs:
        return None
    nodes = reader.read.get(p, [])
    isnan = next((n for n in nodes if n.op_type == "IsNaN" and n.domain == ""), None)
    where = next((n for n in nodes if n.op_type == "Where" and n.domain == ""), None)
    if len(nodes) != 2 or isnan is None or where is None:
        return None
    if where.inputs != [isnan.outputs[0], where.inputs[1], p] or not reader.only_read_by(isnan.outputs[0], where):
        return None
    return [isnan, where] if reader.is_scalar(where.inputs[1], 0.0) else None


def _scaled_product(reader: ChainReader, scores: str) -> tuple[list[ir.Node], str, str, float | None] | None:
    """``scores`` as MatMul(Q [* s], Kᵀ [* s]) [* c | / c]: its nodes, Q, K and the scale (None: default)."""
    post, chain = 1.0, []
    scaled = reader.producer(scores, "Mul", "Div")
    if scaled is not None:
        product = scaled.inputs[0]
        c = reader.scalar(scaled.inputs[1])
        if scaled.op_type == "Mul" and c is None:
            product, c = scaled.inputs[1], reader.scalar(scaled.inputs[0])
        if c is None or c == 0.0 or not reader.only_read_by(product, scaled):
            return None
        post = c if scaled.op_type == "Mul" else 1.0 / c
        chain.append(scaled)
        scores = product
    matmul = reader.producer(scores, "MatMul")
    if matmul is None:
        return None
    q, q_factor, q_nodes = _factor(reader, matmul.inputs[0], matmul)
    kt, k_factor, k_nodes = _factor(reader, matmul.inputs[1], matmul)
    scale = _combined_scale(q, q_factor, k_factor, post)
    if scale is False or (scale == 1.0 and not (q_nodes or k_nodes or chain)):
        return None  # no scale anywhere: a product of Q and K, not attention's
    if _rank(reader, q) not in (None, 4):
        return None
    k = _untransposed(reader, kt, k_nodes[-1] if k_nodes else matmul)  # last: it may edit the Transpose
    if k is None:
        return None
    k_name, k_nodes_gone = k
    return q_nodes + k_nodes + k_nodes_gone + [matmul] + chain, q, k_name, scale


def _factor(reader: ChainReader, name: str, user: ir.Node) -> tuple[str, float | tuple[str, str], list[ir.Node]]:
    """An operand of the product with its scalar factor: (operand, factor, [the Mul]) or (name, 1.0, [])."""
    mul = reader.producer(name, "Mul")
    if mul is None or not reader.only_read_by(name, user):
        return name, 1.0, []
    for operand, factor in (mul.inputs, mul.inputs[::-1]):
        value = reader.scalar(factor)
        if value is not None:
            return operand, value, [mul]
        shape_of = _sqrt_default_scale_of(reader, factor)
        if shape_of is not None:
            return operand, (SQRT_DEFAULT, shape_of), [mul]
    return name, 1.0, []


def _sqrt_default_scale_of(reader: ChainReader, name: str) -> str | None:
    """x where ``name`` is ``Sqrt(1 / Sqrt(Cast(Slice(Shape(x), -1))))``, sqrt(1 / sqrt(x's last dim)); else None."""
    outer = reader.producer(name, "Sqrt")
    div = reader.producer(outer.inputs[0], "Div") if outer else None
    if div is None or not reader.is_scalar(div.inputs[0], 1.0):
        return None
    inner = reader.producer(div.inputs[1], "Sqrt")
    cast = reader.producer(inner.inputs[0], "Cast") if inner else None
    sliced = reader.producer(cast.inputs[0], "Slice") if cast else None
    shape = reader.producer(sliced.inputs[0], "Shape") if sliced else None
    if shape is None or len(sliced.inputs) < 3 or len(sliced.inputs) > 4:
        return None
    starts, ends = constant(reader.graph, sliced.inputs[1]), constant(reader.graph, sliced.inputs[2])
    if starts is None or ends is None or starts.size != 1 or ends.size != 1:
        return None
    if int(starts.reshape(-1)[0]) != -1 or int(ends.reshape(-1)[0]) < 4:  # [-1:] of a rank-4 shape
        return None
    return shape.inputs[0]


def _untransposed(reader: ChainReader, kt: str, user: ir.Node) -> tuple[str, list[ir.Node]] | None:
    """K from Kᵀ = Transpose(X, perm) over 4-D: X where perm swaps the last two axes (the Transpose goes),
    else the Transpose kept with the last two axes of its perm swapped back."""
    transpose = reader.producer(kt, "Transpose")
    if transpose is None or not reader.only_read_by(kt, user):
        return None
    perm = list(transpose.attrs.get("perm") or [])
    if len(perm) != 4:
        return None
    perm[2], perm[3] = perm[3], perm[2]
    if perm == [0, 1, 2, 3]:
        return transpose.inputs[0], [transpose]
    transpose.attrs["perm"] = perm  # the match is final here: the rewrite keeps this Transpose as K
    record = reader.graph.values.get(kt)
    if record is not None:
        record.shape = None  # its declared shape was Kᵀ's
    return kt, []


def _rank(reader: ChainReader, name: str) -> int | None:
    record = reader.graph.values.get(name)
    return None if record is None or record.shape is None else len(record.shape)


def _combined_scale(q: str, q_factor, k_factor, post: float) -> float | None | bool:
    """The product of the factors: None for the default scale (sqrt(1 / sqrt(Q's head size)) on both
    operands), False where a computed factor is anything else."""
    default = (SQRT_DEFAULT, q)
    if q_factor == default and k_factor == default:
        return None if post == 1.0 else False
    if isinstance(q_factor, tuple) or isinstance(k_factor, tuple):
        return False
    return q_factor * k_factor * post
