"""nn kernels and shape rules: the cases the ONNX node suite leaves out.

Every conv path (depthwise, pointwise, im2col, grouped) against a direct definition, pooling
edge cases, dtype preservation, Upsample (no ONNX node case), and shape rules that agree with the
kernels.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from schemas import TensorType, get_schema, infer_types
from tests.edge_runtime.kernel_calls import run_kernel as run

F32 = np.dtype(np.float32)


def infer(op: str, *types, values=(), num_outputs=1, **attrs):
    schema = get_schema(op)
    return infer_types(schema, list(types), schema.resolve_attrs(attrs), input_values=list(values),
                       num_outputs=num_outputs)


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only array, like a weight mapped from a .flow file: kernels must not write into it."""
    array = np.array(array)
    array.setflags(write=False)
    return array


def conv_by_definition(x, w, b, strides, pads, dilations, group):
    """Direct (slow, obviously right) convolution over explicit loops on output positions."""
    n_sp = x.ndim - 2
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + n_sp]) for i in range(n_sp)])
    kernel = w.shape[2:]
    out = [
        (xpad.shape[2 + i] - ((kernel[i] - 1) * dilations[i] + 1)) // strides[i] + 1 for i in range(n_sp)
    ]
    m, cg = w.shape[:2]
    y = np.zeros((x.shape[0], m, *out), dtype=np.float64)
    for pos in itertools.product(*(range(o) for o in out)):
        region = tuple(
            slice(pos[i] * strides[i], pos[i] * strides[i] + (kernel[i] - 1) * dilations[i] + 1, dilations[i])
            for i in range(n_sp)
        )
        for oc in range(m):
            g = oc // (m // group)
            patch = xpad[(slice(None), slice(g * cg, (g + 1) * cg)) + region]
            y[(slice(None), oc) + pos] = (patch * w[oc]).reshape(x.shape[0], -1).sum(axis=1)
    if b is not None:
        y += b.reshape((1, -1) + (1,) * n_sp)
    return y


CONV_CASES = [
    # (x shape, w shape, group, strides, pads, dilations): each dispatch path, 1-D to 3-D
    ((2, 6, 9, 11), (6, 1, 3, 3), 6, [1, 1], [1, 1, 1, 1], [1, 1]),  # depthwise
    ((1, 6, 10, 9), (6, 1, 3, 3), 6, [2, 2], [1, 0, 2, 1], [1, 1]),  # depthwise, stride 2, odd pads
    ((1, 4, 10, 7), (4, 1, 3, 2), 4, [1, 1], [2, 0, 1, 3], [2, 1]),  # depthwise, dilated
    ((1, 4, 10, 7), (4, 1, 3, 3), 4, [2, 1], [1, 1, 1, 1], [1, 1]),  # depthwise, unequal strides
    ((2, 3, 5, 6, 7), (3, 1, 3, 3, 3), 3, [2, 2, 2], [1] * 6, [1, 1, 1]),  # depthwise 3-D
    ((2, 8, 7, 7), (5, 8, 1, 1), 1, [1, 1], [0, 0, 0, 0], [1, 1]),  # pointwise
    ((2, 8, 7, 7), (5, 8, 1, 1), 1, [2, 2], [1, 1, 1, 1], [1, 1]),  # pointwise, stride and pads
    ((2, 4, 8, 9), (6, 4, 3, 3), 1, [1, 2], [1, 2, 0, 1], [1, 1]),  # im2col
    ((1, 6, 9, 9), (4, 3, 3, 2), 2, [2, 1], [1, 1, 1, 1], [2, 1]),  # grouped
    ((2, 4, 12), (6, 2, 5), 2, [3], [2, 2], [2]),  # 1-D grouped
    ((1, 4, 5, 6, 7), (2, 4, 2, 3, 2), 1, [1, 2, 1], [0, 1, 1, 0, 1, 0], [2, 1, 1]),  # 3-D
]


