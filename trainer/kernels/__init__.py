"""The trainer's kernels, registered on import: pure helper kernels (gradient helpers, dataflow
primitives, summaries) into the shared kernel registry under the ``flowstack`` domain, and the
stateful kernels of the training-only ops (random and debugging ops among them) into
``trainer.kernels.registry``. One module per op family (``schemas.ops.FAMILIES``)."""

from schemas.op_table import import_families

import_families("trainer.kernels")
