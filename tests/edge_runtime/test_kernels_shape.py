"""Shape and quantize kernels and rules beyond the ONNX node cases: edge cases, errors, reductions."""

from __future__ import annotations

import numpy as np
import pytest

from schemas import get_schema
from schemas.registry import ShapeError, TensorType, UnsupportedOpError, infer_types
from tests.edge_runtime.kernel_calls import run_kernel as run


def infer(op_name: str, shapes, values=(), num_outputs: int = 1, dtype=np.float32, **attrs):
    schema = get_schema(op_name)
    types = [TensorType(np.dtype(dtype), s) for s in shapes]
    out = infer_types(schema, types, schema.resolve_attrs(attrs), input_values=values, num_outputs=num_outputs)
    return [t.shape for t in out]


def i64(*values):
    return np.array(values, dtype=np.int64)


# ---- shape rules: exact with constants, honest without ----

def test_reshape_rule_resolves_zero_and_minus_one():
    assert infer("Reshape", [(2, 3, 4), (3,)], [None, i64(0, -1, 2)]) == [(2, 6, 2)]
    # the unknown batch is copied by the 0, so it cancels out of the -1
    assert infer("Reshape", [(None, 3, 4), (2,)], [None, i64(0, -1)]) == [(None, 12)]
    assert infer("Reshape", [(None, 3, 4), (2,)], [None, i64(-1, 4)]) == [(None, 4)]
    assert infer("Reshape", [(2, 3, 4), (3,)]) == [(None, None, None)]
    with pytest.raises(ShapeError, match="cannot reshape"):
        infer("Reshape", [(2, 3, 4), (2,)], [None, i64(5, -1)])


def test_reshape_allowzero_keeps_zero_dims():
    assert infer("Reshape", [(0, 3), (2,)], [None, i64(3, 0)], allowzero=1) == [(3, 0)]
    assert run("Reshape", np.zeros((0, 3)), i64(3, 0), allowzero=1).shape == (3, 0)


def test_slice_rule_clamps_like_onnx():
    big = np.iinfo(np.int64).max
    values = [None, i64(-1, big), i64(-big, 1), i64(0, 1), i64(-1, 1)]
    assert infer("Slice", [(5, 7), (2,), (2,), (2,), (2,)], values) == [(5, 0)]
    values = [None, i64(1), i64(big)]
    assert infer("Slice", [(5, 7), (1,), (1,)], values) == [(4, 7)]
    assert infer("Slice", [(5, 7), (1,), (1,), (1,)], [None, None, None, i64(1)]) == [(5, None)]


def test_slice_backwards_from_before_the_first_element_keeps_it():
    # ONNX clamps such a start to 0 (Python's slice would keep nothing); kernel and rule agree.
    x = np.arange(6, dtype=np.float32)
    for start, end, step in [(-1000, -1000, -2), (np.iinfo(np.int64).min, -7, -1), (-7, 0, -1)]:
        values = [None, i64(start), i64(end), i64(0), i64(step)]
        y = run("Slice", x, *values[1:])
        assert y.tolist() == ([0.0] if end != 0 else [])
        assert infer("Slice", [(6,), (1,), (1,), (1,), (1,)], values) == [y.shape]


def test_split_rule_uneven_last_chunk_and_sizes():
    assert infer("Split", [(7, 2)], num_outputs=3) == [(3, 2), (3, 2), (1, 2)]
    assert infer("Split", [(7, 2), (2,)], [None, i64(5, 2)], num_outputs=2) == [(5, 2), (2, 2)]
    with pytest.raises(ShapeError, match="does not cut"):
        infer("Split", [(7, 2), (2,)], [None, i64(5, 1)], num_outputs=2)


def test_concat_gather_expand_pad_rules():
    assert infer("Concat", [(2, None), (3, 4)], axis=0) == [(5, 4)]
    with pytest.raises(ShapeError, match="off the concat axis"):
        infer("Concat", [(2, 3), (3, 4)], axis=0)
    assert infer("Gather", [(5, 6, 7), (2, 3)], axis=1) == [(5, 2, 3, 7)]
    assert infer("GatherND", [(2, 3, 4), (2, 1)], batch_dims=1) == [(2, 4)]
    assert infer("Expand", [(3, 1), (3,)], [None, i64(2, 1, 6)]) == [(2, 3, 6)]
    assert infer("Pad", [(3, 4), (2,), (), (1,)], [None, i64(1, -2), None, i64(-1)]) == [(3, 3)]
    assert infer("Unsqueeze", [(3, 4), (2,)], [None, i64(-1, 0)]) == [(1, 3, 4, 1)]
    assert infer("Squeeze", [(1, None, 1)]) == [None]
    with pytest.raises(ShapeError, match="cannot squeeze"):
        infer("Squeeze", [(2, 3), (1,)], [None, i64(0)])


