"""``tf.TensorArray`` as TF1 scripts use it: collecting a custom RNN's outputs in a ``while_loop``,
differentiated end to end, growing with ``dynamic_size``, and refusing what TensorFlow refuses."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

T, B, D, H = 5, 3, 4, 6


def rnn_graph(unrolled: bool):
    rng = np.random.default_rng(0)
    x = tf.placeholder(tf.float32, [B, T, D], name="x")
    w = tf.Variable(rng.standard_normal((D, H)).astype(np.float32) * 0.5, name="w")
    u = tf.Variable(rng.standard_normal((H, H)).astype(np.float32) * 0.5, name="u")
    h0 = tf.zeros([B, H])
    if unrolled:
        h, outs = h0, []
        for t in range(T):
            h = tf.tanh(tf.matmul(x[:, t, :], w) + tf.matmul(h, u))
            outs.append(h)
        outputs = tf.stack(outs, axis=1)
    else:
        inputs_ta = tf.TensorArray(tf.float32, size=T).unstack(tf.transpose(x, [1, 0, 2]))
        outputs_ta = tf.TensorArray(tf.float32, size=T)

        def body(t, h, out_ta):
            h = tf.tanh(tf.matmul(inputs_ta.read(t), w) + tf.matmul(h, u))
            return t + 1, h, out_ta.write(t, h)

        _, h, outputs_ta = tf.while_loop(lambda t, h, out_ta: t < T, body, [tf.constant(0), h0, outputs_ta])
        outputs = tf.transpose(outputs_ta.stack(), [1, 0, 2])
    loss = tf.reduce_sum(outputs * outputs) + tf.reduce_sum(h)
    grads = tf.gradients(loss, [w, u, x])
    return x, outputs, grads


def run_graph(unrolled: bool, xs):
    tf.reset_default_graph()
    x, outputs, grads = rnn_graph(unrolled)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run([outputs] + grads, {x: xs})


def test_an_rnn_collecting_outputs_in_a_tensor_array_matches_the_unrolled_one_with_gradients():
    xs = np.random.default_rng(1).standard_normal((B, T, D)).astype(np.float32)
    looped, unrolled = run_graph(False, xs), run_graph(True, xs)
    for a, b in zip(looped, unrolled):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_dynamic_size_grows_until_the_loop_stops():
    n = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    _, ta = tf.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, tf.cast(i, tf.float32) * [1.0, -1.0])),
                          [tf.constant(0), ta])
    stacked, size, last, both = ta.stack(), ta.size(), ta.read(n - 1), ta.gather([0, 2])
    with tf.Session() as sess:
        s, k, r, g = sess.run([stacked, size, last, both], {n: 4})
    np.testing.assert_array_equal(s, [[0, 0], [1, -1], [2, -2], [3, -3]])
    assert k == 4 and list(r) == [3.0, -3.0] and g.tolist() == [[0, 0], [2, -2]]
    assert ta.element_shape.as_list() == [2]


def test_scatter_concat_size_and_an_array_never_written():
    ta = tf.TensorArray(tf.float32, size=3, element_shape=tf.TensorShape([2]))
    ta = ta.scatter([2, 0], tf.constant([[5.0, 6.0], [1.0, 2.0]]))
    empty = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[2])
    with tf.Session() as sess:
        stacked, joined, size, nothing, nothing_size = sess.run([ta.stack(), ta.concat(), ta.size(), empty.stack(),
                                                                 empty.size()])
    np.testing.assert_array_equal(stacked, [[1, 2], [0, 0], [5, 6]])
    np.testing.assert_array_equal(joined, [1, 2, 0, 0, 5, 6])
    assert size == 3 and nothing.shape == (0, 2) and nothing_size == 0


def test_misuse_is_named():
    ta = tf.TensorArray(tf.float32, size=2)
    with pytest.raises(TypeError, match="holds float32"):
        ta.write(0, tf.constant([1, 2]))
    ta = ta.write(0, tf.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"has shape \(3,\), but the array holds elements of shape \(2,\)"):
        ta.write(1, tf.constant([1.0, 2.0, 3.0]))
    too_far = ta.write(tf.constant(5), tf.constant([1.0, 2.0]))
    with tf.Session() as sess, pytest.raises(Exception, match="TensorArray of size 2: index 5 is out of range"):
        sess.run(too_far.stack())
    with pytest.raises(ValueError, match="give size=, or dynamic_size=True"):
        tf.TensorArray(tf.float32)
    with pytest.raises(NotImplementedError, match="split"):
        ta.split(tf.constant([1.0, 2.0, 3.0]), [1, 2])
    with pytest.raises(tf.GraphError, match="loop variable 1 is a TensorArray, but the body returns Tensor"):
        tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a.stack()), [tf.constant(0), ta])


def test_a_loop_over_tensor_arrays_freezes_and_runs_on_the_edge(tmp_path):
    import edge_runtime
    from exporter.freeze import export_trained

    x, outputs, _ = rnn_graph(unrolled=False)
    xs = np.random.default_rng(2).standard_normal((B, T, D)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(outputs, {x: xs})
        export_trained(sess, str(tmp_path / "rnn.flow"), {"x": x}, {"outputs": outputs})
    got = edge_runtime.load(str(tmp_path / "rnn.flow")).run({"x": xs})["outputs"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
