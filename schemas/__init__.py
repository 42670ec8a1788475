"""Contracts shared by every flowstack package: the op registry, the .flow schema, the serving protos."""

from schemas.registry import (
    REQUIRED,
    Attr,
    InferenceContext,
    OpSchema,
    ShapeError,
    TensorType,
    UnsupportedOpError,
    all_schemas,
    get_schema,
    has_schema,
    infer_types,
    op,
)

__all__ = [
    "REQUIRED",
    "Attr",
    "InferenceContext",
    "OpSchema",
    "ShapeError",
    "TensorType",
    "UnsupportedOpError",
    "all_schemas",
    "get_schema",
    "has_schema",
    "infer_types",
    "op",
]
