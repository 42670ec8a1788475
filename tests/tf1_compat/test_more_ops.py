"""The second tier of TF1 names: more core ops, tf.nn convolutions and statistics, tf.losses,
initializers, contrib.rnn wrappers and checkpoint readers, each against a NumPy reference."""

from __future__ import annotations

import numpy as np

import trainer as tf


def test_core_ops_match_numpy():
    a = tf.constant(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    ops = [tf.arg_max(a, 1), tf.truncatediv(tf.constant([-7, 7]), tf.constant([2, 2])),
           tf.truncatemod(tf.constant([-7.0, 7.0]), 2.0), tf.div_no_nan(tf.constant([1.0, 2.0]), tf.constant([0.0, 4.0])),
           tf.saturate_cast(tf.constant([300.0, -5.0]), tf.uint8), tf.broadcast_to(tf.constant([1.0, 2.0]), [2, 2]),
           tf.cumprod(tf.constant([1.0, 2.0, 3.0])), tf.reverse_sequence(a, [2, 3, 4], seq_axis=1, batch_axis=0),
           tf.strided_slice(a, [0, 1], [3, 4], [2, 2]), tf.strided_slice(a, [1, 0], [2, 4], shrink_axis_mask=1),
           tf.scatter_nd([[0], [2], [0]], tf.constant([1.0, 2.0, 3.0]), [4]),
           tf.meshgrid(tf.constant([1.0, 2.0, 3.0]), tf.constant([4.0, 5.0]))[1],
           tf.unique_with_counts(tf.constant([3, 1, 3]))[2],
           tf.unsorted_segment_mean(tf.constant([[1.0], [3.0], [5.0]]), [0, 0, 1], 2),
           tf.confusion_matrix([0, 1, 1], [0, 1, 0], num_classes=2), tf.matrix_solve(tf.constant([[2.0, 0.0], [0.0, 4.0]]),
                                                                               tf.constant([[2.0], [4.0]])),
           tf.clip_by_average_norm(tf.constant([3.0, 4.0]), 1.0)]
    v = tf.Session().run(ops)
    av = np.arange(12.0).reshape(3, 4)
    assert v[0].tolist() == [3, 3, 3] and v[1].tolist() == [-3, 3] and v[2].tolist() == [-1.0, 1.0]
    assert v[3].tolist() == [0.0, 0.5] and v[4].tolist() == [255, 0] and v[5].tolist() == [[1, 2], [1, 2]]
    assert v[6].tolist() == [1, 2, 6]
    expected = av.copy()
    for row, n in enumerate([2, 3, 4]):
        expected[row, :n] = av[row, :n][::-1]
    assert v[7].tolist() == expected.tolist() and v[8].tolist() == av[0:3:2, 1:4:2].tolist()
    assert v[9].tolist() == av[1].tolist() and v[10].tolist() == [4, 0, 2, 0]
    assert v[11].tolist() == np.meshgrid([1, 2, 3], [4, 5])[1].tolist() and v[12].tolist() == [2, 1]
    assert v[13].tolist() == [[2.0], [5.0]] and v[14].tolist() == [[1, 0], [1, 1]] and v[15].tolist() == [[1], [1]]
    np.testing.assert_allclose(v[16], [1.2, 1.6], rtol=1e-6)


def test_nn_convolution_family_and_statistics_match_numpy():
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(2, 6, 6, 4)).astype(np.float32)
    dwv = rng.normal(size=(3, 3, 4, 2)).astype(np.float32)
    ctv = rng.normal(size=(3, 3, 7, 4)).astype(np.float32)
    yv = rng.normal(size=(2, 12, 12, 7)).astype(np.float32)
    x, dw, ct, y = (tf.constant(v) for v in (xv, dwv, ctv, yv))
    depthwise = tf.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], "SAME")
    transposed = tf.nn.conv2d_transpose(x, ct, [2, 12, 12, 7], [1, 2, 2, 1], "SAME")
    forward = tf.nn.conv2d(y, ct, [1, 2, 2, 1], "SAME")
    lrn = tf.nn.lrn(x, 2, 1.0, 0.5, 0.75)
    round_trip = tf.nn.depth_to_space(tf.nn.space_to_depth(x, 2), 2)
    mean, var = tf.nn.weighted_moments(x, [0, 1, 2], tf.ones_like(x))
    grads = tf.gradients(tf.reduce_sum(depthwise) + tf.reduce_sum(transposed) + tf.reduce_sum(lrn), [x])
    d, t, f, l, r, m, s, g = tf.Session().run([depthwise, transposed, forward, lrn, round_trip, mean, var, grads[0]])
    np.testing.assert_allclose(d[0, 2, 2], np.einsum("hwc,hwcm->cm", xv[0, 1:4, 1:4], dwv).reshape(-1), rtol=1e-4)
    np.testing.assert_allclose((t * yv).sum(), (xv * f).sum(), rtol=1e-4)  # conv2d_transpose is conv2d's adjoint
    sq = xv ** 2
    np.testing.assert_allclose(l[..., 1], xv[..., 1] / (1 + 0.5 * sq[..., 0:4].sum(-1)) ** 0.75, rtol=1e-4)
    np.testing.assert_array_equal(r, xv)
    np.testing.assert_allclose(m, xv.mean((0, 1, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, xv.var((0, 1, 2)), rtol=1e-5)
    assert g.shape == xv.shape and np.isfinite(g).all()
    z, logits = np.array([1.0, 0.0]), np.array([0.5, -0.3])
    wce = tf.Session().run(tf.nn.weighted_cross_entropy_with_logits(
        targets=tf.constant(z, tf.float32), logits=tf.constant(logits, tf.float32), pos_weight=2.0))
    p = 1 / (1 + np.exp(-logits))
    np.testing.assert_allclose(wce, -(2 * z * np.log(p) + (1 - z) * np.log(1 - p)), rtol=1e-5)


def test_losses_with_weights_and_reductions():
    e = tf.constant([0.5, 2.0, -3.0])
    v = tf.Session().run([tf.losses.huber_loss(tf.zeros([3]), e),
                          tf.losses.hinge_loss(tf.constant([1.0, 0.0]), tf.constant([0.5, 0.5])),
                          tf.losses.cosine_distance(tf.constant([[1.0, 0.0]]), tf.constant([[0.6, 0.8]]), axis=1),
                          tf.losses.compute_weighted_loss(e, [1.0, 0.0, 1.0]),
                          tf.losses.compute_weighted_loss(e, 2.0, reduction=tf.losses.Reduction.SUM)])
    np.testing.assert_allclose(v, [(0.125 + 1.5 + 2.5) / 3, 1.0, 0.4, -1.25, -1.0], rtol=1e-6)
    assert len(tf.losses.get_losses()) == 5


def test_initializers_and_checkpoint_reader(tmp_path):
    w = tf.get_variable("w", [2, 2], initializer=tf.initializers.identity(2.0))
    u = tf.get_variable("u", [100, 3], initializer=tf.initializers.uniform_unit_scaling())
    sess = tf.Session()
    sess.run(tf.initializers.global_variables())
    assert sess.run(w).tolist() == [[2.0, 0.0], [0.0, 2.0]] and np.abs(sess.run(u)).max() <= np.sqrt(3 / 100)
    tf.train.Saver().save(sess, str(tmp_path / "model"))
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_variable_to_shape_map() == {"w": [2, 2], "u": [100, 3]}
    np.testing.assert_array_equal(reader.get_tensor("u"), sess.run(u))


def test_contrib_rnn_wrappers_and_stacked_bidirectional_layers():
    x = tf.placeholder(tf.float32, [2, 5, 3])
    cell = tf.contrib.rnn.OutputProjectionWrapper(
        tf.contrib.rnn.InputProjectionWrapper(tf.contrib.rnn.GRUBlockCell(4), 6), 2)
    out, state = tf.nn.dynamic_rnn(tf.nn.rnn_cell.DeviceWrapper(cell, "/cpu:0"), x, dtype=tf.float32)
    stacked, _, _ = tf.contrib.rnn.stack_bidirectional_dynamic_rnn(
        [tf.contrib.rnn.LSTMBlockCell(3)], [tf.contrib.rnn.LSTMBlockCell(3)], x, dtype=tf.float32,
        sequence_length=[5, 3])
    names = [v.name for v in tf.trainable_variables()]
    assert "rnn/output_projection_wrapper/kernel:0" in names and len(names) == 12
    grads = tf.gradients(tf.reduce_sum(out) + tf.reduce_sum(stacked), tf.trainable_variables())
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    o, s, v = sess.run([out, stacked, grads], {x: np.ones((2, 5, 3), np.float32)})
    assert o.shape == (2, 5, 2) and s.shape == (2, 5, 6) and all(np.isfinite(g).all() for g in v)
    assert (s[1, 3:] == 0).all()  # the second sequence ends after 3 steps, both directions


def _five_steps(optimizer):
    w = tf.Variable(np.array([1.0, -2.0, 0.05], np.float32))
    train = optimizer.minimize(tf.reduce_sum(tf.square(w - 0.5)))
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    out = []
    for _ in range(5):
        sess.run(train)
        out.append(sess.run(w))
    tf.reset_default_graph()
    return np.array(out)


def test_adadelta_ftrl_and_proximal_gd_follow_tensorflows_update_rules():
    start, target = np.array([1.0, -2.0, 0.05]), 0.5

    def reference(step):
        w, state, out = start.copy(), {}, []
        for _ in range(5):
            w = step(w, 2 * (w - target), state)
            out.append(w)
        return np.array(out)

    def adadelta(w, g, s, lr=1.0, rho=0.95, eps=1e-6):
        s["a"] = rho * s.get("a", 0) + (1 - rho) * g * g
        u = np.sqrt(s.get("u", 0) + eps) / np.sqrt(s["a"] + eps) * g
        s["u"] = rho * s.get("u", 0) + (1 - rho) * u * u
        return w - lr * u

    def ftrl(w, g, s, lr=0.5, l1=0.01, l2=0.1):
        n = s.get("n", 0.1)
        new_n = n + g * g
        s["z"] = s.get("z", 0) + g - (np.sqrt(new_n) - np.sqrt(n)) / lr * w
        s["n"] = new_n
        return np.where(np.abs(s["z"]) > l1, (np.sign(s["z"]) * l1 - s["z"]) / (np.sqrt(new_n) / lr + 2 * l2), 0.0)

    def proximal(w, g, s, lr=0.1, l1=0.5, l2=0.1):
        v = w - lr * g
        return np.sign(v) * np.maximum(np.abs(v) - lr * l1, 0) / (1 + lr * l2)

    np.testing.assert_allclose(_five_steps(tf.train.AdadeltaOptimizer(1.0, 0.95, 1e-6)), reference(adadelta),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_five_steps(tf.train.FtrlOptimizer(0.5, l1_regularization_strength=0.01,
                                                                   l2_regularization_strength=0.1)),
                               reference(ftrl), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_five_steps(tf.train.ProximalGradientDescentOptimizer(0.1, 0.5, 0.1)),
                               reference(proximal), rtol=1e-5, atol=1e-6)
