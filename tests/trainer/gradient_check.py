"""The gradient harness: analytic gradients checked against central finite differences."""

from __future__ import annotations

import numpy as np

import trainer as T

# Weights the outputs are summed with, so a gradient routed to the wrong positions cannot pass.
WEIGHTS = np.random.default_rng(0)


def check_op_gradient(name, domain, inputs, attrs, diff, num_outputs=None, rtol=2e-4, atol=2e-6, all_outputs=False):
    """One op's gradient for the inputs at positions ``diff`` (float64 placeholders; the rest are
    constants) against central differences of a weighted sum of its outputs."""
    g = T.Graph()
    with g.as_default():
        phs = []
        for i, v in enumerate(inputs):
            if i in diff:
                phs.append(T.placeholder(np.float64, np.shape(v), name=f"in{i}"))
            else:
                phs.append(None if v is None else T.constant(v))
        node = T.make_op(name, phs, attrs, domain=domain, num_outputs=num_outputs)
        outs = [o for o in node.outputs if o.dtype is not None and o.dtype.kind == "f"][: None if all_outputs else 1]
        # A weight per element (where the output's shape is known), so that a gradient routed to
        # the wrong positions (a permutation mixed up) cannot pass as it would under one weight.
        weights = [T.constant(WEIGHTS.uniform(0.5, 1.5, size=() if o.shape is None or None in o.shape else o.shape))
                   for o in outs]
        loss = T.add_n([T.reduce_sum(o * w) for o, w in zip(outs, weights)])
        grads = T.gradients(loss, [phs[i] for i in diff])
    sess = T.Session(g)
    feed = {phs[i]: np.asarray(inputs[i], np.float64) for i in diff}
    analytic = sess.run([gr if not isinstance(gr, T.IndexedSlices) else gr.to_dense() for gr in grads], feed) \
        if not any(isinstance(gr, T.IndexedSlices) for gr in grads) else None
    if analytic is None:
        with g.as_default():
            dense = [gr.to_dense() if isinstance(gr, T.IndexedSlices) else gr for gr in grads]
        analytic = sess.run(dense, feed)
    for k, i in enumerate(diff):
        x = np.array(inputs[i], np.float64)
        num = np.zeros_like(x)
        eps = 1e-6
        flat = x.reshape(-1)
        for j in range(flat.size):
            old = flat[j]
            flat[j] = old + eps
            up = sess.run(loss, {**feed, phs[i]: x})
            flat[j] = old - eps
            down = sess.run(loss, {**feed, phs[i]: x})
            flat[j] = old
            num.reshape(-1)[j] = (up - down) / (2 * eps)
        np.testing.assert_allclose(analytic[k], num, rtol=rtol, atol=atol * max(1.0, np.abs(num).max()) * 100,
                                   err_msg=f"{name}: gradient for input {i}")


def central_difference(f, x, eps=1e-6):
    """d(f)/dx by central differences, one element of ``x`` at a time."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        grad[i] = (f(hi) - f(lo)) / (2 * eps)
    return grad


def check_graph_gradient(build, x_value, fuse):
    """d(sum of build(x))/dx against central differences, on a Session with or without fused loops."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, np.shape(x_value), name="x")
        y = build(x)
        (dx,) = T.gradients(y, [x])
    s = T.Session(g, fuse_loops=fuse)
    got = s.run(dx, {x: x_value})
    want = central_difference(lambda v: float(np.sum(s.run(y, {x: v}))), x_value)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
