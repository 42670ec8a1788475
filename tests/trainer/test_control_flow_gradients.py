"""Robustness variants: control-flow gradients against central differences, checkpoint files that
are corrupt, stale or moved, and queue semantics as TensorFlow 1.x defines them.

The named tests each pin one fixed bug; the parametrized sweeps check the surrounding behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import trainer as T
from trainer.saver import CheckpointError

# -- control flow ---------------------------------------------------------------------------------


def _central_difference(f, x, eps=1e-6):
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        grad[i] = (f(hi) - f(lo)) / (2 * eps)
    return grad


def _check_gradient(build, x_value, fuse):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, np.shape(x_value), name="x")
        y = build(x)
        (dx,) = T.gradients(y, [x])
    s = T.Session(g, fuse_loops=fuse)
    got = s.run(dx, {x: x_value})
    want = _central_difference(lambda v: float(np.sum(s.run(y, {x: v}))), x_value)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.fixture(params=[True, False], ids=["fused_loops", "dataflow_frames"])
def fuse(request):
    return request.param


def _loop(cond, body, init):
    return T.while_loop(cond, body, init)


def _steps(n):
    return lambda i, *rest: i < n


def _shapes(x):
    m = T.reshape(x, (2, 2))
    _, a, s = _loop(_steps(3), lambda i, a, s: (i + 1, T.matmul(a, m), s + T.reduce_sum(a)),
                    [T.constant(0), T.constant(np.eye(2)), T.constant(np.float64(0))])
    return T.reduce_sum(a) + s * 2.0


def _cond_in_while(x):
    def body(i, a):
        return i + 1, T.cond(T.less(i, 2), lambda: a * x, lambda: a + x)

    return _loop(_steps(4), body, [T.constant(0), T.ones_like(x)])[1]


def _cond_in_data_dependent_while(x):
    def body(a, s):
        return a * 1.5, T.cond(T.less(a, 2.0), lambda: s + a * x, lambda: s * x)

    return T.while_loop(lambda a, s: a < 5.0, body, [x, T.constant(np.float64(0.0))])[1]


def _while_in_cond(x):
    def power():
        return _loop(_steps(3), lambda i, a: (i + 1, a * x), [T.constant(0), T.ones_like(x)])[1]

    return T.cond(T.less(x, 5.0), power, lambda: x)


def _two_loops_in_sequence(x):
    first = _loop(_steps(2), lambda i, a: (i + 1, a + x * a), [T.constant(0), x])[1]
    return _loop(_steps(2), lambda i, a: (i + 1, a * x), [T.constant(0), first])[1]


GRADIENT_CASES = {
    "captured_vector": (lambda x: _loop(_steps(3), lambda i, a: (i + 1, a * x + x), [T.constant(0), T.ones_like(x)])[1],
                        np.array([0.5, 1.5])),
    "several_shapes": (_shapes, np.array([0.3, 0.2, -0.1, 0.4])),
    "data_dependent_trip_count": (lambda x: T.while_loop(lambda a: a < 10.0, lambda a: a * 2.0, [x]), np.float64(1.3)),
    "zero_iterations": (lambda x: _loop(_steps(0), lambda i, a: (i + 1, a * x), [T.constant(0), x * 3.0])[1],
                        np.float64(1.3)),
    "cond_in_while": (_cond_in_while, np.float64(1.3)),
    "cond_in_data_dependent_while": (_cond_in_data_dependent_while, np.float64(0.9)),
    "while_in_cond": (_while_in_cond, np.float64(1.3)),
    "cond_branches_share_outer_tensor": (lambda x: T.cond(T.less(x, 1.0), lambda: x * x, lambda: x * 3.0),
                                         np.float64(1.3)),
    "cond_passes_outer_tensor_through": (lambda x: T.cond(T.less(x, 5.0), lambda: x, lambda: x * 2.0), np.float64(0.7)),
    "identity_body": (lambda x: _loop(_steps(3), lambda i, a: (i + 1, a), [T.constant(0), x * x])[1], np.float64(0.7)),
    "two_loops_in_sequence": (_two_loops_in_sequence, np.float64(0.7)),
    "gather_in_loop": (lambda x: T.reduce_sum(_loop(_steps(3),
                                                    lambda i, a: (i + 1, a + T.gather(x, T.reshape(i, (1,)))),
                                                    [T.constant(0), T.constant(np.zeros(1))])[1]),
                       np.array([0.5, 1.5, 2.5, 3.5])),
    # the fixed bugs, also in the sweep
    "init_and_captured_same_tensor": (lambda x: _loop(_steps(3), lambda i, a: (i + 1, a * x + T.square(x)),
                                                      [T.constant(0), x])[1], np.float64(0.7)),
    "body_returns_outer_tensor": (lambda x: _loop(_steps(3), lambda i, a, b: (i + 1, x, b * a),
                                                  [T.constant(0), x * 2.0, T.ones_like(x)])[2], np.float64(0.7)),
    "body_op_reads_only_outer_tensor": (lambda x: _loop(_steps(3), lambda i, a: (i + 1, T.square(x)),
                                                        [T.constant(0), x])[1] * x, np.float64(0.7)),
}


# Without their fix these never terminate on the dataflow executor; that executor runs them in a
# child process (test_body_returning_outer_tensor_on_dataflow_executor) so a regression fails, not hangs.
_FUSED_ONLY = {"body_returns_outer_tensor", "body_op_reads_only_outer_tensor"}


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_control_flow_gradient_matches_central_differences(case, fuse):
    if case in _FUSED_ONLY and not fuse:
        pytest.skip("run on the dataflow executor in a child process")
    build, x_value = GRADIENT_CASES[case]
    _check_gradient(build, x_value, fuse)


def test_loop_gradient_sums_tensor_used_as_initial_value_and_inside_body(fuse):
    # a_0 = x, a_{k+1} = a_k * x + x^2: x reaches the loop twice; one path's gradient was dropped.
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        a = _loop(_steps(3), lambda i, a: (i + 1, a * x + T.square(x)), [T.constant(0), x])[1]
        (dx,) = T.gradients(a, [x])
    s = T.Session(g, fuse_loops=fuse)
    want = _central_difference(lambda v: float(s.run(a, {x: v})), 0.7)
    np.testing.assert_allclose(s.run(dx, {x: 0.7}), want, rtol=1e-7)


def test_loop_gradient_sums_tensor_used_as_two_initial_values(fuse):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        _, a, _ = _loop(_steps(2), lambda i, a, b: (i + 1, a * b, b + a), [T.constant(0), x, x])
        (dx,) = T.gradients(a, [x])
    s = T.Session(g, fuse_loops=fuse)
    # a_2 = x^2 (2x) = 2x^3
    np.testing.assert_allclose(s.run(dx, {x: 0.7}), 6 * 0.7**2)


_OUTER_ONLY_SCRIPT = textwrap.dedent("""
    import numpy as np, trainer as T
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        i, a, b = T.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, x, b * a),
                               [T.constant(0), x * 2.0, T.ones_like(x)])
        c = T.while_loop(lambda i, c: i < 2, lambda i, c: (i + 1, T.square(x)), [T.constant(0), x])[1]
        db, dc = T.gradients([b, c * x], [x])[0], T.gradients(c * x, [x])[0]
    values = T.Session(g, fuse_loops=False).run([i, a, b, c, db, dc], {x: 0.7})
    print(" ".join(repr(float(v)) for v in values))
