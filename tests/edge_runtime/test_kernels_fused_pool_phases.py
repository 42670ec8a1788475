"""FusedConvMaxPool over the pool's offsets (``pool_phases``): where it applies, where it must not,
and the stacked filters it keeps for read-only weights."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from benchmarks.models import lenet
from edge_runtime import load
from edge_runtime.kernels import pool_phases, sliding_windows
from exporter import flow_writer
from exporter.onnx_import import import_onnx, onnx_to_flow_bytes
from exporter.passes import optimize
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

# (x shape, w shape, conv attrs, pool attrs, layout the stacked convolution runs in)
APPLIES = [
    ((16, 1, 28, 28), (6, 1, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "planar"),
    ((1, 1, 28, 28), (6, 1, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "planar"),
    ((16, 6, 14, 14), (16, 6, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "channels-last"),
    # odd convolution outputs (13x11): the pool drops the last row and column, phases are uneven
    ((4, 1, 13, 11), (3, 1, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "planar"),
    ((4, 6, 15, 13), (5, 6, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "channels-last"),
    # uneven and odd pads: the stride phases start at different plane rows
    ((3, 2, 12, 10), (4, 2, 3, 3), {"pads": [1, 0, 2, 1]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "planar"),
    ((3, 8, 12, 10), (4, 8, 3, 3), {"pads": [0, 1, 1, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "channels-last"),
    ((2, 2, 11, 11), (4, 2, 3, 3), {"auto_pad": "SAME_UPPER"}, {"kernel_shape": [2, 2], "strides": [2, 2]}, "planar"),
    # strided convolutions, pools with gaps (stride > kernel) and 3x3 tiles
    ((3, 2, 19, 18), (4, 2, 5, 5), {"strides": [2, 2], "pads": [2, 1, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]},
     "planar"),
    ((3, 6, 19, 18), (4, 6, 5, 5), {"strides": [2, 2], "pads": [2, 1, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]},
     "channels-last"),
    ((6, 2, 14, 14), (4, 2, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [3, 3]}, "planar"),
    ((3, 2, 17, 17), (4, 2, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [3, 3], "strides": [3, 3]}, "planar"),
    ((8, 3, 10, 12), (4, 3, 3, 5), {}, {"kernel_shape": [2, 3], "strides": [2, 3]}, "planar"),
    # 1-D and 3-D
    ((4, 3, 21), (5, 3, 5), {"pads": [2, 2]}, {"kernel_shape": [2], "strides": [2]}, "planar"),
    ((4, 12, 21), (5, 12, 5), {"pads": [1, 3]}, {"kernel_shape": [2], "strides": [2]}, "channels-last"),
    ((2, 2, 9, 8, 7), (3, 2, 5, 5, 5), {"pads": [2] * 6}, {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, "planar"),
]

# where the phases must not run (the convolution and pool then run as before)
NEAR_MISSES = [
    ((4, 2, 12, 12), (4, 2, 3, 3), {}, {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]}),  # pool pads
    ((4, 4, 12, 12), (4, 2, 3, 3), {"group": 2}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # grouped
    ((4, 4, 12, 12), (6, 4, 1, 1), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # 1x1: 4x the work
    ((3, 2, 16, 16), (4, 2, 3, 3), {"dilations": [2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # 4x
    ((3, 2, 17, 17), (4, 2, 3, 3), {"strides": [2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # 2.8x
    ((4, 2, 13, 13), (4, 2, 5, 5), {}, {"kernel_shape": [3, 3], "strides": [2, 2]}),  # overlapping: 4.4x
    ((1, 6, 14, 14), (16, 6, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # batch 1: weights > columns
    ((0, 1, 28, 28), (6, 1, 5, 5), {"pads": [2, 2, 2, 2]}, {"kernel_shape": [2, 2], "strides": [2, 2]}),  # empty
]


def _windows(x_shape, w_shape, conv_attrs, pool_attrs):
    win = sliding_windows.resolve_window(x_shape[2:], w_shape[2:], conv_attrs.get("strides"),
                                         conv_attrs.get("dilations"), conv_attrs.get("pads"),
                                         conv_attrs.get("auto_pad", "NOTSET"))
    pool = sliding_windows.resolve_window(win.out, pool_attrs["kernel_shape"], pool_attrs.get("strides"), None,
                                          pool_attrs.get("pads"), "NOTSET")
    return win, pool


def _phase_plan(x, w, conv_attrs, pool_attrs):
    win, pool = _windows(x.shape, w.shape, conv_attrs, pool_attrs)
    return pool_phases.plan(x, w, conv_attrs.get("group", 1), win, pool, np)


def _inputs(x_shape, w_shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    return x, w, rng.standard_normal(w_shape[0]).astype(dtype)


def _fused(x, w, b, conv_attrs, pool_attrs, activation="Relu", params=()):
    return run("FusedConvMaxPool", x, w, b, domain=DOMAIN, activation=activation, activation_params=list(params),
               **conv_attrs, **{f"pool_{k}": v for k, v in pool_attrs.items()})


def _unfused(x, w, b, conv_attrs, pool_attrs, activation="Relu", params=()):
    if activation:
        y = run("FusedConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=list(params),
                **conv_attrs)
    else:
        y = run("Conv", x, w, b, **conv_attrs)
    return run("MaxPool", y, **pool_attrs)[0]


def _read_only(array):
    """``array`` as a loaded model holds its weights: a read-only view of read-only bytes."""
    return np.frombuffer(array.tobytes(), dtype=array.dtype).reshape(array.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, conv_attrs, pool_attrs, layout", APPLIES)
def test_phases_match_the_three_ops(x_shape, w_shape, conv_attrs, pool_attrs, layout, dtype) -> None:
    x, w, b = _inputs(x_shape, w_shape, dtype)
    w = _read_only(w)
    phase_plan = _phase_plan(x, w, conv_attrs, pool_attrs)
    assert phase_plan is not None and phase_plan.channels_last == (layout == "channels-last")
    got = _fused(x, w, b, conv_attrs, pool_attrs)
    want = _unfused(x, w, b, conv_attrs, pool_attrs)
    assert got.shape == want.shape and got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, w_shape, conv_attrs, pool_attrs", NEAR_MISSES)
def test_near_misses_keep_the_convolution_and_pool(x_shape, w_shape, conv_attrs, pool_attrs) -> None:
    x, w, b = _inputs(x_shape, w_shape)
    assert _phase_plan(x, w, conv_attrs, pool_attrs) is None
    np.testing.assert_allclose(_fused(x, w, b, conv_attrs, pool_attrs), _unfused(x, w, b, conv_attrs, pool_attrs),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation, params", [("", []), ("Clip", [-0.5, 0.5]), ("LeakyRelu", [0.1]), ("Tanh", [])])
@pytest.mark.parametrize("with_bias", [True, False])
def test_bias_and_monotone_activations_run_on_the_pooled_output(activation, params, with_bias) -> None:
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[2]
    x, w, b = _inputs(x_shape, w_shape)
    b = b if with_bias else None
    assert _phase_plan(x, w, conv_attrs, pool_attrs) is not None
    want = _unfused(x, w, b, conv_attrs, pool_attrs, activation, params)
    got = _fused(x, w, b, conv_attrs, pool_attrs, activation, params)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [0, 2], ids=["planar", "channels-last"])
def test_batch_in_chunks_matches_the_whole_batch(case, monkeypatch) -> None:
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[case]
    x, w, b = _inputs(x_shape, w_shape)
    want = _fused(x, w, b, conv_attrs, pool_attrs)
    monkeypatch.setattr(sliding_windows, "COLUMN_CHUNK_BYTES", 1)  # one image a chunk
    np.testing.assert_allclose(_fused(x, w, b, conv_attrs, pool_attrs), want, rtol=1e-5, atol=1e-5)


def test_few_rows_take_the_transposed_product() -> None:
    x_shape, w_shape, conv_attrs, pool_attrs = (2, 6, 10, 10), (2, 6, 5, 5), {}, {"kernel_shape": [2, 2], "strides": [2, 2]}
    x, w, b = _inputs(x_shape, w_shape)
    w = _read_only(w)
    phase_plan = _phase_plan(x, w, conv_attrs, pool_attrs)
    assert phase_plan is not None and phase_plan.channels_last and np.prod(phase_plan.pooled) < 64
    np.testing.assert_allclose(_fused(x, w, b, conv_attrs, pool_attrs), _unfused(x, w, b, conv_attrs, pool_attrs),
                               rtol=1e-5, atol=1e-5)


def test_stacked_filters_are_kept_only_for_weights_nothing_can_write() -> None:
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[0]
    x, w, b = _inputs(x_shape, w_shape)
    index = _phase_plan(x, w, conv_attrs, pool_attrs).index
    kept = _read_only(w)
    assert pool_phases.stacked_weights(kept, np, index) is pool_phases.stacked_weights(kept, np, index)
    other = _read_only(-w)  # same shape, other values: its own stacked filters
    np.testing.assert_array_equal(pool_phases.stacked_weights(other, np, index),
                                  -pool_phases.stacked_weights(kept, np, index))
    first = _fused(x, w, b, conv_attrs, pool_attrs)
    w *= 2  # a writable array may change between calls
    np.testing.assert_allclose(_fused(x, w, b, conv_attrs, pool_attrs), _unfused(x, w, b, conv_attrs, pool_attrs),
                               rtol=1e-5, atol=1e-5)
    assert not np.allclose(first, _fused(x, w, b, conv_attrs, pool_attrs))
    owner = w.copy()
    owner.flags.writeable = False  # an array owning its memory can be made writable again
    assert not pool_phases.unwritable(owner) and pool_phases.unwritable(kept)
    view = owner[:]
    assert not pool_phases.unwritable(view)


def test_kept_filters_go_with_their_weights() -> None:
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[2]
    x, w, _ = _inputs(x_shape, w_shape)
    kept = _read_only(w)
    pool_phases.stacked_weights(kept, np, _phase_plan(x, kept, conv_attrs, pool_attrs).index)
    kept_before = pool_phases.kept_count()
    del kept
    assert pool_phases.kept_count() == kept_before - 1


def test_kept_filters_are_bounded_oldest_first(monkeypatch) -> None:
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[0]
    x, w, _ = _inputs(x_shape, w_shape)
    index = _phase_plan(x, w, conv_attrs, pool_attrs).index
    monkeypatch.setattr(pool_phases, "MAX_KEPT_ELEMENTS", index.size * 2)
    monkeypatch.setattr(pool_phases, "_kept", {})
    first, second, third = (_read_only(w * scale) for scale in (1, 2, 3))
    for weights in (first, second):
        pool_phases.stacked_weights(weights, np, index)
    assert pool_phases.kept_count() == 2
    kept_first = pool_phases.stacked_weights(first, np, index)
    pool_phases.stacked_weights(third, np, index)  # the first in, first out
    assert pool_phases.kept_count() == 2 and pool_phases.stacked_weights(first, np, index) is not kept_first


@pytest.mark.parametrize("layout, batch", [("channels-last", 101), ("planar", 102)])
def test_each_layout_on_every_case(layout, batch, monkeypatch) -> None:
    """Either layout forced on every case, so a wrong step in one cannot hide behind the choice
    (at a batch no other test runs: plans are kept per shape, these under the forced choice)."""
    monkeypatch.setattr(pool_phases, "CHANNELS_LAST_MIN_RUN", 0 if layout == "channels-last" else 1 << 30)
    for x_shape, w_shape, conv_attrs, pool_attrs, _ in APPLIES:
        x, w, b = _inputs((batch,) + x_shape[1:], w_shape, np.float64)
        phase_plan = _phase_plan(x, w, conv_attrs, pool_attrs)
        assert phase_plan is not None and phase_plan.channels_last == (layout == "channels-last")
        np.testing.assert_allclose(_fused(x, w, b, conv_attrs, pool_attrs), _unfused(x, w, b, conv_attrs, pool_attrs),
                                   rtol=1e-10, atol=1e-10, err_msg=f"{x_shape} {w_shape} {conv_attrs} {pool_attrs}")


@pytest.mark.parametrize("batch", [16, 1])
def test_lenet_as_converted_matches_the_plain_import(batch) -> None:
    """The hand-built LeNet as ``flowstack convert`` writes it (loaded from bytes: read-only weights,
    whose stacked filters are kept) against its plain import, over two runs."""
    model = lenet()
    optimized = load(flow_writer.to_bytes(optimize(import_onnx(model))[0]))
    assert sum(step.op_type == "FusedConvMaxPool" for step in optimized.plan.steps) == 2
    plain = load(onnx_to_flow_bytes(model))
    x = {"x": np.random.default_rng(3).standard_normal((batch, 1, 28, 28)).astype(np.float32)}
    (name,) = plain.run(x)
    for _ in range(2):
        np.testing.assert_allclose(optimized.run(x)[name], plain.run(x)[name], rtol=1e-4, atol=1e-4)


def test_kept_filters_stay_whole_under_threads(monkeypatch) -> None:
    """Threads stacking their own read-only weights at once, the weights dropped as they go, with
    room for few: every call gets its own weights' filters and nothing raises."""
    x_shape, w_shape, conv_attrs, pool_attrs, _ = APPLIES[0]
    x, w, _ = _inputs(x_shape, w_shape)
    index = _phase_plan(x, w, conv_attrs, pool_attrs).index
    monkeypatch.setattr(pool_phases, "MAX_KEPT_ELEMENTS", index.size * 3)
    want = pool_phases.stacked_weights(w, np, index)
    errors = []

    def stack(seed: int) -> None:
        try:
            for i in range(200):
                scale = float(seed * 1000 + i + 1)
                weights = _read_only(w * np.float32(scale))
                got = pool_phases.stacked_weights(weights, np, index)
                np.testing.assert_allclose(got, want * np.float32(scale), rtol=1e-6)
                del weights
        except Exception as exc:  # reported below, with the thread's seed
            errors.append((seed, exc))

    threads = [threading.Thread(target=stack, args=(seed,)) for seed in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between nearly any two bytecodes
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads) and not errors, errors
    assert pool_phases.kept_count() <= 3