@pytest.mark.parametrize("xs, ws, group, strides, pads, dilations", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_paths_match_definition(xs, ws, group, strides, pads, dilations, bias) -> None:
    rng = np.random.default_rng(0)
    x = frozen(rng.standard_normal(xs).astype(np.float32))
    w = frozen(rng.standard_normal(ws).astype(np.float32))
    b = frozen(rng.standard_normal(ws[0]).astype(np.float32)) if bias else None
    y = run("Conv", x, w, b, group=group, strides=strides, pads=pads, dilations=dilations)
    expected = conv_by_definition(x, w, b, strides, pads, dilations, group)
    assert y.dtype == F32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    (t,) = infer("Conv", TensorType(F32, xs), TensorType(F32, ws), group=group, strides=strides, pads=pads,
                 dilations=dilations)
    assert t == TensorType(F32, y.shape)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_matches_explicit_pads(auto_pad) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4, 3)).astype(np.float32)
    y = run("Conv", x, w, auto_pad=auto_pad, strides=[2, 2])
    pads = {"SAME_UPPER": [1, 0, 2, 1], "SAME_LOWER": [2, 1, 1, 0], "VALID": [0, 0, 0, 0]}[auto_pad]
    np.testing.assert_allclose(y, conv_by_definition(x, w, None, [2, 2], pads, [1, 1], 1), rtol=1e-4, atol=1e-4)
    (t,) = infer("Conv", TensorType(F32, x.shape), TensorType(F32, w.shape), auto_pad=auto_pad, strides=[2, 2])
    assert t.shape == y.shape


def test_depthwise_and_generic_paths_agree() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 16, 13, 12)).astype(np.float32)
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    for stride in (1, 2, 3):
        win = sliding_windows.resolve_window(x.shape[2:], (3, 3), [stride] * 2, [1, 1], [1, 1, 1, 1], "NOTSET")
        fast = sliding_windows._depthwise(x, w, np, win)
        generic = sliding_windows._im2col(sliding_windows.pad_spatial(x, np, win.pad_begin, win.pad_end), w, np, win, 16)
        np.testing.assert_allclose(fast, generic, rtol=1e-5, atol=1e-5)


def test_conv_transpose_is_the_adjoint_of_conv() -> None:
    # <conv(x), y> == <x, conv_transpose(y)> with the same weights, strides, pads and dilations.
    rng = np.random.default_rng(3)
    attrs = {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2], "group": 2}
    x = rng.standard_normal((1, 4, 9, 8))
    w = rng.standard_normal((6, 2, 3, 2))
    y = run("Conv", x, w, **attrs)
    g = rng.standard_normal(y.shape)
    # Conv's (C_out, C_in/group, k...) weights read as ConvTranspose's (C_in, C_out/group, k...).
    xt = run("ConvTranspose", g, w, **attrs)
    assert xt.shape == x.shape
    np.testing.assert_allclose((y * g).sum(), (x * xt).sum(), rtol=1e-9)


@pytest.mark.parametrize("shape, kernel, group", [((2, 4, 5, 7), (2, 2), 1), ((1, 4, 3, 4), (3, 2), 2),
                                                  ((1, 3, 9), (4,), 1), ((1, 2, 3, 4, 2), (2, 2, 2), 1)])
