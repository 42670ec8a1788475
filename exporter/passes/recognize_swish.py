"""Recognise an activation written as x times a gate of x, and make it one node.

PyTorch exports ``nn.SiLU`` (EfficientNet's activation) as ``Mul(x, Sigmoid(x))``, and older
exporters write hard swish as ``Mul(x, HardSigmoid(x))`` with alpha 1/6: ``Swish`` (alpha 1) and
``HardSwish`` compute them in one node, and ``fuse_activations`` then folds a Swish into the
convolution before it, which opens the channels-last and pointwise fusions to these networks.
Applies where the gate's output is read by that Mul alone; a HardSigmoid only with
HardSwish's constants.
"""

from __future__ import annotations

import math

from exporter import ir
from exporter.passes.pattern import CONSTANT_RTOL, ChainReader, rewrite_matches


def _sigmoid_gate(gate: ir.Node) -> tuple[str, dict] | None:
    return "Swish", {"alpha": 1.0}


def _hard_sigmoid_gate(gate: ir.Node) -> tuple[str, dict] | None:
    alpha, beta = gate.attrs.get("alpha", 0.2), gate.attrs.get("beta", 0.5)
    if math.isclose(alpha, 1 / 6, rel_tol=CONSTANT_RTOL) and math.isclose(beta, 0.5, rel_tol=CONSTANT_RTOL):
        return "HardSwish", {}
    return None


# gate op -> the single op that x * gate(x) is (with its attributes), or None where the gate's
# attributes make it something else
GATES = {"Sigmoid": _sigmoid_gate, "HardSigmoid": _hard_sigmoid_gate}


def recognize_swish(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace ``x * Sigmoid(x)`` by ``Swish`` and ``x * HardSigmoid(x)`` (1/6, 1/2) by ``HardSwish``."""
    return rewrite_matches(model, _match)


def _match(reader: ChainReader, gate: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    if gate.domain != "" or gate.op_type not in GATES:
        return None
    x, g = gate.inputs[0], gate.outputs[0]
    mul = reader.sole_reader(g, "Mul")
    if mul is None or reader.operand_besides(mul, g) != x:
        return None
    op = GATES[gate.op_type](gate)
    if op is None:
        return None
    op_type, attrs = op
    return [gate, mul], ir.Node(op_type, [x], list(mul.outputs), attrs, mul.name or gate.name)
