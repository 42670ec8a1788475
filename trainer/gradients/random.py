"""Gradients of the random ops: none, samples do not depend on their shape or classes smoothly,
except RandomGamma's with respect to alpha (TensorFlow's implicit reparameterization)."""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx, zero_grad
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError

zero_grad("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "LogUniformCandidateSampler",
          "UniformCandidateSampler", "FixedUnigramCandidateSampler", "RandomPoisson", "RandomGammaGrad",
          "StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal", "StatelessRandomUniformInt",
          "StatelessMultinomial", domain="flowstack")


@register_gradient("RandomGamma", "flowstack")
def _random_gamma(node, grads):
    """TensorFlow's implicit reparameterization: d sample / d alpha, summed over the sample axes."""
    shape, alpha = node.inputs
    sample = node.outputs[0]
    if alpha.shape is None or sample.shape is None:
        raise GraphError(f"RandomGamma gradient needs the ranks of alpha and the sample ({node.name})")
    sample_axes = len(sample.shape) - len(alpha.shape)
    broadcastable = onnx("Reshape", [alpha, onnx("Concat", [ints_const([1] * sample_axes), onnx("Shape", [alpha])],
                                                 {"axis": 0})])
    partial = fs("RandomGammaGrad", [broadcastable, sample])
    total = grads[0] * partial
    if sample_axes:
        total = onnx("ReduceSum", [total, ints_const(list(range(sample_axes)))], {"keepdims": 0})
    return [None, total]
