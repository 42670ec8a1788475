"""``tf.print``: an op writing tensors and Python values to a stream each time it runs.

It returns the op, to fetch or to put in ``tf.control_dependencies`` (TF 1.15's graph-mode use).
Each argument is shown in turn, separated by ``sep`` and followed by ``end``: tensors as
trainer/print_format.py lays them out (``summarize`` entries at each end of a dim), strings as
they are, Python lists, tuples and dicts holding tensors with the tensors' values in place.
"""

from __future__ import annotations

import logging
import sys

from trainer.graph import Node, Tensor, get_default_graph
from trainer.kernels.debugging import PRINT_PLACEHOLDER
from trainer.ops import convert_to_tensor, make_op

__all__ = ["print_"]

_STREAMS = {"stderr": "stderr", "stdout": "stdout"}
_LOG_STREAMS = {logging.DEBUG: "log://debug", logging.INFO: "log://info", logging.WARNING: "log://warning",
                logging.ERROR: "log://error"}


def _stream(output_stream) -> str:
    """The PrintV2 ``output_stream`` attribute for sys.stderr/sys.stdout, their names, a
    ``file://PATH`` or a ``tf.logging`` function."""
    if output_stream is sys.stderr or output_stream is sys.__stderr__:
        return "stderr"
    if output_stream is sys.stdout or output_stream is sys.__stdout__:
        return "stdout"
    if isinstance(output_stream, str) and (output_stream in _STREAMS or output_stream.startswith("file://")):
        return output_stream
    from trainer import tf_logging

    levels = {tf_logging.debug: logging.DEBUG, tf_logging.info: logging.INFO, tf_logging.warning: logging.WARNING,
              tf_logging.error: logging.ERROR}
    if output_stream in levels:
        return _LOG_STREAMS[levels[output_stream]]
    raise ValueError(f"print: output_stream must be sys.stderr, sys.stdout, 'file://PATH' or a tf.logging function "
                     f"(debug, info, warning, error), got {output_stream!r}")


def _template(value, tensors: list) -> str:
    """``value``'s text with a placeholder where each tensor it holds goes (appended to ``tensors``)."""
    if isinstance(value, Tensor) or hasattr(value, "as_tensor"):
        tensors.append(convert_to_tensor(value))
        return PRINT_PLACEHOLDER
    if hasattr(value, "composite_parts"):  # a SparseTensor: its three parts, labelled as TensorFlow does
        parts = value.composite_parts()
        return ("'SparseTensor(indices=" + _template(parts[0], tensors) + ", values=" + _template(parts[1], tensors) +
                ", shape=" + _template(parts[2], tensors) + ")'")
    if isinstance(value, list):
        return "[" + ", ".join(_template(v, tensors) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_template(v, tensors) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_template(v, tensors)}" for k, v in value.items()) + "}"
    return value if isinstance(value, str) else str(value)


def print_(*inputs, **kwargs) -> Node:
    """``tf.print(*inputs, output_stream=sys.stderr, summarize=3, sep=" ", end="\\n", name=None)``."""
    unknown = set(kwargs) - {"output_stream", "summarize", "sep", "end", "name"}
    if unknown:
        raise TypeError(f"print: unexpected keyword arguments {sorted(unknown)}")
    stream = _stream(kwargs.get("output_stream", sys.stderr))
    summarize = kwargs.get("summarize", 3)
    if summarize is None:
        summarize = 3
    if not isinstance(summarize, int) or summarize < -1:
        raise ValueError(f"print: summarize must be an int >= -1, got {summarize!r}")
    sep, end = kwargs.get("sep", " "), kwargs.get("end", "\n")
    tensors: list[Tensor] = []
    template = sep.join(_template(v, tensors) for v in inputs)
    return make_op("PrintV2", tensors, {"template": template, "output_stream": stream, "end": end,
                                        "summarize": summarize},
                   domain="flowstack", name=kwargs.get("name") or "PrintV2",
                   graph=tensors[0].graph if tensors else get_default_graph())
