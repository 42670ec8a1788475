"""Calls back into Python (domain ``flowstack``): ``tf.py_func`` and ``tf.numpy_function``.

The function lives only in the process that built the graph (registered under ``token``), as in
TensorFlow: such a graph runs there, and nowhere else (not on the edge runtime, not on another task).
"""

from __future__ import annotations

import numpy as np

from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"

op("PyFunc", domain=D, inputs=["inputs*"], outputs=["outputs*"], stateful=True,
   attrs={"token": Attr("string", REQUIRED), "Tout": Attr("strings", []), "num_outputs": Attr("int", 0)},
   output_count_attr="num_outputs",
   doc="The Python function registered under token, called with the inputs' values; its results cast "
       "to Tout.")(lambda ctx: [TensorType(np.dtype(t), None) for t in ctx.attrs["Tout"]])