""")


def test_body_returning_outer_tensor_on_dataflow_executor():
    # A body output fed only by loop-invariant values ran in the exit iteration too and fed
    # NextIteration forever. Run in a child process, bounded, so a regression fails, not hangs.
    proc = subprocess.run([sys.executable, "-c", _OUTER_ONLY_SCRIPT], capture_output=True, text=True, check=False,
                          timeout=20, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    values = [float(v) for v in proc.stdout.split()]
    # b = 2 x^3, c = x^2: d(b + c x)/dx = 6 x^2 + 3 x^2, d(c x)/dx = 3 x^2
    np.testing.assert_allclose(values, [3, 0.7, 2 * 0.7**3, 0.49, 9 * 0.49, 3 * 0.49])


def test_body_returning_outer_tensor_gradient():
    fuse = True  # the dataflow executor: see the child-process test above
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        _, a, b = _loop(_steps(3), lambda i, a, b: (i + 1, x, b * a), [T.constant(0), x * 2.0, T.ones_like(x)])
        (dx,) = T.gradients(b, [x])
    s = T.Session(g, fuse_loops=fuse)
    assert s.run([a, b], {x: 0.7}) == pytest.approx([0.7, 2 * 0.7**3])
    np.testing.assert_allclose(s.run(dx, {x: 0.7}), 6 * 0.7**2)  # b = 2 x^3


def test_stop_gradient_inside_loop_blocks_that_path(fuse):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        a = _loop(_steps(3), lambda i, a: (i + 1, a * T.stop_gradient(x) + x), [T.constant(0), T.ones_like(x)])[1]
        (dx,) = T.gradients(a, [x])
    c = 1.3  # a_3 = c^3 + (c^2 + c + 1) x with c held constant
    assert T.Session(g, fuse_loops=fuse).run(dx, {x: c}) == pytest.approx(c * c + c + 1)


def test_gradients_of_several_loop_outputs_and_variable_read_in_loop(fuse):
    g = T.Graph()
    with g.as_default():
        w = T.Variable(np.float64(0.8), name="w")
        z = T.placeholder(np.float64, (), name="z")
        one, zero = T.constant(1.0, np.float64), T.constant(0.0, np.float64)
        _, a, b = _loop(_steps(3), lambda i, a, b: (i + 1, a * w, b + a * z), [T.constant(0), one, zero])
        gw, gz = T.gradients([a, b], [w, z], grad_ys=[T.constant(np.float64(2.0)), T.constant(np.float64(3.0))])
        init = T.global_variables_initializer()
    assert w.dtype == np.float64
    s = T.Session(g, fuse_loops=fuse)
    s.run(init)
    # a = w^3, b = z (1 + w + w^2)
    want = [2 * 3 * 0.8**2 + 3 * 1.3 * (1 + 2 * 0.8), 3 * (1 + 0.8 + 0.64)]
    np.testing.assert_allclose(s.run([gw, gz], {z: 1.3}), want)


def test_loop_forward_matches_python_reference(fuse):
    g = T.Graph()
    with g.as_default():
        n = T.placeholder(np.int64, (), name="n")

        def body(k, steps):
            odd = T.equal(T.make_op("Mod", [k, np.int64(2)]).outputs[0], np.int64(1))
            half = T.make_op("Div", [k, np.int64(2)]).outputs[0]
            return T.cond(odd, lambda: k * np.int64(3) + np.int64(1), lambda: half), steps + np.int64(1)

        _, steps = T.while_loop(lambda k, s: T.greater(k, np.int64(1)), body, [n, T.constant(np.int64(0))])
    s = T.Session(g, fuse_loops=fuse)

    def collatz(k):
        c = 0
        while k > 1:
            k = 3 * k + 1 if k % 2 else k // 2
            c += 1
        return c

    for start in (1, 6, 7, 27):
        assert s.run(steps, {n: np.int64(start)}) == collatz(start)


def test_gradient_of_nested_loops_is_a_clear_error():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")

        def body(i, a):
            return i + 1, _loop(_steps(2), lambda j, b: (j + 1, b * x), [T.constant(0), a])[1]

        a = _loop(_steps(2), body, [T.constant(0), T.ones_like(x)])[1]
        with pytest.raises(NotImplementedError, match="nested"):
            T.gradients(a, [x])
    assert T.Session(g).run(a, {x: 1.5}) == pytest.approx(1.5**4)


def test_python_float64_scalar_keeps_its_dtype_in_variable():
    # np.float64 subclasses float; Variable treated it as a Python float and made float32.
    with T.Graph().as_default():
        assert T.Variable(np.float64(0.8)).dtype == np.float64
        assert T.Variable(0.8).dtype == np.float32
        assert T.constant(np.float64(0.8)).dtype == T.Variable(np.float64(0.8)).dtype


# -- checkpoints ----------------------------------------------------------------------------------
_VALUES = {
    "i64": np.arange(6, dtype=np.int64).reshape(2, 3) - 3,
    "flags": np.array([True, False, True]),
    "half": np.array([1.5, -2.0, 65504.0], np.float16),
    "scope/scalar": np.float64(3.25),
    "empty": np.zeros((0, 3), np.float32),
    "i32": np.array([2**31 - 1, -(2**31)], np.int32),
}


def _model(values=_VALUES, max_to_keep=5):
    g = T.Graph()
    with g.as_default():
        vs = {name: T.Variable(np.asarray(v), name=name) for name, v in values.items()}
        init = T.global_variables_initializer()
        saver = T.Saver(max_to_keep=max_to_keep)
    s = T.Session(g)
    s.run(init)
    return s, vs, saver


def test_checkpoint_round_trip_is_exact_for_every_dtype(tmp_path):
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    zeros = {k: np.zeros_like(np.asarray(v)) for k, v in _VALUES.items()}
    s2, vs2, saver2 = _model(zeros)
    saver2.restore(s2, path)
    for name, want in _VALUES.items():
        got = s2.run(vs2[name].tensor)
        assert got.dtype == np.asarray(want).dtype and got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cut", ["empty", "header", "half", "tail"])
def test_truncated_checkpoint_is_a_checkpoint_error_naming_the_file(tmp_path, cut):
    s, _, saver = _model()
    data = Path(saver.save(s, str(tmp_path / "m"))).read_bytes()
    n = {"empty": 0, "header": 10, "half": len(data) // 2, "tail": len(data) - 5}[cut]
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(data[:n])
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        saver.restore(s, str(bad))


@pytest.mark.parametrize("content", ["flipped", "npy", "text"])
def test_corrupt_checkpoint_is_a_checkpoint_error(tmp_path, content):
    s, _, saver = _model()
    bad = tmp_path / "bad.ckpt"
    if content == "flipped":
        data = bytearray(Path(saver.save(s, str(tmp_path / "m"))).read_bytes())
        data[len(data) // 3: len(data) // 3 + 16] = b"\xff" * 16
        bad.write_bytes(bytes(data))
    elif content == "npy":
        with open(bad, "wb") as f:
            np.save(f, np.arange(3))
    else:
        bad.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.ckpt"):
        saver.restore(s, str(bad))


def test_mismatched_checkpoint_names_the_variable(tmp_path):
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"))
    other = dict(_VALUES, i64=np.zeros((3, 2), np.int64), extra=np.float32(1))
    s2, vs2, saver2 = _model(other)
    with pytest.raises(CheckpointError) as err:
        saver2.restore(s2, path)
    assert "'i64'" in str(err.value) and "(3, 2)" in str(err.value) and "'extra' is missing" in str(err.value)
    assert s2.run(vs2["flags"].tensor).tolist() == [True, False, True]  # nothing was half-restored


def test_restore_never_unpickles(tmp_path, monkeypatch):
    import pickle

    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"))

    def refuse(*a, **k):
        raise AssertionError("pickle used while loading a checkpoint")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    saver.restore(s, path)
    assert T.latest_checkpoint(str(tmp_path)) == path


@pytest.mark.parametrize("index", ["garbage{", "[1, 2]", "null", '""', '{"all_model_checkpoint_paths": [3, null]}'])
def test_malformed_checkpoint_index_is_ignored(tmp_path, index):
    (tmp_path / "checkpoint").write_text(index)
    assert T.latest_checkpoint(str(tmp_path)) is None
    s, _, saver = _model()
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    assert T.latest_checkpoint(str(tmp_path)) == path


def test_rotation_never_deletes_files_a_corrupt_index_spells_out(tmp_path, monkeypatch):
    # A string where the path list belongs was iterated letter by letter, and rotation deleted
    # files named "a" and "b" in the current directory.
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for name in ("a", "b"):
        (cwd / name).write_text("precious")
    ckdir = tmp_path / "ck"
    ckdir.mkdir()
    (ckdir / "checkpoint").write_text('{"all_model_checkpoint_paths": "ab"}')
    s, _, saver = _model(max_to_keep=1)
    saver.save(s, str(ckdir / "m"), global_step=1)
    assert (cwd / "a").exists() and (cwd / "b").exists()


def test_latest_checkpoint_after_directory_is_moved(tmp_path):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "run" / "m"), global_step=1)
    path = saver.save(s, str(tmp_path / "run" / "m"), global_step=2)
    os.rename(tmp_path / "run", tmp_path / "moved")
    latest = T.latest_checkpoint(str(tmp_path / "moved"))
    assert latest == str(tmp_path / "moved" / os.path.basename(path))
    saver.restore(s, latest)


def test_latest_checkpoint_resolves_relative_entries_against_the_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s, _, saver = _model()
    saver.save(s, os.path.join("ck", "m"), global_step=7)  # the index records a cwd-relative path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # a fresh process started somewhere else
    assert T.latest_checkpoint(str(tmp_path / "ck")) == str(tmp_path / "ck" / "m-7.ckpt")
    (tmp_path / "ck" / "checkpoint").write_text('{"model_checkpoint_path": "m-7.ckpt"}')  # TF-style, relative
    assert T.latest_checkpoint(str(tmp_path / "ck")) == str(tmp_path / "ck" / "m-7.ckpt")


def test_max_to_keep_rotation_and_stale_entries(tmp_path):
    s, _, saver = _model(max_to_keep=2)
    paths = [saver.save(s, str(tmp_path / "m"), global_step=i) for i in range(4)]
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == ["m-2.ckpt", "m-3.ckpt"]
    os.unlink(paths[-1])  # the newest vanished: fall back to the newest that exists
    assert T.latest_checkpoint(str(tmp_path)) == paths[-2]


def test_restore_in_fresh_process(tmp_path):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "m"), global_step=3)
    script = textwrap.dedent(f"""
        import numpy as np, trainer as T
        g = T.Graph()
        with g.as_default():
            v = T.Variable(np.zeros((2, 3), np.int64), name="i64")
            saver = T.Saver([v])
        s = T.Session(g)
        saver.restore(s, T.latest_checkpoint({str(tmp_path)!r}))
        print(s.run(v.tensor).sum())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(int(_VALUES["i64"].sum()))


