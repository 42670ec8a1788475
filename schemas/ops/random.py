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


def _shape_then_param(ctx):
    """Rule: the sample shape (input 0's value) followed by the parameter's (input 1) shape."""
    sample = _random_of_shape(ctx)[0].shape
    param = ctx.input(1).shape
    dims = None if sample is None or param is None else tuple(sample) + tuple(param)
    return [TensorType(np.dtype(ctx.attrs["dtype"]), dims)]


op("RandomGamma", domain=D, inputs=["shape", "alpha"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
   doc="Samples of Gamma(alpha, 1), shape + alpha.shape. Its gradient with respect to alpha (registered, "
       "RandomGammaGrad) is the implicit reparameterization one; not marked differentiable because a "
       "stateful op cannot be checked by finite differences." + _SEEDED)(_shape_then_param)
op("RandomPoisson", domain=D, inputs=["shape", "rate"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
   doc="Samples of Poisson(rate), shape + rate.shape, in dtype." + _SEEDED)(_shape_then_param)
op("RandomGammaGrad", domain=D, inputs=["alpha", "sample"], outputs=["output"],
   doc="d sample / d alpha of Gamma(alpha, 1) samples at a fixed CDF value: -dP(alpha, x)/dalpha over the "
       "density at x.")(lambda ctx: [TensorType(ctx.input(1).dtype, ctx.input(1).shape)])


# -- stateless: the same [2]-int seed gives the same values, from TensorFlow's Philox4x32-10 stream ---
def _stateless_of_shape(ctx):
    seed = ctx.input(1)
    if seed.dtype is not None and seed.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ctx.fail(f"seed must be int32 or int64, got {seed.dtype}")
    if seed.shape is not None and tuple(seed.shape) not in ((2,), (None,)):
        raise ctx.fail(f"seed must have shape [2], got {list(seed.shape)}")
    return _random_of_shape(ctx)


_STATELESS_ATTRS = {"dtype": Attr("string", "float32")}
op("StatelessRandomUniform", domain=D, inputs=["shape", "seed"], outputs=["output"], attrs=_STATELESS_ATTRS,
   doc="Samples of U[0, 1), a function of seed only.")(_stateless_of_shape)
op("StatelessRandomNormal", domain=D, inputs=["shape", "seed"], outputs=["output"], attrs=_STATELESS_ATTRS,
   doc="Samples of N(0, 1) (Box-Muller), a function of seed only.")(_stateless_of_shape)
op("StatelessTruncatedNormal", domain=D, inputs=["shape", "seed"], outputs=["output"], attrs=_STATELESS_ATTRS,
   doc="Samples of N(0, 1) within 2 standard deviations, a function of seed only.")(_stateless_of_shape)
op("StatelessRandomUniformInt", domain=D, inputs=["shape", "seed", "minval", "maxval"], outputs=["output"],
   attrs=_STATELESS_ATTRS, doc="Integers uniform in [minval, maxval), a function of seed only.")(_stateless_of_shape)


@op("StatelessMultinomial", domain=D, inputs=["logits", "num_samples", "seed"], outputs=["output"],
    attrs={"output_dtype": Attr("string", "int64")},
    doc="num_samples class ids per row of logits [batch, classes], a function of seed only.")
def _stateless_multinomial(ctx):
    logits = ctx.input(0)
    if logits.shape is not None and len(logits.shape) != 2:
        raise ctx.fail(f"logits must be 2-D [batch_size, num_classes], got shape {logits.shape}")
    n = ctx.known_ints(1)
    batch = None if logits.shape is None else logits.shape[0]
    return [TensorType(np.dtype(ctx.attrs["output_dtype"]), (batch, n[0] if n else None))]


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
