"""Recognise the GELU that exporters write op by op, and make it one ``Gelu`` node.

PyTorch's ``nn.GELU()`` and BERT's ``gelu`` export as ``x * 0.5 * (1 + erf(x / sqrt 2))`` (Div,
Erf, Add, Mul, Mul: five passes over the activations, Erf among the dearest kernels);
``nn.GELU(approximate="tanh")`` and GPT-2's ``NewGELU`` as ``0.5 * x * (1 + tanh(sqrt(2 / pi) *
(x + 0.044715 * x^3)))``, with x^3 as ``Pow(x, 3)`` or ``x * (x * x)``. The Gelu kernel computes the
same function in one pass, in the input's precision. The product of x, 0.5 and (1 + ...) is
matched in each order exporters write it. Every constant must be the one of the formula (to
``CONSTANT_RTOL``), and every value inside the chain read by the chain alone; anything else is
left as it is.
"""

from __future__ import annotations

import math

from exporter import ir
from exporter.passes.graph_edit import all_graphs, copy_model
from exporter.passes.pattern import ChainReader, replace_chain

SQRT_2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715


def recognize_gelu(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace exact (Erf) and tanh GELU chains by ``Gelu``; returns the new model and how many."""
    model = copy_model(model)
    found = 0
    for graph in all_graphs(model.graph):
        while True:
            match = _first_match(graph)
            if match is None:
                break
            chain, gelu = match
            replace_chain(graph, chain, gelu)
            found += 1
    return model, found


def _first_match(graph: ir.Graph) -> tuple[list[ir.Node], ir.Node] | None:
    reader = ChainReader(graph)
    for node in graph.nodes:
        if node.domain != "":
            continue
        head = {"Erf": _erf_head, "Tanh": _tanh_head}.get(node.op_type)
        found = head(reader, node) if head else None
        if found is None:
            continue
        x, chain, approximate = found
        tail = _half_x_times_one_plus(reader, node, x)
        if tail is None:
            continue
        out = tail[-1].outputs[0]
        gelu = ir.Node("Gelu", [x], [out], {"approximate": approximate}, tail[-1].name or f"{out}_gelu")
        return chain + [node] + tail, gelu
    return None


def _erf_head(reader: ChainReader, erf: ir.Node) -> tuple[str, list[ir.Node], str] | None:
    """erf(x / sqrt 2) or erf(x * (1 / sqrt 2)): x and the scaling node."""
    scaled = erf.inputs[0]
    scale = reader.producer(scaled, "Div", "Mul")
    if scale is None or not reader.only_read_by(scaled, erf):
        return None
    if scale.op_type == "Div":
        x = scale.inputs[0] if reader.is_scalar(scale.inputs[1], SQRT_2) else None
    else:
        x = reader.scaled_by(scale, 1.0 / SQRT_2)
    return None if x is None else (x, [scale], "none")


def _tanh_head(reader: ChainReader, tanh: ir.Node) -> tuple[str, list[ir.Node], str] | None:
    """tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)): x and the nodes from x to the Tanh."""
    scaled = tanh.inputs[0]
    scale = reader.producer(scaled, "Mul")
    inner = reader.scaled_by(scale, SQRT_2_OVER_PI)
    if inner is None or not reader.only_read_by(scaled, tanh):
        return None
    add = reader.producer(inner, "Add")
    if add is None or not reader.only_read_by(inner, scale):
        return None
    for x in dict.fromkeys(add.inputs):
        term = reader.operand_besides(add, x)
        cubic = _cubic_term(reader, term, x, add) if term is not None else None
        if cubic is not None:
            return x, cubic + [add, scale], "tanh"
    return None


def _cubic_term(reader: ChainReader, term: str, x: str, add: ir.Node) -> list[ir.Node] | None:
    """0.044715 * x^3, read by ``add`` alone: its nodes, else None."""
    mul = reader.producer(term, "Mul")
    cube = reader.scaled_by(mul, TANH_CUBIC)
    if cube is None or not reader.only_read_by(term, add):
        return None
    cube_nodes = _cube(reader, cube, x)
    if cube_nodes is None or not reader.only_read_by(cube, mul):
        return None
    return cube_nodes + [mul]


def _cube(reader: ChainReader, name: str, x: str) -> list[ir.Node] | None:
    """x^3 as Pow(x, 3), or as x * (x * x) in either order: its nodes, else None."""
    node = reader.producer(name, "Pow", "Mul")
    if node is None:
        return None
    if node.op_type == "Pow":
        return [node] if node.inputs[0] == x and reader.is_scalar(node.inputs[1], 3.0) else None
    square = reader.operand_besides(node, x)
    sq = reader.producer(square, "Mul") if square is not None else None
    if sq is None or sq.inputs != [x, x] or not reader.only_read_by(square, node):
        return None
    return [sq, node]


def _half_x_times_one_plus(reader: ChainReader, head: ir.Node, x: str) -> list[ir.Node] | None:
    """From ``head`` (the Erf or Tanh) on: (1 + head) times x times 0.5, the product in any order
    (x * (1 + t) * 0.5, 0.5 * (x * (1 + t)), (x * 0.5) * (1 + t), (0.5 * x) * (1 + t), ...)."""
    t = head.outputs[0]
    plus = reader.sole_reader(t, "Add")
    if plus is None or not reader.is_scalar(reader.operand_besides(plus, t) or "", 1.0):
        return None
    one_plus = plus.outputs[0]
    first = reader.sole_reader(one_plus, "Mul")
    other = reader.operand_besides(first, one_plus) if first is not None else None
    if other is None:
        return None
    if other == x or reader.is_scalar(other, 0.5):
        second = reader.sole_reader(first.outputs[0], "Mul")
        rest = reader.operand_besides(second, first.outputs[0]) if second is not None else None
        want_x = other != x
        if rest is None or not (rest == x if want_x else reader.is_scalar(rest, 0.5)):
            return None
        return [plus, first, second]
    half_x = reader.producer(other, "Mul")
    if half_x is None or reader.scaled_by(half_x, 0.5) != x or not reader.only_read_by(other, first):
        return None
    return [plus, half_x, first]
