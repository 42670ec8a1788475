"""The trainer's kernels, registered on import: pure helper kernels (gradient helpers, dataflow
primitives, summaries) into the shared kernel registry under the ``flowstack`` domain, and the
stateful kernels of the training-only ops into ``trainer.kernels.registry``."""

from trainer.kernels import control, math, nn, recurrent, shape, summary, training  # noqa: F401
