"""Automatic differentiation: the gradient table and ``gradients(ys, xs, grad_ys)``."""

from trainer.gradients.registry import (  # noqa: F401
    IndexedSlices,
    gradients,
    get_gradient,
    has_gradient,
    register_gradient,
)

__all__ = ["IndexedSlices", "gradients", "get_gradient", "has_gradient", "register_gradient"]