def test_conv_transpose_with_the_stride_of_its_kernel_places_each_tap_once(shape, kernel, group) -> None:
    # U-Net's upsampling: taps that never overlap are written straight into place. Against the
    # definition: out[n, m, i * k + t] = sum over c of x[n, c, i] w[c, m, t] + b[m].
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    c, per_group = shape[1], 3
    w = rng.standard_normal((c, per_group) + kernel).astype(np.float32)
    b = rng.standard_normal(per_group * group).astype(np.float32)
    y = run("ConvTranspose", x, w, b, strides=list(kernel), group=group)
    n_sp = len(kernel)
    want = np.zeros((shape[0], per_group * group) + tuple(s * k for s, k in zip(shape[2:], kernel)))
    for g in range(group):
        xs = x[:, g * (c // group):(g + 1) * (c // group)].astype(np.float64)
        ws = w[g * (c // group):(g + 1) * (c // group)].astype(np.float64)
        for tap in np.ndindex(*kernel):
            place = (slice(None), slice(g * per_group, (g + 1) * per_group)) + tuple(
                slice(t, None, k) for t, k in zip(tap, kernel))
            want[place] = np.einsum("nc...,cm->nm...", xs, ws[(slice(None), slice(None)) + tap])
    want += b.reshape((1, -1) + (1,) * n_sp)
    assert y.dtype == np.float32 and y.flags.c_contiguous
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(run("ConvTranspose", x, w, strides=list(kernel), group=group), x)


@pytest.mark.parametrize("auto_pad, want", [("SAME_UPPER", [0, 1, 0, 0, 2, 0]), ("SAME_LOWER", [0, 1, 0, 0, 2, 0]),
                                             ("NOTSET", [1, 0, 0, 2, 0, 0])])
def test_conv_transpose_output_beyond_the_taps(auto_pad, want) -> None:
    # A stride above the kernel covers 4 of the 6 rows asked for (in * stride under SAME, or the
    # output_shape): the others get no tap. SAME splits the negative total padding as ONNX's
    # reference does; an output_shape puts the rest at the end, as onnxruntime and the reference do.
    x, w = np.float32([1, 2]).reshape(1, 1, 2, 1), np.ones((1, 1, 1, 1), np.float32)
    attrs = {"auto_pad": auto_pad} if auto_pad != "NOTSET" else {"output_shape": [6, 1]}
    y = run("ConvTranspose", x, w, strides=[3, 1], **attrs)
    np.testing.assert_array_equal(y.reshape(-1), want)
    (t,) = infer("ConvTranspose", TensorType(F32, x.shape), TensorType(F32, w.shape), strides=[3, 1], **attrs)
    assert t.shape == y.shape


def test_resize_scaled_lengths_are_computed_in_float32() -> None:
    # float32(0.7) * 10 and float32(1.3) * 10 round to 7 and 13 in float32 (as in onnxruntime and
    # ONNX's shape inference), 6.99999988 and 12.9999995 in float64.
    x = np.zeros((1, 1, 10, 10), np.float32)
    scales = np.float32([1, 1, 0.7, 1.3])
    assert run("Resize", x, None, scales, mode="linear").shape == (1, 1, 7, 13)
    (t,) = infer("Resize", TensorType(F32, x.shape), TensorType(F32, (0,)), TensorType(F32, (4,)),
                 values=[None, None, scales])
    assert t.shape == (1, 1, 7, 13)


def test_grid_sample_reflects_onto_a_single_pixel_with_align_corners() -> None:
    x = np.float32([0, 1, 2]).reshape(1, 1, 3, 1)
    grid = np.float32([[[[-1.2, -0.9], [0.3, 0.5], [1.7, 0.0]]]])  # x (the width-1 axis) far outside
    y = run("GridSample", x, grid, mode="linear", padding_mode="reflection", align_corners=1)
    np.testing.assert_allclose(y.reshape(-1), [0.1, 1.5, 1.0], rtol=1e-6)


def test_max_pool_indices_and_storage_order() -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)[:, :, ::-1]
    y, idx = run("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 1])
    np.testing.assert_array_equal(x.reshape(-1)[idx], y)
    _, idx_col = run("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 1], storage_order=1)
    h, w_ = np.unravel_index(idx % 20, (4, 5))
    np.testing.assert_array_equal(idx_col % 20, w_ * 4 + h)
    assert idx.dtype == np.int64 and y.dtype == F32


def test_max_pool_integer_input_pads_with_the_lowest_value() -> None:
    x = np.full((1, 1, 3, 3), -100, dtype=np.int8)
    y, _ = run("MaxPool", x, kernel_shape=[2, 2], pads=[1, 1, 1, 1])
    assert y.dtype == np.int8 and (y == -100).all()


def test_average_pool_ceil_mode_never_counts_the_overhang() -> None:
    x = np.ones((1, 1, 5, 5), dtype=np.float32)
    for include in (0, 1):
        y = run("AveragePool", x, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, count_include_pad=include)
        assert y.shape == (1, 1, 3, 3)
        np.testing.assert_allclose(y, 1.0)
    (t,) = infer("AveragePool", TensorType(F32, (1, 1, 5, 5)), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    assert t.shape == (1, 1, 3, 3)


def test_global_lp_pool() -> None:
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    y = run("GlobalLpPool", x, p=2)
    np.testing.assert_allclose(y, np.sqrt((x**2).sum(axis=(2, 3), keepdims=True)), rtol=1e-6)
    assert y.dtype == F32


def test_upsample_nearest_and_linear() -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    scales = np.array([1, 1, 2, 3], dtype=np.float32)
    y = run("Upsample", x, scales, mode="nearest")
    np.testing.assert_array_equal(y, np.repeat(np.repeat(x, 2, axis=2), 3, axis=3))
    lin = run("Upsample", x, np.array([1, 1, 2, 2], dtype=np.float32), mode="linear")
    np.testing.assert_allclose(lin[0, 0, 0], [0, 0.5, 1, 1])
    assert lin.dtype == F32
    (t,) = infer("Upsample", TensorType(F32, (1, 1, 2, 2)), TensorType(F32, (4,)), values=[None, scales])
    assert t.shape == (1, 1, 4, 6)


def test_resize_keeps_integer_dtype() -> None:
    x = np.array([[[[0, 100], [200, 250]]]], dtype=np.uint8)
    y = run("Resize", x, None, np.array([1, 1, 2, 2], np.float32), mode="linear")
    assert y.dtype == np.uint8 and y.shape == (1, 1, 4, 4)


def test_normalizations_keep_float32_and_half() -> None:
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float16):
        x = rng.standard_normal((2, 4, 3, 3)).astype(dtype)
        c = np.ones(4, dtype=dtype)
        assert run("BatchNormalization", x, c, c, c, c)[0].dtype == dtype
        assert run("InstanceNormalization", x, c, c).dtype == dtype
        assert run("GroupNormalization", x, c, c, num_groups=2).dtype == dtype
        assert run("LRN", x, size=3).dtype == dtype
        y, mean, inv = run("LayerNormalization", x, np.ones(3, dtype=dtype), axis=-1)
        assert y.dtype == dtype and mean.shape == (2, 4, 3, 1)


@pytest.mark.parametrize("dtype, axis", [(np.float32, -1), (np.float32, -2), (np.float64, 1), (np.float16, -1)])
def test_rms_normalization_matches_its_formula(dtype, axis: int) -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 5, 8)) * 3 + 1).astype(dtype)[:, ::-1]  # a strided view, as a Split gives
    scale = rng.uniform(0.5, 1.5, x.shape[axis:]).astype(dtype)
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axis=axes, keepdims=True) + 1e-6) * scale
    y = run("RMSNormalization", frozen(x), frozen(scale), axis=axis, epsilon=1e-6)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, want, rtol=2e-3 if dtype == np.float16 else 2e-6, atol=1e-6)


