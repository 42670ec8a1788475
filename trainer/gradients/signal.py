"""Gradients of TensorFlow's FFT ops (schemas/ops/signal.py), as TensorFlow 1.15 registers them
(fft_ops.py): a complex transform's gradient is its adjoint (the inverse transform without the
1/N, or the forward one with it); a real transform's comes from its own helper kernel."""

from __future__ import annotations

from trainer.gradients.helpers import fs
from trainer.gradients.registry import register_gradient

D = "flowstack"


@register_gradient("ComplexFFT", D)
def _complex_fft(node, grads):
    attrs = {"fft_rank": node.attrs["fft_rank"], "inverse": 1 - node.attrs["inverse"],
             "adjoint": 1 - node.attrs["adjoint"]}
    return [fs("ComplexFFT", [grads[0]], attrs)]


@register_gradient("RealFFT", D)
def _real_fft(node, grads):
    attrs = {"fft_rank": node.attrs["fft_rank"], "fft_length": node.attrs["fft_length"]}
    return [fs("RealFFTGrad", [grads[0], node.inputs[0]], attrs)]


@register_gradient("InverseRealFFT", D)
def _inverse_real_fft(node, grads):
    attrs = {"fft_rank": node.attrs["fft_rank"], "fft_length": node.attrs["fft_length"]}
    return [fs("InverseRealFFTGrad", [grads[0], node.inputs[0]], attrs)]
