"""``tf.py_func`` and ``tf.numpy_function``: a Python function as a graph op.

The function is kept in this process under a token the op names, as TensorFlow keeps it: the graph
runs in this process only. A graph written out (meta graph, GraphDef) and run elsewhere, frozen
for the edge runtime, or placed on another task fails with an error naming the op.
"""

from __future__ import annotations

import itertools
import threading

from trainer.dtypes import as_dtype
from trainer.graph import GraphError
from trainer.ops import convert_to_tensor, make_op

__all__ = ["numpy_function", "py_func", "registered_function"]

_FUNCTIONS: dict[str, object] = {}
_LOCK = threading.Lock()
_NEXT = itertools.count()


def registered_function(token: str):
    with _LOCK:
        fn = _FUNCTIONS.get(token)
    if fn is None:
        raise GraphError(f"py_func {token}: its Python function is not in this process (py_func runs only in the "
                         f"process that built the graph)")
    return fn


def py_func(func, inp, Tout, stateful: bool = True, name=None):  # noqa: N803 - TF's argument name
    """``func`` called on ``inp``'s values (NumPy arrays) at run time; returns a tensor per ``Tout``
    dtype (one tensor when ``Tout`` is a single dtype), of unknown shape (``set_shape`` to state it)."""
    single = not isinstance(Tout, (list, tuple))
    dtypes = [as_dtype(t).name for t in ([Tout] if single else Tout)]
    token = f"pyfunc_{next(_NEXT)}"
    with _LOCK:
        _FUNCTIONS[token] = func
    inputs = [convert_to_tensor(x) for x in inp]
    node = make_op("PyFunc", inputs, {"token": token, "Tout": dtypes, "num_outputs": len(dtypes)}, domain="flowstack",
                   name=name or "PyFunc", num_outputs=len(dtypes))
    if single:
        return node.outputs[0]
    return list(node.outputs) if dtypes else node


numpy_function = py_func
