"""The trainer's pure kernels (gradient helpers, dataflow primitives, summaries), registered into
the shared kernel registry under the ``flowstack`` domain."""

from trainer.kernels import control, math, nn, recurrent, shape, sparse, summary  # noqa: F401
