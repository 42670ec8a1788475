"""The trainer's pure kernels (gradient helpers, dataflow primitives, summaries), registered into
the shared kernel registry under the ``flowstack`` domain, and the stateful kernels of the random
and debugging ops."""

from trainer.kernels import control, debugging, math, nn, random, recurrent, shape, summary  # noqa: F401
