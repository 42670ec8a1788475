"""Quantization: linear (de)quantization and integer / quantized-linear matmul and convolution.

Quantized types are ONNX's: int8, uint8, int16, uint16, int32, and through ml_dtypes int4/uint4,
int2/uint2, float8 and float4 (opset 21's blocked quantization included).
"""

from __future__ import annotations

import numpy as np

from schemas import dtypes
from schemas.ops.nn import CONV_ATTRS
from schemas.ops.shape import dtype_from_code
from schemas.registry import (
    Attr,
    InferenceContext,
    TensorType,
    UnsupportedOpError,
    get_schema,
    has_schema,
    op,
)

FLOAT32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)
UINT8 = np.dtype(np.uint8)
# The element types ONNX quantizes to, NumPy's and ml_dtypes' (float8, float4, int4, int2).
QUANTIZED_TYPES = frozenset({
    dtypes.INT8, dtypes.UINT8, dtypes.INT16, dtypes.UINT16, dtypes.INT32, *dtypes.SUB_BYTE_INTEGERS,
    *dtypes.FLOAT8_TYPES, dtypes.FLOAT4E2M1,
})


def check_quantized(dtype: np.dtype | None, where: str) -> None:
    """Reject element types that ONNX does not quantize to, naming them."""
    if dtype is None:
        return
    try:
        code = dtypes.from_numpy(dtype)
    except dtypes.DTypeError:
        code = None
    if code not in QUANTIZED_TYPES:
        raise UnsupportedOpError(f"{where}: quantized type {np.dtype(dtype).name} is not supported")


def _shape_of(ctx: InferenceContext, op_name: str, indices: list[int]) -> tuple[int | None, ...] | None:
    """The output shape the float op ``op_name`` (MatMul, Conv) gives for these inputs' shapes.

    Dtypes are left out so the float op's rule does not reject mixed int8/uint8 operands.
    """
    if not has_schema(op_name):
        return None
    schema = get_schema(op_name)
    types = [TensorType(None, ctx.input(i).shape) for i in indices]
    attrs = schema.resolve_attrs({k: v for k, v in ctx.attrs.items() if k in schema.attrs and v is not None})
    return schema.infer(InferenceContext(schema, types, attrs, name=ctx.name))[0].shape


@op(
    "QuantizeLinear",
    inputs=["x", "y_scale", "y_zero_point?"],
    outputs=["y"],
    attrs={
        "axis": Attr("int", 1),
        "block_size": Attr("int", 0),
        "output_dtype": Attr("int", 0),
        "precision": Attr("int", 0),
        "saturate": Attr("int", 1),
    },
)
def _quantize_linear(ctx):
    zero_point = ctx.input(2) if ctx.has_input(2) else None
    code = ctx.attrs["output_dtype"]
    if zero_point is not None and zero_point.dtype is not None:
        dtype = zero_point.dtype
        if code and dtype_from_code(code, "QuantizeLinear") != dtype:
            raise ctx.fail(f"output_dtype {code} differs from the zero point's type {dtype}")
    else:
        dtype = dtype_from_code(code, "QuantizeLinear") if code else UINT8
    check_quantized(dtype, "QuantizeLinear")
    return [TensorType(dtype, ctx.input(0).shape)]


@op(
    "DequantizeLinear",
    inputs=["x", "x_scale", "x_zero_point?"],
    outputs=["y"],
    attrs={"axis": Attr("int", 1), "block_size": Attr("int", 0), "output_dtype": Attr("int", 0)},
)
def _dequantize_linear(ctx):
    x = ctx.input(0)
    check_quantized(x.dtype, "DequantizeLinear")
    code = ctx.attrs["output_dtype"]
    dtype = dtype_from_code(code, "DequantizeLinear") if code else ctx.input(1).dtype
    return [TensorType(dtype, x.shape)]


@op("DynamicQuantizeLinear", inputs=["x"], outputs=["y", "y_scale", "y_zero_point"])
def _dynamic_quantize_linear(ctx):
    return [TensorType(UINT8, ctx.input(0).shape), TensorType(FLOAT32, ()), TensorType(UINT8, ())]


@op("MatMulInteger", inputs=["A", "B", "a_zero_point?", "b_zero_point?"], outputs=["Y"])
def _matmul_integer(ctx):
    return [TensorType(INT32, _shape_of(ctx, "MatMul", [0, 1]))]


@op("ConvInteger", inputs=["x", "w", "x_zero_point?", "w_zero_point?"], outputs=["y"], attrs=CONV_ATTRS)
def _conv_integer(ctx):
    return [TensorType(INT32, _shape_of(ctx, "Conv", [0, 1]))]


@op(
    "QLinearMatMul",
    inputs=["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"],
    outputs=["y"],
)
def _qlinear_matmul(ctx):
    return [TensorType(ctx.input(7).dtype, _shape_of(ctx, "MatMul", [0, 3]))]


@op(
    "QLinearConv",
    inputs=["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B?"],
    outputs=["y"],
    attrs=CONV_ATTRS,
)
def _qlinear_conv(ctx):
    return [TensorType(ctx.input(7).dtype, _shape_of(ctx, "Conv", [0, 3]))]
