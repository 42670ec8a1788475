"""Gradients of the training ops: DropoutMask's keep-mask is a sample, so nothing flows back."""

from __future__ import annotations

from trainer.gradients.helpers import zero_grad

zero_grad("DropoutMask", domain="flowstack")