# -- queues ---------------------------------------------------------------------------------------
def _queue_graph(capacity=4, shapes=((2,), ())):
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(capacity, [np.float32, np.int64], shapes=list(shapes))
        xs = T.placeholder(np.float32, None, name="xs")
        ys = T.placeholder(np.int64, None, name="ys")
        ops = {"enq": q.enqueue([xs, ys]), "enq_many": q.enqueue_many([xs, ys]), "deq": q.dequeue(),
               "deq3": q.dequeue_many(3), "deq0": q.dequeue_many(0), "close": q.close(),
               "cancel": q.close(cancel_pending_enqueues=True), "size": q.size()}
    return T.Session(g), xs, ys, ops


def test_enqueue_of_wrong_shape_is_rejected_before_it_enters_the_queue():
    s, xs, ys, ops = _queue_graph()
    with pytest.raises(Exception, match=r"component 0: expected shape \(2,\), got \(3,\)"):
        s.run(ops["enq"], {xs: np.zeros(3, np.float32), ys: 1})
    with pytest.raises(Exception, match="same leading"):
        s.run(ops["enq_many"], {xs: np.zeros((2, 2), np.float32), ys: np.zeros(3, np.int64)})
    assert s.run(ops["size"]) == 0
    s.run(ops["enq_many"], {xs: np.ones((3, 2), np.float32), ys: np.arange(3)})
    out_x, out_y = s.run(ops["deq3"])
    assert out_x.shape == (3, 2) and out_y.tolist() == [0, 1, 2]


