"""The trainer's kernels, registered on import: pure helper kernels (gradient helpers, dataflow
primitives, summaries) into the shared kernel registry under the ``flowstack`` domain, and the
stateful kernels of the training-only ops (random and debugging ops among them) into
``trainer.kernels.registry``."""

from trainer.kernels import (accumulators, data, dataflow, debugging, math, nn, random, recurrent, shape,  # noqa: F401
                             sparse, summary, training)
