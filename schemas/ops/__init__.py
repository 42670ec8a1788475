"""The op families. Importing this package registers every op schema, one module per family.

``FAMILIES`` is the one list of family names: ``schemas/ops/<family>.py`` declares an op,
``edge_runtime/kernels/<family>.py`` holds its forward kernel, ``trainer/gradients/<family>.py``
its gradient rule and ``trainer/kernels/<family>.py`` its stateful or gradient-helper kernel
(each package loads the families it has a module for, through ``schemas.op_table.import_families``).
"""

from importlib import import_module

FAMILIES = (
    "accumulators",
    "control",
    "data",
    "dataflow",
    "debugging",
    "detection",
    "fused",
    "image",
    "layout",
    "linalg",
    "math",
    "ml",
    "nn",
    "optimizers",
    "py_func",
    "quantize",
    "random",
    "recurrent",
    "reduce",
    "sequence_examples",
    "shape",
    "signal",
    "special",
    "sparse",
    "squeeze_excite",
    "strings",
    "summary",
    "tensor_array",
    "text",
    "training",
)

for _family in FAMILIES:
    import_module(f"schemas.ops.{_family}")