def test_dequeue_many_zero_gives_an_empty_batch():
    s, _, _, ops = _queue_graph()
    out_x, out_y = s.run(ops["deq0"])
    assert out_x.shape == (0, 2) and out_x.dtype == np.float32 and out_y.shape == (0,) and out_y.dtype == np.int64


def test_dequeue_many_on_closed_queue_with_fewer_elements_is_out_of_range():
    s, xs, ys, ops = _queue_graph()
    s.run(ops["enq_many"], {xs: np.ones((2, 2), np.float32), ys: np.arange(2)})
    s.run(ops["close"])
    with pytest.raises(T.OutOfRangeError, match="needed 3"):
        s.run(ops["deq3"])
    assert [int(s.run(ops["deq"])[1]) for _ in range(2)] == [0, 1]  # nothing was lost
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])
    with pytest.raises(Exception, match="closed"):
        s.run(ops["enq"], {xs: np.zeros(2, np.float32), ys: 5})


def _blocked_enqueue(s, ops, xs, ys):
    s.run(ops["enq"], {xs: np.zeros(2, np.float32), ys: 0})  # fills the capacity-1 queue
    errors = []

    def producer():
        try:
            s.run(ops["enq"], {xs: np.ones(2, np.float32), ys: 1})
        except Exception as e:  # noqa: BLE001 - inspected by the test
            errors.append(e)

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    (queue,) = s.state.resources.values()
    deadline = time.monotonic() + 5
    while not queue.waiting_puts and time.monotonic() < deadline:  # until the producer waits for room
        time.sleep(0.01)
    assert queue.waiting_puts == 1
    return t, errors


