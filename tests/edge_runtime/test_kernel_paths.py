"""Fast kernel paths against the generic path or a direct definition, on shapes that stress them.

Each path the dispatch picks by shape (channels-last depthwise, im2col, ...) is also forced on
shapes where it would not be picked, so a wrong index in it cannot hide behind the dispatch.
"""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from tests.edge_runtime.kernel_calls import run_kernel as run
from tests.edge_runtime.test_kernels_nn import conv_by_definition

DEPTHWISE_CASES = [
    # (x shape, kernel, strides, pads, dilations)
    ((2, 5, 7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 6, 13, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((2, 3, 14, 15), (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)),
    ((1, 4, 12, 10), (5, 3), (3, 2), (2, 0, 1, 1), (1, 2)),
    ((1, 3, 9, 9), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ((2, 4, 6, 8), (2, 4), (1, 3), (0, 0, 0, 0), (1, 1)),
    ((1, 2, 5, 5), (5, 5), (1, 1), (0, 0, 0, 0), (1, 1)),  # one output pixel
    ((3, 4, 17), (3,), (2,), (1, 1), (1,)),
    ((1, 3, 5, 6, 7), (3, 2, 3), (1, 2, 1), (1, 0, 1, 1, 1, 0), (1, 1, 2)),
]


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", DEPTHWISE_CASES)
def test_depthwise_channels_last_matches_definition(shape, kernel, strides, pads, dilations, with_bias) -> None:
    rng = np.random.default_rng(0)
    c = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((c, 1) + kernel).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if with_bias else None
    want = conv_by_definition(x, w, b, strides, pads, dilations, c)
    win = sliding_windows.resolve_window(shape[2:], kernel, strides, dilations, pads, "NOTSET")
    got = sliding_windows._depthwise(x, w, np, win, b)
    assert got.shape == want.shape and got.dtype == x.dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("limit", [0, 10**9])  # every depthwise conv to im2col, or to channels-last
@pytest.mark.parametrize("shape, kernel, strides, pads, dilations", DEPTHWISE_CASES)
def test_depthwise_dispatch_either_way(monkeypatch, limit, shape, kernel, strides, pads, dilations) -> None:
    monkeypatch.setattr(sliding_windows, "CHANNELS_LAST_MAX_PIXELS", limit)
    rng = np.random.default_rng(1)
    c = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((c, 1) + kernel).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    got = run("Conv", x, w, b, group=c, strides=list(strides), pads=list(pads), dilations=list(dilations))
    np.testing.assert_allclose(got, conv_by_definition(x, w, b, strides, pads, dilations, c), rtol=1e-4, atol=1e-4)


LSTM_CASES = [
    # (direction, layout, initial states, bias, seq, batch, input, hidden)
    ("forward", 0, False, True, 5, 3, 7, 4),
    ("forward", 0, True, False, 1, 1, 2, 3),
    ("reverse", 0, True, True, 4, 2, 3, 5),
    ("bidirectional", 0, False, True, 6, 3, 5, 4),
    ("bidirectional", 1, True, True, 3, 4, 2, 6),
    ("forward", 1, False, False, 2, 5, 3, 2),
    ("reverse", 0, True, False, 0, 2, 3, 4),  # no steps: Y empty, the final states the initial ones
]


@pytest.mark.parametrize("direction, layout, with_states, with_bias, seq, batch, n_in, hidden", LSTM_CASES)
def test_lstm_fast_steps_match_the_generic_loop(direction, layout, with_states, with_bias, seq, batch, n_in, hidden) -> None:
    # A clip no value reaches sends the same node down the generic per-gate loop.
    rng = np.random.default_rng(2)
    d = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((seq, batch, n_in) if layout == 0 else (batch, seq, n_in)).astype(np.float32)
    w = rng.standard_normal((d, 4 * hidden, n_in)).astype(np.float32)
    r = rng.standard_normal((d, 4 * hidden, hidden)).astype(np.float32)
    b = rng.standard_normal((d, 8 * hidden)).astype(np.float32) if with_bias else None
    state_shape = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    h0 = rng.standard_normal(state_shape).astype(np.float32) if with_states else None
    c0 = rng.standard_normal(state_shape).astype(np.float32) if with_states else None
    inputs = (x, w, r, b, None, h0, c0)
    attrs = {"hidden_size": hidden, "direction": direction, "layout": layout}
    c0_before = None if c0 is None else c0.copy()
    fast = run("LSTM", *inputs, **attrs)
    generic = run("LSTM", *inputs, clip=1e30, **attrs)
    for got, want in zip(fast, generic):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if c0 is not None:
        np.testing.assert_array_equal(c0, c0_before)  # the initial state is not updated in place


@pytest.mark.parametrize("op, gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
def test_recurrent_layers_over_no_steps_return_the_initial_state(op, gates) -> None:
    rng = np.random.default_rng(3)
    x = np.zeros((0, 2, 3), np.float32)
    w, r = rng.standard_normal((1, gates * 4, 3)).astype(np.float32), rng.standard_normal((1, gates * 4, 4)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 4)).astype(np.float32)
    states = (h0, h0 + 1) if op == "LSTM" else (h0,)
    for clip in (None, 1e30):  # the tuned LSTM steps and the generic loop
        out = run(op, x, w, r, None, None, *states, hidden_size=4, clip=clip)
        assert out[0].shape == (0, 1, 2, 4)
        for got, want in zip(out[1:], states):
            np.testing.assert_array_equal(got, want)


def pool_by_definition(x, reduce, kernel, strides, pads, dilations, ceil_mode, fill):
    """Direct pooling over explicit loops on output positions; windows read ``fill`` outside the input."""
    n_sp = x.ndim - 2
    out = []
    for i in range(n_sp):
        span = x.shape[2 + i] + pads[i] + pads[i + n_sp] - ((kernel[i] - 1) * dilations[i] + 1)
        o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            o -= 1
        out.append(o)
    y = np.empty(x.shape[:2] + tuple(out), dtype=np.float64)
    for pos in np.ndindex(*out):
        values = []
        for tap in np.ndindex(*kernel):
            at = [pos[i] * strides[i] + tap[i] * dilations[i] - pads[i] for i in range(n_sp)]
            inside = all(0 <= a < x.shape[2 + i] for i, a in enumerate(at))
            values.append(x[(slice(None), slice(None)) + tuple(at)] if inside else np.full(x.shape[:2], fill))
        y[(slice(None), slice(None)) + pos] = reduce(np.stack(values), axis=0)
    return y


POOL_CASES = [
    # (x shape, kernel, strides, pads, dilations, ceil_mode)
    ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 0),
    ((1, 2, 8, 7), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 0),
    ((1, 2, 10, 11), (3, 2), (2, 3), (1, 0, 0, 1), (2, 1), 1),
    ((2, 1, 7, 6), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 2, 13), (4,), (3,), (2, 1), (1,), 1),
    ((1, 2, 5, 6, 7), (2, 3, 2), (1, 2, 2), (0, 1, 1, 1, 0, 0), (1, 1, 2), 0),
]


@pytest.mark.parametrize("shape, kernel, strides, pads, dilations, ceil_mode", POOL_CASES)
def test_separable_max_and_average_pool_match_definition(shape, kernel, strides, pads, dilations, ceil_mode) -> None:
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads), "ceil_mode": ceil_mode}
    y = run("MaxPool", x, dilations=list(dilations), **attrs)[0]
    want = pool_by_definition(x, np.max, kernel, strides, pads, dilations, ceil_mode, -np.inf)
    np.testing.assert_array_equal(y, want.astype(np.float32))
    # AveragePool through the same reduction: window sums over the declared pads / the kernel size.
    if dilations == (1,) * len(kernel) and not ceil_mode:
        avg = run("AveragePool", x, count_include_pad=1, **attrs)
        want = pool_by_definition(x, np.sum, kernel, strides, pads, dilations, 0, 0.0) / np.prod(kernel)
        np.testing.assert_allclose(avg, want, rtol=1e-5, atol=1e-6)