def test_lp_normalization_of_a_zero_vector_is_zero() -> None:
    y = run("LpNormalization", np.zeros((2, 3), dtype=np.float32), axis=1)
    np.testing.assert_array_equal(y, 0)


def test_dropout_inference_is_identity_and_training_scales() -> None:
    x = np.ones((100, 100), dtype=np.float32)
    y, mask = run("Dropout", x)
    assert y is x and mask.all()
    y, mask = run("Dropout", x, np.array(0.25, np.float32), np.array(True), seed=3)
    assert y.dtype == F32
    np.testing.assert_allclose(y[mask], 1 / 0.75, rtol=1e-6)
    assert 0.2 < 1 - mask.mean() < 0.3


def test_attention_grouped_query_equals_repeated_heads() -> None:
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    y = run("Attention", q, k, v, is_causal=1)[0]
    y_full = run("Attention", q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), is_causal=1)[0]
    np.testing.assert_allclose(y, y_full, rtol=1e-6)
    assert y.dtype == F32 and y.shape == (1, 4, 3, 8)


def softmax_attention_reference(q, k, v, mask, scale):
    """softmax(Q Kᵀ * scale + mask) V in float64, each row shifted by its own maximum."""
    scores = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), k.astype(np.float64)) * scale + mask
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bhst,bhtd->bhsd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))