def test_close_lets_pending_enqueues_finish():
    s, xs, ys, ops = _queue_graph(capacity=1)
    t, errors = _blocked_enqueue(s, ops, xs, ys)
    s.run(ops["close"])
    assert [int(s.run(ops["deq"])[1]) for _ in range(2)] == [0, 1]
    t.join(5)
    assert not t.is_alive() and not errors
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])


def test_close_with_cancel_pending_enqueues_cancels_them():
    s, xs, ys, ops = _queue_graph(capacity=1)
    t, errors = _blocked_enqueue(s, ops, xs, ys)
    s.run(ops["cancel"])
    t.join(5)
    assert not t.is_alive() and len(errors) == 1 and "cancel" in str(errors[0])
    assert int(s.run(ops["deq"])[1]) == 0
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])


def test_coordinator_join_wakes_runner_blocked_on_a_full_queue():
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(2, [np.float32], shapes=[()])
        runner = T.QueueRunner(q, [q.enqueue([T.constant(np.float32(1))])])
    s = T.Session(g)
    coord = T.Coordinator()
    threads = runner.create_threads(s, coord)
    time.sleep(0.2)
    start = time.monotonic()
    coord.join(5)
    assert time.monotonic() - start < 3 and not any(t.is_alive() for t in threads)


def test_coordinator_treats_out_of_range_as_a_clean_stop():
    coord = T.Coordinator()
    coord.request_stop(T.OutOfRangeError("input exhausted"))
    assert coord.should_stop()
    coord.join(1)  # no exception: running out of input is how an epoch ends