CONV_CASES = [
    # (x shape, w shape, group, pads, dilations): stride 1, where the flat-plane columns apply
    ((2, 3, 9, 8), (4, 3, 3, 3), 1, (1, 1, 1, 1), (1, 1)),
    ((1, 2, 7, 11), (3, 2, 5, 2), 1, (2, 0, 1, 1), (1, 2)),
    ((3, 4, 6, 6), (4, 2, 3, 3), 2, (0, 0, 0, 0), (1, 1)),
    ((1, 6, 10, 9), (6, 1, 3, 3), 6, (1, 1, 1, 1), (2, 1)),  # depthwise
    ((2, 1, 8, 8), (5, 1, 5, 5), 1, (2, 2, 2, 2), (1, 1)),
    ((1, 3, 4, 5), (2, 3, 4, 5), 1, (0, 0, 0, 0), (1, 1)),  # one output pixel
    ((2, 3, 12), (4, 3, 3), 1, (1, 2), (2,)),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), 1, (1, 0, 1, 0, 1, 1), (1, 1, 2)),
]


@pytest.mark.parametrize("limit", [0, 10**9])  # a batch side by side in one matmul, or one matmul an image
@pytest.mark.parametrize("batch", [None, 3])  # the case's own batch, or three images
@pytest.mark.parametrize("x_shape, w_shape, group, pads, dilations", CONV_CASES)
def test_flat_plane_columns_match_definition(monkeypatch, limit, batch, x_shape, w_shape, group, pads, dilations) -> None:
    monkeypatch.setattr(sliding_windows, "FLAT_PER_IMAGE_MAX_WEIGHTS", limit)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape if batch is None else (batch,) + x_shape[1:]).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    strides = (1,) * (x.ndim - 2)
    win = sliding_windows.resolve_window(x_shape[2:], w_shape[2:], strides, dilations, pads, "NOTSET")
    got = sliding_windows._im2col_flat(x, w, np, win, group)
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, conv_by_definition(x, w, None, strides, pads, dilations, group), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("waste", [-1, 10**9])  # never the flat-plane columns, or always
@pytest.mark.parametrize("x_shape, w_shape, group, pads, dilations", CONV_CASES)
def test_conv_dispatch_either_way(monkeypatch, waste, x_shape, w_shape, group, pads, dilations) -> None:
    monkeypatch.setattr(sliding_windows, "FLAT_COLUMNS_MAX_WASTE", waste)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    x = x[..., ::-1]  # a non-contiguous input, as a Transpose or Slice may hand over
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    strides = (1,) * (x.ndim - 2)
    got = run("Conv", x, w, b, group=group, pads=list(pads), dilations=list(dilations))
    np.testing.assert_allclose(got, conv_by_definition(x, w, b, strides, pads, dilations, group), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("strides", [(1, 1), (2, 1)])  # flat-plane columns, or windows
@pytest.mark.parametrize("chunk_bytes", [1, 20000])  # one image per chunk, or a few with a ragged last chunk
def test_conv_in_batch_chunks_matches_definition(monkeypatch, chunk_bytes, strides) -> None:
    monkeypatch.setattr(sliding_windows, "COLUMN_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((7, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = run("Conv", x, w, b, strides=list(strides), pads=[1, 0, 1, 2])
    want = conv_by_definition(x, w, b, strides, (1, 0, 1, 2), (1, 1), 1)
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


GROUPED_CASES = [
    # (x shape, w shape, group, strides, pads): depthwise, depthwise with a multiplier, two groups
    ((3, 6, 9, 8), (6, 1, 3, 3), 6, (1, 1), (1, 1, 1, 1)),
    ((2, 6, 9, 8), (12, 1, 3, 3), 6, (2, 2), (1, 0, 1, 1)),
    ((3, 4, 7, 7), (6, 2, 3, 3), 2, (1, 1), (0, 0, 0, 0)),
    ((2, 4, 11), (4, 1, 5), 4, (1,), (2, 2)),
]


@pytest.mark.parametrize("chunk_bytes", [1, 1500, 10**9])  # a group at a time, a few, whole images
@pytest.mark.parametrize("x_shape, w_shape, group, strides, pads", GROUPED_CASES)
def test_grouped_columns_in_chunks_match_definition(monkeypatch, chunk_bytes, x_shape, w_shape, group, strides, pads) -> None:
    monkeypatch.setattr(sliding_windows, "GROUP_COLUMN_CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(sliding_windows, "CHANNELS_LAST_MAX_PIXELS", 0)  # strided depthwise through the columns too
    rng = np.random.default_rng(9)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    dilations = (1,) * len(strides)
    got = run("Conv", x, w, b, group=group, strides=list(strides), pads=list(pads))
    want = conv_by_definition(x, w, b, strides, pads, dilations, group)
    assert got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


CHANNELS_LAST_CASES = [
    # (x shape, w shape, strides, pads, dilations): group 1, any stride, rank and ceil-free window;
    # inputs of few channels and of more than sliding_windows.FEW_CHANNELS, padded and not
    ((3, 16, 8, 8), (32, 16, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 5, 9, 7), (4, 5, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2)),
    ((4, 3, 6, 6), (2, 3, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((2, 12, 6, 6), (4, 12, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),  # more than FEW_CHANNELS, unpadded
    ((1, 2, 5, 6), (3, 2, 5, 6), (1, 1), (0, 0, 0, 0), (1, 1)),  # one output pixel
    ((2, 4, 13), (6, 4, 3), (2,), (1, 2), (2,)),
    ((2, 3, 5, 6, 4), (2, 3, 2, 3, 2), (1, 2, 1), (1, 0, 1, 0, 1, 1), (1, 1, 2)),
]


@pytest.mark.parametrize("x_shape, w_shape, strides, pads, dilations", CHANNELS_LAST_CASES)
def test_channels_last_columns_match_definition(x_shape, w_shape, strides, pads, dilations) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)[..., ::-1]  # non-contiguous, as a Slice hands over
    w = rng.standard_normal(w_shape).astype(np.float32)
    win = sliding_windows.resolve_window(x_shape[2:], w_shape[2:], strides, dilations, pads, "NOTSET")
    got = sliding_windows._im2col_channels_last(x, w, np, win, 1)
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, conv_by_definition(x, w, None, strides, pads, dilations, 1), rtol=1e-4, atol=1e-4)


def test_batch_of_small_planes_dispatches_channels_last(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(sliding_windows, "_im2col_channels_last", lambda *a: calls.append(a) or sliding_windows._im2col_padded(*a))
    rng = np.random.default_rng(8)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    for x_shape, strides, expected in [((8, 16, 8, 8), (2, 2), 1), ((1, 16, 8, 8), (2, 2), 0), ((4, 16, 8, 8), (2, 2), 0),
                                       ((4, 16, 40, 40), (2, 2), 0)]:
        calls.clear()
        x = rng.standard_normal(x_shape).astype(np.float32)
        got = run("Conv", x, w, None, strides=list(strides), pads=[1, 1, 1, 1])
        assert len(calls) == expected, x_shape
        np.testing.assert_allclose(got, conv_by_definition(x, w, None, strides, (1, 1, 1, 1), (1, 1), 1), rtol=1e-4, atol=1e-4)


def test_wide_kernel_batch_dispatches_channels_last(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr(sliding_windows, "_im2col_channels_last", lambda *a: calls.append(a) or sliding_windows._im2col_padded(*a))
    rng = np.random.default_rng(12)
    # (x shape, kernel, expected channels-last calls): LeNet's 6->16 5x5 at batch 8 goes channels-last;
    # a smaller batch, a 3x3 kernel or rows of kernel_width * C < 24 keep flat columns
    for x_shape, k, expected in [((8, 6, 14, 14), 5, 1), ((4, 6, 14, 14), 5, 0), ((8, 6, 14, 14), 3, 0),
                                 ((8, 4, 14, 14), 5, 0), ((8, 6, 30, 30), 5, 0)]:
        calls.clear()
        x = rng.standard_normal(x_shape).astype(np.float32)
        w = rng.standard_normal((16, x_shape[1], k, k)).astype(np.float32)
        got = run("Conv", x, w, None)
        assert len(calls) == expected, (x_shape, k)
        np.testing.assert_allclose(got, conv_by_definition(x, w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1), rtol=1e-4, atol=1e-4)


# the swapped product from 2 to GEMM_SWAP_MAX_ROWS rows, to GEMM_SWAP_LARGE_MAX_ROWS for large weights
@pytest.mark.parametrize("rows, k, n", [(1, 300, 260), (2, 300, 260), (7, 300, 260), (64, 300, 260), (65, 300, 260),
                                        (65, 1024, 1024), (128, 1024, 1024), (129, 1024, 1024)])
@pytest.mark.parametrize("trans_a", [0, 1])
def test_gemm_of_few_rows_matches_definition(rows, k, n, trans_a) -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((k, rows) if trans_a else (rows, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    want = (a.T if trans_a else a).astype(np.float64) @ b.T.astype(np.float64) * 0.5 + 2.0 * c
    got = run("Gemm", a, b, c, transA=trans_a, transB=1, alpha=0.5, beta=2.0)
    # one block either way: a swapped product comes back column-major, the transposed view
    assert got.shape == (rows, n) and got.dtype == np.float32 and (got.flags.c_contiguous or got.flags.f_contiguous)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_gemm_chain_reads_a_column_major_product() -> None:
    # The first Gemm's swapped product is column-major; the second reads it as its A (with and
    # without transA) and must match the definition, as must elementwise readers of it.
    rng = np.random.default_rng(12)
    x = rng.standard_normal((8, 300)).astype(np.float32)
    w1, w2 = (rng.standard_normal((280, 300)).astype(np.float32), rng.standard_normal((260, 280)).astype(np.float32))
    h = run("Gemm", x, w1, None, transA=0, transB=1, alpha=1.0, beta=1.0)
    assert h.flags.f_contiguous and not h.flags.c_contiguous
    want_h = x.astype(np.float64) @ w1.T.astype(np.float64)
    np.testing.assert_allclose(run("Relu", h), np.maximum(want_h, 0), rtol=1e-4, atol=1e-3)
    got = run("Gemm", h, w2, None, transA=0, transB=1, alpha=1.0, beta=1.0)
    np.testing.assert_allclose(got, want_h @ w2.T.astype(np.float64), rtol=1e-4, atol=1e-2)
    got_t = run("Gemm", np.asfortranarray(h.T), w2, None, transA=1, transB=1, alpha=1.0, beta=1.0)
    np.testing.assert_allclose(got_t, got, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("rows", [1, 2, 16, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_over_a_row_major_weight_reads_a_column_major_product(rows, dtype) -> None:
    # LeNet's 400->120->84 as the exporter stores it: the first weight (N, K), its product swapped
    # (column-major); the second (K, N) with transB=0 (exporter.passes.gemm_layout), as a FusedGemm
    # with Relu, then a plain Gemm with alpha and beta.
    rng = np.random.default_rng(13)
    x = rng.standard_normal((rows, 400)).astype(dtype)
    w1, w2 = rng.standard_normal((120, 400)).astype(dtype), rng.standard_normal((120, 84)).astype(dtype)
    c2 = rng.standard_normal(84).astype(dtype)
    h = run("Gemm", x, w1, None, transA=0, transB=1, alpha=1.0, beta=1.0)
    got = run("FusedGemm", h, w2, c2, domain="flowstack", transB=0, activation="Relu")
    want = np.maximum(x.astype(np.float64) @ w1.T.astype(np.float64) @ w2 + c2, 0)
    assert got.dtype == dtype and got.shape == (rows, 84)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    scaled = run("Gemm", h, w2, c2, transB=0, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(scaled, 0.5 * (x.astype(np.float64) @ w1.T @ w2) + 2.0 * c2, rtol=1e-4, atol=1e-3)


def test_gemm_swaps_its_product_for_few_rows_and_for_large_weights_a_few_more() -> None:
    from edge_runtime.kernels.math import _swap_pays

    small, large = np.zeros((512, 512), np.float32), np.zeros((1024, 1024), np.float32)
    assert [_swap_pays(r, small) for r in (1, 2, 64, 65)] == [False, True, True, False]
    assert [_swap_pays(r, large) for r in (1, 2, 128, 129)] == [False, True, True, False]
    assert _swap_pays(16, np.zeros((120, 400), np.float32))  # LeNet's first Linear at batch 16
    assert not _swap_pays(8, np.zeros((1024, 64), np.float32))  # a side under 80
    assert not _swap_pays(8, np.zeros((1024, 1024), np.float32).T)  # not row-major
