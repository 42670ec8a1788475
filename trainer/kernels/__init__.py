"""The trainer's pure kernels (gradient helpers, dataflow primitives, summaries), registered into
the shared kernel registry under the ``flowstack`` domain, and the random ops' stateful kernels."""

from trainer.kernels import control, math, nn, random, recurrent, shape, summary  # noqa: F401