@pytest.mark.parametrize("row_offset, shifted_by_top", [(0.0, True), (-40.0, False)])
def test_plain_attention_matches_per_row_softmax_whichever_shift_it_takes(row_offset, shifted_by_top) -> None:
    # BERT's padding mask (finfo.min on padded keys) over transposed (B, S, H, D) views; with one
    # query row's scores lowered by 40 (its exponentials under the sum floor when shifted by the
    # largest score of all) the kernel must fall back to shifting each row by its own maximum.
    from edge_runtime.kernels.nn import exp_shifted_by_top

    rng = np.random.default_rng(6)
    b, h, s, d = 2, 3, 7, 4
    q, k, v = (rng.standard_normal((b, s, h, d)).astype(np.float32).transpose(0, 2, 1, 3) for _ in range(3))
    mask = np.zeros((b, 1, s, s), np.float32)
    mask[1, :, :, 5:] = np.finfo(np.float32).min
    mask[0, 0, 2, :] += row_offset
    scale = 0.4
    scores = np.matmul(q * np.float32(scale), k.transpose(0, 1, 3, 2)) + mask
    assert (exp_shifted_by_top(scores)[0] is not None) == shifted_by_top
    y = run("Attention", q, k, v, mask, scale=scale, n_outputs=1)
    assert y.dtype == F32 and y.shape == (b, h, s, d)
    np.testing.assert_allclose(y, softmax_attention_reference(q, k, v, mask, scale), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask_shape", [(2, 1, 5, 7), (1, 1, 5, 7), (2, 6, 5, 7), (5, 7), (2, 1, 1, 7)])
@pytest.mark.parametrize("row_offset", [0.0, -40.0])
def test_plain_grouped_query_attention_equals_repeated_heads(mask_shape, row_offset: float) -> None:
    # Llama-style GQA handed K and V before repeat_kv: 6 query heads on 2 key/value heads, V a
    # transposed view; a float mask of each shape that broadcasts, and (row_offset -40) one query
    # row far below the rest, so the kernel falls back to shifting each row by its own maximum.
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 6, 5, 4)).astype(np.float32)
    k = rng.standard_normal((2, 2, 7, 4)).astype(np.float32)
    v = rng.standard_normal((2, 7, 2, 4)).astype(np.float32).transpose(0, 2, 1, 3)
    mask = np.where(rng.random(mask_shape) < 0.3, np.finfo(np.float32).min, 0).astype(np.float32)
    mask[..., 0] = 0  # every query row keeps a key
    mask = mask + np.float32(row_offset) * (np.arange(mask_shape[-2]) == 1).reshape(-1, 1)
    y = run("Attention", q, k, v, mask, scale=0.5, n_outputs=1)
    k_full, v_full = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    full_mask = np.broadcast_to(mask, (2, 6, 5, 7))
    assert y.dtype == F32 and y.shape == (2, 6, 5, 4)
    np.testing.assert_allclose(y, softmax_attention_reference(q, k_full, v_full, full_mask, 0.5), rtol=1e-5, atol=3e-6)


