"""Imports every kernel family so their decorators run (the families of ``schemas.ops.FAMILIES``)."""

from schemas.op_table import import_families

import_families("edge_runtime.kernels")
