"""``tf.saved_model.signature_def_utils`` and ``tf.saved_model.utils``: the signatures a SavedModel
serves, as plain records.

A ``SignatureDef`` maps its aliases (the names clients send, ``"x"``) to ``TensorInfo`` records of
graph tensors (``"input:0"``); ``to_dict``/``from_dict`` are its form in ``saved_model.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer.graph import Graph, Tensor, get_default_graph
from trainer.saved_model import signature_constants as sc

__all__ = ["SignatureDef", "TensorInfo", "TensorShapeInfo", "build_signature_def", "build_tensor_info",
           "classification_signature_def", "get_tensor_from_tensor_info", "is_valid_signature",
           "predict_signature_def", "regression_signature_def"]


@dataclass(frozen=True)
class Dim:
    size: int  # -1: unknown


@dataclass
class TensorShapeInfo:
    """A tensor's static shape as TensorShapeProto spells it: ``dim[i].size`` (-1 unknown), ``unknown_rank``."""

    dim: list[Dim] = field(default_factory=list)
    unknown_rank: bool = False

    @classmethod
    def of(cls, shape) -> "TensorShapeInfo":
        """The record of a partial shape (a tuple of ints and None; None for an unknown rank)."""
        return cls(unknown_rank=True) if shape is None else cls([Dim(-1 if s is None else int(s)) for s in shape])

    def as_list(self) -> list[int | None] | None:
        return None if self.unknown_rank else [None if d.size < 0 else d.size for d in self.dim]


@dataclass
class TensorInfo:
    """A graph tensor by name, with its dtype name (``"float32"``) and static shape."""

    name: str
    dtype: str
    tensor_shape: TensorShapeInfo

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": self.tensor_shape.as_list()}

    @classmethod
    def from_dict(cls, d: dict) -> "TensorInfo":
        shape = d.get("shape")
        return cls(str(d["name"]), str(d["dtype"]), TensorShapeInfo.of(shape))


@dataclass
class SignatureDef:
    inputs: dict[str, TensorInfo] = field(default_factory=dict)
    outputs: dict[str, TensorInfo] = field(default_factory=dict)
    method_name: str = ""

    def to_dict(self) -> dict:
        return {"method_name": self.method_name, "inputs": {k: v.to_dict() for k, v in self.inputs.items()},
                "outputs": {k: v.to_dict() for k, v in self.outputs.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "SignatureDef":
        return cls({k: TensorInfo.from_dict(v) for k, v in d["inputs"].items()},
                   {k: TensorInfo.from_dict(v) for k, v in d["outputs"].items()}, str(d.get("method_name", "")))


def build_tensor_info(tensor) -> TensorInfo:
    """``tf.saved_model.utils.build_tensor_info``: the record of a graph tensor."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"build_tensor_info takes a graph tensor, got {type(tensor).__name__}")
    return TensorInfo(tensor.name, tensor.dtype.name, TensorShapeInfo.of(tensor.shape))


def get_tensor_from_tensor_info(tensor_info: TensorInfo, graph: Graph | None = None, import_scope=None) -> Tensor:
    """The tensor ``tensor_info`` names, in ``graph`` (default: the default graph)."""
    if import_scope:
        raise ValueError("get_tensor_from_tensor_info: import_scope= is not supported")
    return (graph or get_default_graph()).get_tensor_by_name(tensor_info.name)


def _infos(tensors, what: str) -> dict[str, TensorInfo]:
    if not isinstance(tensors, dict):
        raise TypeError(f"{what} must be a dict of alias -> tensor, got {type(tensors).__name__}")
    return {str(k): v if isinstance(v, TensorInfo) else build_tensor_info(v) for k, v in tensors.items()}


def build_signature_def(inputs=None, outputs=None, method_name: str | None = None) -> SignatureDef:
    """A signature from ``{alias: TensorInfo}`` maps (``build_tensor_info``'s records; tensors are taken too)."""
    return SignatureDef(_infos(inputs or {}, "inputs"), _infos(outputs or {}, "outputs"), method_name or "")


def predict_signature_def(inputs, outputs) -> SignatureDef:
    """The Predict API's signature: any inputs to any outputs, by alias."""
    if not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def(inputs, outputs, sc.PREDICT_METHOD_NAME)


def classification_signature_def(examples, classes, scores) -> SignatureDef:
    """The Classify API's signature: serialized examples in; class names and/or scores out."""
    if examples is None:
        raise ValueError("Classification examples cannot be None.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    outputs = {sc.CLASSIFY_OUTPUT_CLASSES: classes, sc.CLASSIFY_OUTPUT_SCORES: scores}
    return build_signature_def({sc.CLASSIFY_INPUTS: examples}, {k: v for k, v in outputs.items() if v is not None},
                               sc.CLASSIFY_METHOD_NAME)


def regression_signature_def(examples, predictions) -> SignatureDef:
    """The Regress API's signature: serialized examples in, one prediction per example out."""
    if examples is None:
        raise ValueError("Regression examples cannot be None.")
    if predictions is None:
        raise ValueError("Regression predictions cannot be None.")
    return build_signature_def({sc.REGRESS_INPUTS: examples}, {sc.REGRESS_OUTPUTS: predictions}, sc.REGRESS_METHOD_NAME)


_FIXED_ALIASES = {  # method -> (the input aliases it takes, the output aliases it may give)
    sc.CLASSIFY_METHOD_NAME: ({sc.CLASSIFY_INPUTS}, {sc.CLASSIFY_OUTPUT_CLASSES, sc.CLASSIFY_OUTPUT_SCORES}),
    sc.REGRESS_METHOD_NAME: ({sc.REGRESS_INPUTS}, {sc.REGRESS_OUTPUTS}),
}


def is_valid_signature(signature_def) -> bool:
    """Whether ``signature_def`` names a method, inputs and outputs, with the aliases Classify and
    Regress fix."""
    if not isinstance(signature_def, SignatureDef) or not signature_def.method_name:
        return False
    if not signature_def.inputs or not signature_def.outputs:
        return False
    fixed = _FIXED_ALIASES.get(signature_def.method_name)
    return fixed is None or (set(signature_def.inputs) == fixed[0] and set(signature_def.outputs) <= fixed[1])
