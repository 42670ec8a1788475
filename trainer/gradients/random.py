"""Gradients of the random ops: none, samples do not depend on their shape or classes smoothly."""

from __future__ import annotations

from trainer.gradients.helpers import zero_grad

zero_grad("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "LogUniformCandidateSampler",
          "UniformCandidateSampler", "FixedUnigramCandidateSampler", domain="flowstack")