def test_plain_attention_gives_zeros_for_a_row_masked_to_minus_infinity() -> None:
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 5, 3)).astype(np.float32) for _ in range(3))
    mask = np.zeros((1, 1, 5, 5), np.float32)
    mask[0, 0, 3, :] = -np.inf
    y = run("Attention", q, k, v, mask, n_outputs=1)
    assert not np.isnan(y).any() and not y[:, :, 3].any()
    live = [0, 1, 2, 4]
    expected = softmax_attention_reference(q, k, v, np.zeros_like(mask), 3 ** -0.5)
    np.testing.assert_allclose(y[:, :, live], expected[:, :, live], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cache_batch", [2, 1])
def test_rotary_embedding_of_whole_heads_matches_transformers_rotate_half(cache_batch: int) -> None:
    # transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin with cos = Cos(Concat(f, f));
    # x a transposed (B, S, H, D) view, as the heads arrive from their Reshape/Transpose.
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 5, 3, 8)).astype(np.float32).transpose(0, 2, 1, 3)
    f = rng.uniform(0, 6, (cache_batch, 5, 4))
    cos, sin = np.cos(f).astype(np.float32), np.sin(f).astype(np.float32)
    x64 = x.astype(np.float64)
    rotate_half = np.concatenate([-x64[..., 4:], x64[..., :4]], axis=-1)
    want = x64 * np.cos(np.concatenate([f, f], -1))[:, None] + rotate_half * np.sin(np.concatenate([f, f], -1))[:, None]
    y = run("RotaryEmbedding", frozen(x), frozen(cos), frozen(sin), None)
    assert y.dtype == F32 and y.shape == x.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_nll_loss_mean_ignores_ignored_targets() -> None:
    logp = np.log(np.full((3, 4), 0.25, dtype=np.float32))
    target = np.array([0, 5, 1])
    loss = run("NegativeLogLikelihoodLoss", logp, target, ignore_index=5)
    np.testing.assert_allclose(loss, np.log(4), rtol=1e-6)
    assert loss.dtype == F32


def test_shape_rules() -> None:
    x = TensorType(F32, (1, 8, None, 16))
    (t,) = infer("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert t.shape == (1, 8, None, 8)
    (t,) = infer("ConvTranspose", TensorType(F32, (1, 4, 5, 5)), TensorType(F32, (4, 3, 3, 3)), strides=[2, 2],
                 output_padding=[1, 1])
    assert t.shape == (1, 3, 12, 12)
    (t,) = infer("DepthToSpace", TensorType(F32, (1, 8, 2, 3)), blocksize=2)
    assert t.shape == (1, 2, 4, 6)
    (t,) = infer("Resize", TensorType(F32, (1, 3, 4, 4)), TensorType(F32, (0,)), TensorType(F32, (4,)),
                 values=[None, None, np.array([1, 1, 1.5, 2], np.float32)])
    assert t.shape == (1, 3, 6, 8)
    with pytest.raises(Exception, match="channels"):
        infer("Conv", TensorType(F32, (1, 3, 8, 8)), TensorType(F32, (4, 2, 3, 3)))


def test_causal_conv_with_state_names_a_wrong_state_or_activation() -> None:
    x = np.ones((1, 2, 4), np.float32)
    w = np.ones((2, 1, 3), np.float32)
    with pytest.raises(ValueError, match=r"past_state must have shape \(1, 2, 2\), got \(1, 2, 3\)"):
        run("CausalConvWithState", x, w, None, np.zeros((1, 2, 3), np.float32))
    with pytest.raises(ValueError, match="activation must be one of"):
        run("CausalConvWithState", x, w, activation="gelu")
    y, state = run("CausalConvWithState", x, w, None, np.full((1, 2, 2), 2.0, np.float32))
    np.testing.assert_array_equal(y, [[[5, 4, 3, 3]] * 2])  # taps see 2, 2, 1 / 2, 1, 1 / 1, 1, 1 ...
    np.testing.assert_array_equal(state, np.ones((1, 2, 2)))


@pytest.mark.parametrize("shape, dtype", [((2, 3, 5), np.float32), ((2, 3, 4, 5), np.float32),
                                          ((1, 2, 3, 4, 5), np.float64), ((0, 3, 4, 4), np.float32),
                                          ((2, 3, 4, 4), np.float16)])
def test_global_average_pool_matches_the_mean(shape, dtype) -> None:
    x = np.random.default_rng(9).standard_normal(shape).astype(dtype)
    got = run("GlobalAveragePool", x)
    want = x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)
    assert got.shape == want.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float16 else 1e-6, atol=1e-6)
