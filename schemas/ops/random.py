"""Random ops. TensorFlow's (domain ``flowstack``) are stateful, each drawing from its own generator
(trainer/kernels/random.py); ONNX's RandomUniformLike and Bernoulli are pure kernels of the edge
runtime (edge_runtime/kernels/random.py)."""

from __future__ import annotations

import numpy as np

from schemas.ops.shape import dtype_from_code
from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
_INT64 = np.dtype(np.int64)


def _random_of_shape(ctx):
    shape = ctx.known_ints(0)
    n = ctx.input(0).shape
    dims = tuple(shape) if shape is not None else (None if n is None or n[0] is None else (None,) * n[0])
    return [TensorType(np.dtype(ctx.attrs["dtype"]), dims)]


_RANDOM_ATTRS = {"dtype": Attr("string", "float32"), "seed": Attr("int", 0), "seed2": Attr("int", 0),
                 "stream": Attr("string", "")}
_SEEDED = (" Fresh values every run from the op's own generator, seeded by (seed, seed2) when either is set "
           "(TensorFlow's graph- and op-level seeds), so a new session replays the same sequence; ``stream`` "
           "names the generator (the node's name).")
op("RandomStandardNormal", domain=D, inputs=["shape"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
   doc="Samples of N(0, 1)." + _SEEDED)(_random_of_shape)
op("RandomUniform", domain=D, inputs=["shape"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
   doc="Samples of U[0, 1)." + _SEEDED)(_random_of_shape)
op("TruncatedNormal", domain=D, inputs=["shape"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
   doc="Samples of N(0, 1) redrawn until within 2 standard deviations." + _SEEDED)(_random_of_shape)
_SAMPLER_ATTRS = {"num_sampled": Attr("int", REQUIRED), "range_max": Attr("int", REQUIRED), "unique": Attr("int", 1),
                  "seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")}
_SAMPLER_OUTPUTS = ["sampled_candidates", "true_expected_count", "sampled_expected_count"]
_EXPECTED = ", with the expected counts of the true and sampled classes."


def _sampler_rule(ctx):
    return [TensorType(_INT64, (ctx.attrs["num_sampled"],)), TensorType(np.dtype(np.float32), ctx.input(0).shape),
            TensorType(np.dtype(np.float32), (ctx.attrs["num_sampled"],))]


op("LogUniformCandidateSampler", domain=D, inputs=["true_classes"], outputs=_SAMPLER_OUTPUTS, stateful=True,
   attrs=_SAMPLER_ATTRS,
   doc="num_sampled class ids drawn from P(k) = log((k+2)/(k+1)) / log(range_max+1) (Zipf-like, for "
       "sampled softmax / NCE)" + _EXPECTED)(_sampler_rule)
op("UniformCandidateSampler", domain=D, inputs=["true_classes"], outputs=_SAMPLER_OUTPUTS, stateful=True,
   attrs=_SAMPLER_ATTRS, doc="num_sampled class ids drawn uniformly from [0, range_max)" + _EXPECTED)(_sampler_rule)
op("FixedUnigramCandidateSampler", domain=D, inputs=["true_classes"], outputs=_SAMPLER_OUTPUTS, stateful=True,
   attrs={**_SAMPLER_ATTRS, "unigrams": Attr("floats", REQUIRED), "distortion": Attr("float", 1.0),
          "num_reserved_ids": Attr("int", 0)},
   doc="num_sampled class ids drawn with probability proportional to unigrams ** distortion (ids below "
       "num_reserved_ids never drawn)" + _EXPECTED)(_sampler_rule)


# -- ONNX's random ops (default domain): pure kernels drawing from a generator of their own ------
def _random_like(ctx):
    """The input's shape, in ``dtype`` where given, else in the input's type."""
    x = ctx.input(0)
    dtype = dtype_from_code(ctx.attrs["dtype"], ctx.schema.name) if ctx.attrs["dtype"] is not None else x.dtype
    return [TensorType(dtype, x.shape)]


_ONNX_SEEDED = (" A seed draws the same values on every run (NumPy's RandomState(seed), as ONNX's reference "
                "evaluator); without one, fresh values each run.")
op("RandomUniformLike", inputs=["input"], outputs=["output"],
   attrs={"dtype": Attr("int"), "high": Attr("float", 1.0), "low": Attr("float", 0.0), "seed": Attr("float")},
   doc="Samples of U[low, high) shaped like the input." + _ONNX_SEEDED)(_random_like)
op("Bernoulli", inputs=["input"], outputs=["output"], attrs={"dtype": Attr("int"), "seed": Attr("float")},
   doc="1 with probability input, else 0, elementwise." + _ONNX_SEEDED)(_random_like)
