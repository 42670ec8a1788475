"""Random ops (domain ``flowstack``, TensorFlow's names): stateful, each draws from its own generator."""

from __future__ import annotations

import numpy as np

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
op("LogUniformCandidateSampler", domain=D, inputs=["true_classes"],
   outputs=["sampled_candidates", "true_expected_count", "sampled_expected_count"], stateful=True,
   attrs={"num_sampled": Attr("int", REQUIRED), "range_max": Attr("int", REQUIRED), "unique": Attr("int", 1),
          "seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")},
   doc="num_sampled class ids drawn from P(k) = log((k+2)/(k+1)) / log(range_max+1) (Zipf-like, for "
       "sampled softmax / NCE), with the expected counts of the true and sampled classes.")(
    lambda ctx: [TensorType(_INT64, (ctx.attrs["num_sampled"],)),
                 TensorType(np.dtype(np.float32), ctx.input(0).shape),
                 TensorType(np.dtype(np.float32), (ctx.attrs["num_sampled"],))])
