"""Control-flow gradients (cond and while_loop, nested either way) against central differences,
on the fused-loop and the dataflow-frame executors.

The named tests each pin one fixed bug; the parametrized sweeps check the surrounding behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import trainer as T
from tests.trainer.gradient_check import central_difference, check_graph_gradient


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
    check_graph_gradient(build, x_value, fuse)


def test_loop_gradient_sums_tensor_used_as_initial_value_and_inside_body(fuse):
    # a_0 = x, a_{k+1} = a_k * x + x^2: x reaches the loop twice; one path's gradient was dropped.
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        a = _loop(_steps(3), lambda i, a: (i + 1, a * x + T.square(x)), [T.constant(0), x])[1]
        (dx,) = T.gradients(a, [x])
    s = T.Session(g, fuse_loops=fuse)
    want = central_difference(lambda v: float(s.run(a, {x: v})), 0.7)
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