def test_coordinator_join_reports_threads_that_do_not_stop():
    coord = T.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, args=(5,), name="stuck-reader", daemon=True)
    coord.register_thread(t)
    t.start()
    try:
        with pytest.raises(RuntimeError, match="stuck-reader"):
            coord.join(0.2)
    finally:
        release.set()
        t.join(5)


def test_queue_runner_error_stops_coordinator_and_closes_queue():
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(2, [np.float32], shapes=[()])
        p = T.placeholder(np.float32, (), name="never_fed")
        runner = T.QueueRunner(q, [q.enqueue([p])])
        deq = q.dequeue()
    s = T.Session(g)
    coord = T.Coordinator()
    runner.create_threads(s, coord)
    deadline = time.monotonic() + 5
    while not any(q.closed for q in s.state.resources.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    # checked first: on an open queue the dequeue below would block
    assert coord.should_stop() and any(q.closed for q in s.state.resources.values())
    with pytest.raises(T.OutOfRangeError):
        s.run(deq)  # the failing runner closed the queue, so the consumer is not stuck
    with pytest.raises(Exception, match="must be fed"):
        coord.join(5)


def test_random_shuffle_queue_is_a_permutation_and_drains_on_close():
    g = T.Graph()
    with g.as_default():
        q = T.RandomShuffleQueue(20, 5, [np.int64], shapes=[()], seed=3)
        vals = T.placeholder(np.int64, (None,), name="vals")
        enq, deq, close = q.enqueue_many([vals]), q.dequeue(), q.close()
    s = T.Session(g)
    s.run(enq, {vals: np.arange(10)})
    s.run(close)
    out = []
    with pytest.raises(T.OutOfRangeError):
        while True:
            out.append(int(s.run(deq)))
    assert sorted(out) == list(range(10))


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_damaged_graph_file_is_a_graph_error_naming_it(tmp_path, damage):
    s, _, saver = _model()
    saver.save(s, str(tmp_path / "m"))
    graph_file = tmp_path / "graph.npz"
    if damage == "truncated":
        graph_file.write_bytes(graph_file.read_bytes()[:100])
    else:
        graph_file.unlink()
    with pytest.raises(T.GraphError, match="graph.npz"):
        T.import_graph(str(tmp_path))