def test_shape_rules_of_data_dependent_ops():
    assert infer("NonZero", [(2, 3)]) == [(2, None)]
    assert infer("Unique", [(2, 3)], num_outputs=4) == [(None,), (None,), (6,), (None,)]
    assert infer("Range", [(), (), ()], [np.float32(1), np.float32(2), np.float32(0.3)]) == [(4,)]
    assert infer("Compress", [(4, 3), (2,)], [None, np.array([True, True])], axis=0) == [(2, 3)]


# ---- kernels ----

def test_pad_negative_pads_crop_and_modes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = run("Pad", x, i64(0, -1, 1, 2), np.float32(9))
    np.testing.assert_array_equal(out, np.pad(x[:, 1:], [(0, 1), (0, 2)], constant_values=9))
    np.testing.assert_array_equal(run("Pad", x, i64(1, 1), None, i64(1), mode="wrap"),
                                  np.pad(x, [(0, 0), (1, 1)], mode="wrap"))


def test_scatter_reductions_accumulate_duplicates():
    data = np.ones((4,), np.float32)
    indices = i64(1, 1, -1).reshape(3, 1)
    updates = np.array([2, 3, 5], np.float32)
    np.testing.assert_array_equal(run("ScatterND", data, indices, updates, reduction="add"), [1, 6, 1, 6])
    np.testing.assert_array_equal(run("ScatterND", data, indices, updates, reduction="mul"), [1, 6, 1, 5])
    out = run("ScatterElements", np.zeros((2, 3)), i64(2, -3).reshape(1, 2), np.ones((1, 2)), axis=1,
              reduction="max")
    np.testing.assert_array_equal(out, [[1, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(data, 1)  # inputs are never written to


def test_gather_nd_batch_dims_and_negative_indices():
    data = np.arange(24).reshape(2, 3, 4)
    out = run("GatherND", data, i64(-1, 0).reshape(2, 1, 1), batch_dims=1)
    np.testing.assert_array_equal(out, [[data[0, 2]], [data[1, 0]]])


def test_unique_unsorted_keeps_first_occurrence_order():
    y, first, inverse, counts = run("Unique", np.array([3, 1, 3, 2, 1]), sorted=0)
    np.testing.assert_array_equal(y, [3, 1, 2])
    np.testing.assert_array_equal(first, [0, 1, 3])
    np.testing.assert_array_equal(inverse, [0, 1, 0, 2, 1])
    np.testing.assert_array_equal(counts, [2, 2, 1])
    assert inverse.dtype == np.int64


def test_tensor_scatter_circular_wraps():
    cache = np.zeros((2, 4, 1), np.float32)
    update = np.ones((2, 2, 1), np.float32)
    out = run("TensorScatter", cache, update, i64(3, 1), axis=1, mode="circular")
    np.testing.assert_array_equal(out[..., 0], [[1, 0, 0, 1], [0, 1, 1, 0]])


def test_constant_and_bitcast_errors_name_the_problem():
    with pytest.raises(UnsupportedOpError, match="sparse"):
        run("Constant", sparse_value=np.zeros(2))
    with pytest.raises(ShapeError, match="bit width"):
        infer("BitCast", [(2,)], to=7)  # float32 -> int64
    assert run("BitCast", np.float32([1.0]), to=6).item() == 0x3F800000


def test_bitcast_keeps_a_scalar_a_scalar():
    y = run("BitCast", np.float32(1.0), to=6)
    assert y.shape == () and y.dtype == np.int32 and y.item() == 0x3F800000
    transposed = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not C-contiguous
    np.testing.assert_array_equal(run("BitCast", transposed, to=6), transposed.view(np.int32))


def test_expand_returns_writable_array():
    out = run("Expand", np.float32([1, 2]), i64(3, 1))
    out[0, 0] = 5
    assert out.shape == (3, 2) and out[1, 0] == 1


# ---- quantization ----

def test_quantize_linear_int32_and_rounding_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -1e12], np.float32)
    out = run("QuantizeLinear", x, np.float32(1), np.int32(0))
    np.testing.assert_array_equal(out, [0, 2, 2, np.iinfo(np.int32).min])
    assert out.dtype == np.int32


def test_quantize_linear_names_types_it_does_not_quantize_to():
    with pytest.raises(UnsupportedOpError, match="FLOAT6E2M3"):
        run("QuantizeLinear", np.zeros(2, np.float32), np.float32(1), output_dtype=27)
    with pytest.raises(UnsupportedOpError, match="float32"):
        infer("QuantizeLinear", [(2,), ()], output_dtype=1)


def test_blocked_dequantize_repeats_scales_along_the_axis():
    x = np.arange(6, dtype=np.int8).reshape(1, 6)
    scale = np.array([[1, 10, 100]], np.float32)
    out = run("DequantizeLinear", x, scale, None, axis=1, block_size=2)
    np.testing.assert_array_equal(out, [[0, 1, 20, 30, 400, 500]])


def _conv_reference(x, w, stride, pad, group):
    """Direct loops: slow but obviously right, for small tensors only."""
    x = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    for o in range(m):
        g = o // (m // group)
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                out[:, o, i, j] = (patch.astype(np.int64) * w[o]).sum(axis=(1, 2, 3))
    return out


def test_conv_integer_groups_strides_pads_against_loops():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (2, 4, 6, 5), dtype=np.uint8)
    w = rng.integers(-128, 127, (6, 2, 3, 3), dtype=np.int8)
    out = run("ConvInteger", x, w, np.uint8(3), None, group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    expected = _conv_reference(x.astype(np.int64) - 3, w.astype(np.int64), 2, 1, 2)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.int32
    shapes = infer("ConvInteger", [x.shape, w.shape], group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    assert shapes == [out.shape]


def test_qlinear_conv_per_channel_weight_scale():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 255, (1, 2, 4, 4), dtype=np.uint8)
    w = rng.integers(-20, 20, (3, 2, 2, 2), dtype=np.int8)
    w_scale = np.array([0.01, 0.02, 0.03], np.float32)
    out = run("QLinearConv", x, np.float32(0.1), np.uint8(10), w, w_scale, np.int8(0), np.float32(0.5),
              np.uint8(128), np.array([5, -5, 0], np.int32))
    acc = _conv_reference(x.astype(np.int64) - 10, w.astype(np.int64), 1, 0, 1) + np.array([5, -5, 0])[:, None, None]
    expected = np.clip(np.rint(acc * (0.1 * w_scale[:, None, None] / 0.5)) + 128, 0, 255)
    np.testing.assert_array_equal(out, expected.astype(np.uint8))


def test_matmul_integer_per_row_zero_point():
    a = np.array([[1, 2], [3, 4]], np.uint8)
    b = np.array([[1], [1]], np.int8)
    out = run("MatMulInteger", a, b, np.array([1, 3], np.uint8))
    np.testing.assert_array_equal(out, [[1], [1]])
    assert out.dtype == np.int32


@pytest.mark.parametrize("data_shape, indices, axis", [
    ((2, 3), [[2, 0]], 1),  # a length-1 row of indices reads row 0 only (take_along_axis broadcast it)
    ((3, 4), [[3, 0], [1, 1]], 1),  # shorter on axis 0: take_along_axis refused it
    ((3, 4), [[2, 0, 1, 1]], 0),
    ((2, 3, 4), [[[1], [0]]], 2),
    ((2, 3), [[-1, 0, 1], [0, -3, 2]], 1),  # the same shape, negative indices
])
def test_gather_elements_indices_shorter_than_data(data_shape, indices, axis):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    data = np.arange(np.prod(data_shape), dtype=np.float32).reshape(data_shape)
    idx = np.asarray(indices, np.int64)
    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("GatherElements", ["d", "i"], ["y"], axis=axis)], "g",
                              [info("d", TensorProto.FLOAT, data.shape), info("i", TensorProto.INT64, idx.shape)],
                              [info("y", TensorProto.FLOAT, idx.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"d": data, "i": idx})[0]
    got = run("GatherElements", data, idx, axis=axis)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_gather_elements_refuses_indices_longer_than_data():
    with pytest.raises(ValueError, match=r"indices \(3, 2\) are longer than data \(2, 2\) on axis 0"):
        run("GatherElements", np.zeros((2, 2), np.float32), np.zeros((3, 2), np.int64), axis=1)
    with pytest.raises(ShapeError, match="longer than data"):
        infer_types(get_schema("GatherElements"), [TensorType(np.float32, (2, 2)), TensorType(np.int64, (3, 2))], {"axis": 1})


@pytest.mark.parametrize("axis, index", [(0, 1), (0, -3), (1, 2), (-1, -1), (2, 0)])
def test_gather_of_one_index_is_a_view_with_takes_values(axis, index):
    # PyTorch's packed Q, K, V come out of a transposed view this way: no copy of each
    data = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5).transpose(1, 0, 2)
    y = run("Gather", data, np.array(index, np.int64), axis=axis)
    np.testing.assert_array_equal(y, np.take(data, index, axis=axis))
    assert np.shares_memory(y, data)


def test_gather_of_one_index_out_of_range_names_it():
    with pytest.raises(IndexError, match="index 4 is out of range for axis 1 of size 4"):
        run("Gather", np.zeros((2, 4), np.float32), np.array(4, np.int64), axis=1)


def test_gather_of_one_index_from_a_vector_is_a_number():
    assert run("Gather", i64(7, 8, 9), np.array(-1, np.int64), axis=0) == 9
