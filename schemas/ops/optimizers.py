"""ONNX's optimizer updates (domain ``ai.onnx.preview.training``): Adagrad, Momentum and Adam.

Each takes a learning rate R and an update count T, then its per-tensor operands as whole groups:
X1..Xn, then G1..Gn, then each state (the accumulated squares H, the momentum V) for the same n
tensors; it returns the updated X1..Xn, then each updated state. They are pure functions of their
inputs (the caller stores the results), so the edge runtime runs them like any other op; the
trainer's own stateful updates (ApplyAdam, ...) are TensorFlow's, in the ``training`` family.
"""

from __future__ import annotations

from typing import Callable

from schemas.registry import REQUIRED, Attr, InferenceContext, TensorType, op

D = "ai.onnx.preview.training"

# Each op's operand groups after R and T, in input order; the gradients G are read, not returned.
OPERAND_GROUPS = {
    "Adagrad": ("X", "G", "H"),
    "Momentum": ("X", "G", "V"),
    "Adam": ("X", "G", "V", "H"),
}


def operand_count(name: str, operands: int) -> int:
    """How many tensors ``name`` updates, given its ``operands`` inputs after R and T; ValueError
    where they do not split into its groups of equal size."""
    groups = OPERAND_GROUPS[name]
    if operands == 0 or operands % len(groups):
        raise ValueError(f"{name}: {operands} inputs after R and T do not split into groups "
                         f"{', '.join(g + '1..n' for g in groups)} of equal size n")
    return operands // len(groups)


def _updated_groups(name: str) -> Callable[[InferenceContext], list[TensorType]]:
    """The rule of ``name``: each returned group has the types of the input group it updates."""
    groups = OPERAND_GROUPS[name]

    def rule(ctx: InferenceContext) -> list[TensorType]:
        try:
            n = operand_count(name, ctx.num_inputs - 2)
        except ValueError as exc:
            raise ctx.fail(str(exc)) from None
        kept = [i for i, g in enumerate(groups) if g != "G"]
        return [ctx.input(2 + group * n + j) for group in kept for j in range(n)]

    return rule


op("Adagrad", domain=D, inputs=["R", "T", "inputs+"], outputs=["outputs+"],
   attrs={"decay_factor": Attr("float", 0.0), "epsilon": Attr("float", 1e-6), "norm_coefficient": Attr("float", 0.0)},
   doc="X - R / (1 + T * decay_factor) * G' / (sqrt(H + G'²) + epsilon), G' = G + norm_coefficient * X; "
       "returns the new X's, then the new H's.")(_updated_groups("Adagrad"))
op("Momentum", domain=D, inputs=["R", "T", "inputs+"], outputs=["outputs+"],
   attrs={"alpha": Attr("float", REQUIRED), "beta": Attr("float", REQUIRED), "mode": Attr("string", REQUIRED),
          "norm_coefficient": Attr("float", REQUIRED)},
   doc="V' = alpha * V + beta * G' (beta 1 at T = 0), G' = G + norm_coefficient * X; X - R * V' "
       "('standard') or X - R * (G' + alpha * V') ('nesterov'); returns the new X's, then the new V's.")(
    _updated_groups("Momentum"))
op("Adam", domain=D, inputs=["R", "T", "inputs+"], outputs=["outputs+"],
   attrs={"alpha": Attr("float", 0.9), "beta": Attr("float", 0.999), "epsilon": Attr("float", 1e-6),
          "norm_coefficient": Attr("float", 0.0), "norm_coefficient_post": Attr("float", 0.0)},
   doc="Adam's update with bias correction from T > 0, L2 (norm_coefficient) before and weight decay "
       "(norm_coefficient_post) after; returns the new X's, then the new V's, then the new H's.")(
    _updated_groups("Adam"))
