"""The edge runtime: load a .flow file, plan it once, run it on NumPy (or CuPy)."""

from edge_runtime.format import ModelFormatError
from edge_runtime.interpreter import Interpreter, SignatureRunner
from edge_runtime.model import Model, Signature, TensorSpec, load
from edge_runtime.plan import ExecutionError
from schemas.registry import ShapeError, UnsupportedOpError

__all__ = [
    "ExecutionError",
    "Interpreter",
    "Model",
    "ModelFormatError",
    "ShapeError",
    "Signature",
    "SignatureRunner",
    "TensorSpec",
    "UnsupportedOpError",
    "load",
]
