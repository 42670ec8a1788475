"""tf.contrib.rnn's extra cells and wrappers: variable names as TF 1.15 makes them (so checkpoints
line up), each cell's steps against a NumPy transcription of its published equations run on the
variables' values, gradients by finite differences, stack_bidirectional_rnn, and a TF1-style
sequence model trained with dynamic_rnn."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(21)
X = RNG.standard_normal((3, 4, 5)).astype(np.float64)  # [batch, time, depth]


def sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def layer_norm(v, gamma, beta):
    mean = v.mean(axis=1, keepdims=True)
    var = v.var(axis=1, keepdims=True)
    return (v - mean) / np.sqrt(var + 1e-12) * gamma + beta


def run_cell(cell):
    """dynamic_rnn over X with random (not initial) variable values; returns outputs, final state, values."""
    x = tf.placeholder(tf.float64, X.shape)
    outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    variables = tf.trainable_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = {}
        for v in variables:
            value = RNG.uniform(-0.6, 0.6, v.shape)
            sess.run(v.assign(value))
            values[v.op.name.split("rnn/", 1)[1]] = value
        out, final = sess.run([outputs, state], {x: X})
    return out, final, values


def unroll(step, state):
    outs = []
    for t in range(X.shape[1]):
        out, state = step(X[:, t], state)
        outs.append(out)
    return np.stack(outs, axis=1), state


def test_ugrnn_cell():
    out, final, v = run_cell(tf.contrib.rnn.UGRNNCell(4, forget_bias=0.5))
    assert sorted(v) == ["ugrnn_cell/bias", "ugrnn_cell/kernel"] and v["ugrnn_cell/kernel"].shape == (9, 8)

    def step(x, h):
        m = np.concatenate([x, h], 1) @ v["ugrnn_cell/kernel"] + v["ugrnn_cell/bias"]
        g = sig(m[:, :4] + 0.5)
        h = g * h + (1 - g) * np.tanh(m[:, 4:])
        return h, h

    expected, h = unroll(step, np.zeros((3, 4)))
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    np.testing.assert_allclose(final, h, rtol=1e-10)


def test_intersection_rnn_cell_with_input_projection():
    out, final, v = run_cell(tf.contrib.rnn.IntersectionRNNCell(4, num_in_proj=4))
    assert sorted(v) == ["intersection_rnn_cell/bias", "intersection_rnn_cell/in_projection/bias",
                         "intersection_rnn_cell/in_projection/kernel", "intersection_rnn_cell/kernel"]

    def step(x, h):
        x = x @ v["intersection_rnn_cell/in_projection/kernel"] + v["intersection_rnn_cell/in_projection/bias"]
        m = np.concatenate([x, h], 1) @ v["intersection_rnn_cell/kernel"] + v["intersection_rnn_cell/bias"]
        gh, hh, gy, y = np.split(m, 4, axis=1)
        gh, gy = sig(gh + 1.0), sig(gy + 1.0)
        new_h = gh * h + (1 - gh) * np.tanh(hh)
        return gy * x + (1 - gy) * np.maximum(y, 0), new_h

    expected, h = unroll(step, np.zeros((3, 4)))
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    np.testing.assert_allclose(final, h, rtol=1e-10)
    with pytest.raises(ValueError, match="num_in_proj should be set"):
        tf.nn.dynamic_rnn(tf.contrib.rnn.IntersectionRNNCell(4), tf.constant(X), dtype=tf.float64, scope="other")


def test_nas_cell_with_projection_and_biases():
    out, final, v = run_cell(tf.contrib.rnn.NASCell(4, num_proj=3, use_biases=True))
    assert sorted(v) == ["nas_cell/bias", "nas_cell/kernel", "nas_cell/projection_weights",
                         "nas_cell/recurrent_kernel"]
    assert v["nas_cell/recurrent_kernel"].shape == (3, 32)

    def step(x, state):
        c, m = state
        mm = np.split(m @ v["nas_cell/recurrent_kernel"] + v["nas_cell/bias"], 8, axis=1)
        xm = np.split(x @ v["nas_cell/kernel"], 8, axis=1)
        relu = lambda a: np.maximum(a, 0)  # noqa: E731
        l1 = [sig(xm[0] + mm[0]), relu(xm[1] + mm[1]), sig(xm[2] + mm[2]), relu(xm[3] * mm[3]),
              np.tanh(xm[4] + mm[4]), sig(xm[5] + mm[5]), np.tanh(xm[6] + mm[6]), sig(xm[7] + mm[7])]
        l2 = [np.tanh(l1[0] * l1[1]), np.tanh(l1[2] + l1[3]), np.tanh(l1[4] * l1[5]), sig(l1[6] + l1[7])]
        new_c = np.tanh(l2[0] + c) * l2[1]
        new_m = np.tanh(new_c * np.tanh(l2[2] + l2[3])) @ v["nas_cell/projection_weights"]
        return new_m, (new_c, new_m)

    expected, (c, m) = unroll(step, (np.zeros((3, 4)), np.zeros((3, 3))))
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    np.testing.assert_allclose(final[0], c, rtol=1e-10)
    np.testing.assert_allclose(final[1], m, rtol=1e-10)


@pytest.mark.parametrize("layer_norm", [True, False])
def test_layer_norm_basic_lstm_cell(layer_norm):
    out, final, v = run_cell(tf.contrib.rnn.LayerNormBasicLSTMCell(4, forget_bias=0.7, layer_norm=layer_norm))
    p = "layer_norm_basic_lstm_cell/"
    if layer_norm:
        assert sorted(v) == sorted([p + "kernel"] + [f"{p}{s}/{g}" for s in ("input", "transform", "forget",
                                                                              "output", "state")
                                                     for g in ("gamma", "beta")])
    else:
        assert sorted(v) == [p + "bias", p + "kernel"]

    def norm(t, scope):
        return layer_norm_fn(t, v[f"{p}{scope}/gamma"], v[f"{p}{scope}/beta"]) if layer_norm else t

    layer_norm_fn = globals()["layer_norm"]

    def step(x, state):
        c, h = state
        m = np.concatenate([x, h], 1) @ v[p + "kernel"] + (0 if layer_norm else v[p + "bias"])
        i, j, f, o = (norm(t, s) for t, s in zip(np.split(m, 4, axis=1), ("input", "transform", "forget", "output")))
        new_c = norm(c * sig(f + 0.7) + sig(i) * np.tanh(j), "state")
        new_h = np.tanh(new_c) * sig(o)
        return new_h, (new_c, new_h)

    expected, (c, h) = unroll(step, (np.zeros((3, 4)), np.zeros((3, 4))))
    np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(final[0], c, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("peepholes, proj, shards, layer_norm", [
    (False, None, 1, False), (True, 2, 1, False), (False, None, 3, True)])
def test_coupled_input_forget_gate_lstm_cell(peepholes, proj, shards, layer_norm):
    cell = tf.contrib.rnn.CoupledInputForgetGateLSTMCell(4, use_peepholes=peepholes, num_proj=proj,
                                                         num_unit_shards=shards, layer_norm=layer_norm)
    out, final, v = run_cell(cell)
    p = "coupled_input_forget_gate_lstm_cell/"
    kernel = np.concatenate([v[f"{p}W_{i}"] for i in range(shards)], axis=0)
    assert kernel.shape == (5 + (proj or 4), 12) and v[p + "B"].shape == (12,)

    def norm(t, scope):
        return layer_norm_fn(t, v[f"{p}{scope}/gamma"], v[f"{p}{scope}/beta"]) if layer_norm else t

    layer_norm_fn = globals()["layer_norm"]

    def step(x, state):
        c, m = state
        mat = np.concatenate([x, m], 1) @ kernel + (0 if layer_norm else v[p + "B"])
        j, f, o = (norm(t, s) for t, s in zip(np.split(mat, 3, axis=1), ("transform", "forget", "output")))
        f_act = sig(f + 1.0 + (v[p + "W_F_diag"] * c if peepholes else 0))
        new_c = norm(f_act * c + (1 - f_act) * np.tanh(j), "state")
        new_m = sig(o + (v[p + "W_O_diag"] * new_c if peepholes else 0)) * np.tanh(new_c)
        if proj:
            new_m = new_m @ v[p + "W_P_0"]
        return new_m, (new_c, new_m)

    expected, (c, m) = unroll(step, (np.zeros((3, 4)), np.zeros((3, proj or 4))))
    np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(final[0], c, rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="state_is_tuple=False"):
        tf.contrib.rnn.CoupledInputForgetGateLSTMCell(4, state_is_tuple=False)


@pytest.mark.parametrize("coupled", [True, False])
def test_highway_wrapper(coupled):
    cell = tf.contrib.rnn.HighwayWrapper(tf.contrib.rnn.UGRNNCell(5), couple_carry_transform_gates=coupled,
                                         carry_bias_init=0.5)
    x = tf.placeholder(tf.float64, X.shape)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    names = sorted(v.op.name for v in tf.trainable_variables())
    expected_names = ["rnn/carry_b", "rnn/carry_w", "rnn/ugrnn_cell/bias", "rnn/ugrnn_cell/kernel"]
    if not coupled:
        expected_names = sorted(expected_names + ["rnn/transform_b", "rnn/transform_w"])
    assert names == expected_names
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = {v.op.name: sess.run(v) for v in tf.trainable_variables()}
        got = sess.run(outputs, {x: X})
    np.testing.assert_allclose(values["rnn/carry_b"], 0.5)

    def step(xt, h):
        m = np.concatenate([xt, h], 1) @ values["rnn/ugrnn_cell/kernel"] + values["rnn/ugrnn_cell/bias"]
        g = sig(m[:, :5] + 1.0)
        h = g * h + (1 - g) * np.tanh(m[:, 5:])
        carry = sig(xt @ values["rnn/carry_w"] + values["rnn/carry_b"])
        transform = 1 - carry if coupled else sig(xt @ values["rnn/transform_w"] + values["rnn/transform_b"])
        return xt * carry + h * transform, h

    expected, _ = unroll(step, np.zeros((3, 5)))
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    with pytest.raises(ValueError, match="must equal its input size"):
        tf.nn.dynamic_rnn(tf.contrib.rnn.HighwayWrapper(tf.contrib.rnn.UGRNNCell(3)), x, dtype=tf.float64,
                          scope="mismatch")


def test_embedding_wrapper_feeds_the_cell_embeddings():
    ids = tf.placeholder(tf.int32, [2, 3, 1])
    cell = tf.contrib.rnn.EmbeddingWrapper(tf.contrib.rnn.UGRNNCell(4), embedding_classes=7, embedding_size=3)
    outputs, _ = tf.nn.dynamic_rnn(cell, ids, dtype=tf.float32)
    names = [v.op.name for v in tf.trainable_variables()]
    assert names == ["rnn/embedding_wrapper/embedding", "rnn/embedding_wrapper/ugrnn_cell/kernel",
                     "rnn/embedding_wrapper/ugrnn_cell/bias"]
    feed = np.array([[[1], [6], [1]], [[0], [2], [3]]], np.int32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        emb, kernel, bias = sess.run(tf.trainable_variables())
        got = sess.run(outputs, {ids: feed})
    assert np.all(np.abs(emb) <= np.sqrt(3.0)) and emb.dtype == np.float32
    h = np.zeros((2, 4))
    for t in range(3):
        m = np.concatenate([emb[feed[:, t, 0]], h], 1) @ kernel + bias
        g = sig(m[:, :4] + 1.0)
        h = g * h + (1 - g) * np.tanh(m[:, 4:])
        np.testing.assert_allclose(got[:, t], h, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="must be > 0"):
        tf.contrib.rnn.EmbeddingWrapper(tf.contrib.rnn.UGRNNCell(4), 0, 3)


def test_cell_gradients_match_finite_differences():
    x = tf.placeholder(tf.float64, [2, 3, 4])
    cell = tf.contrib.rnn.CoupledInputForgetGateLSTMCell(3, use_peepholes=True, layer_norm=True)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    weights = RNG.uniform(0.5, 1.5, (2, 3, 3))
    loss = tf.reduce_sum(outputs * weights)
    grad = tf.gradients(loss, x)[0]
    value = RNG.standard_normal((2, 3, 4))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        analytic = sess.run(grad, {x: value})
        flat = value.reshape(-1)
        for i in range(0, flat.size, 3):
            old = flat[i]
            flat[i] = old + 1e-6
            up = sess.run(loss, {x: value})
            flat[i] = old - 1e-6
            down = sess.run(loss, {x: value})
            flat[i] = old
            np.testing.assert_allclose(analytic.reshape(-1)[i], (up - down) / 2e-6, rtol=1e-5, atol=1e-7)


def test_stack_bidirectional_rnn_names_and_shapes():
    steps = [tf.placeholder(tf.float32, [2, 3]) for _ in range(4)]
    cells_fw = [tf.contrib.rnn.UGRNNCell(4), tf.contrib.rnn.UGRNNCell(5)]
    cells_bw = [tf.contrib.rnn.UGRNNCell(4), tf.contrib.rnn.UGRNNCell(5)]
    outputs, states_fw, states_bw = tf.contrib.rnn.stack_bidirectional_rnn(cells_fw, cells_bw, steps,
                                                                           dtype=tf.float32)
    assert len(outputs) == 4 and outputs[0].shape == (2, 10) and len(states_fw) == 2 and len(states_bw) == 2
    names = sorted(v.op.name for v in tf.trainable_variables() if v.op.name.endswith("kernel"))
    assert names == [f"stack_bidirectional_rnn/cell_{i}/bidirectional_rnn/{d}/ugrnn_cell/kernel"
                     for i in (0, 1) for d in ("bw", "fw")]
    feed = {s: RNG.standard_normal((2, 3)).astype(np.float32) for s in steps}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(outputs, feed)
        fw_last = sess.run(states_fw[1], feed)
    np.testing.assert_allclose(out[-1][:, :5], fw_last, rtol=1e-6)  # the forward half of the last step
    with pytest.raises(ValueError, match="differ in length"):
        tf.contrib.rnn.stack_bidirectional_rnn(cells_fw, cells_bw[:1], steps, dtype=tf.float32)


def test_a_tf1_sequence_classifier_trains_with_a_layer_norm_lstm():
    """Classify whether a sequence's sum is positive: dynamic_rnn + LayerNormBasicLSTMCell + Adam."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 6, 1)).astype(np.float32)
    ys = (xs.sum(axis=(1, 2)) > 0).astype(np.int64)
    x = tf.placeholder(tf.float32, [None, 6, 1])
    y = tf.placeholder(tf.int64, [None])
    # explicit seeds: a graph-level seed alone gives op seeds that depend on what ran before
    with tf.variable_scope("model", initializer=tf.glorot_uniform_initializer(seed=1)):
        _, state = tf.nn.dynamic_rnn(tf.contrib.rnn.LayerNormBasicLSTMCell(8), x, dtype=tf.float32)
        logits = tf.layers.dense(state.h, 2, kernel_initializer=tf.glorot_uniform_initializer(seed=11))
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: xs, y: ys})
        for _ in range(100):
            sess.run(train, {x: xs, y: ys})
        last = sess.run(loss, {x: xs, y: ys})
    assert last < 0.5 * first  # measured 0.068 (seeds 1-6: 0.001-0.14) of the first loss


def test_lstm_block_fused_cell_is_time_major_with_sequence_lengths():
    xt = tf.placeholder(tf.float64, [4, 3, 5])  # [time, batch, depth]
    lengths = tf.placeholder(tf.int32, [3])
    cell = tf.contrib.rnn.LSTMBlockFusedCell(4, forget_bias=0.3)
    outputs, state = cell(xt, dtype=tf.float64, sequence_length=lengths)
    full, _ = cell(xt, dtype=tf.float64)  # the same variables on a second call
    assert [v.op.name for v in tf.trainable_variables()] == ["lstm_fused_cell/kernel", "lstm_fused_cell/bias"]
    assert outputs.shape == (4, 3, 4)
    value, lens = np.transpose(X, [1, 0, 2]), np.array([4, 2, 0])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel, bias = sess.run(tf.trainable_variables())
        bias = RNG.uniform(-0.5, 0.5, bias.shape)
        sess.run(tf.trainable_variables()[1].assign(bias))
        got, (c_got, h_got), got_full = sess.run([outputs, state, full], {xt: value, lengths: lens})
    c, h = np.zeros((3, 4)), np.zeros((3, 4))
    expected = np.zeros((4, 3, 4))
    for t in range(4):
        i, j, f, o = np.split(np.concatenate([value[t], h], 1) @ kernel + bias, 4, axis=1)
        new_c = c * sig(f + 0.3) + sig(i) * np.tanh(j)
        new_h = np.tanh(new_c) * sig(o)
        running = (t < lens)[:, None]
        c, h = np.where(running, new_c, c), np.where(running, new_h, h)
        expected[t] = np.where(running, new_h, 0.0)
        np.testing.assert_allclose(got_full[t, 0], new_h[0], rtol=1e-8)  # batch 0 runs all four steps
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(c_got, c, rtol=1e-8)
    np.testing.assert_allclose(h_got, h, rtol=1e-8)
    with pytest.raises(ValueError, match="Either initial_state or dtype"):
        cell(xt)
    with pytest.raises(ValueError, match=r"inputs must be time-major \[time, batch, depth\] with a known depth"):
        cell(tf.placeholder(tf.float64, [3, 5]), dtype=tf.float64)


def test_a_user_layer_rnn_cell_builds_in_its_own_scope():
    class MinimalRNNCell(tf.contrib.rnn.LayerRNNCell):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units

        @property
        def state_size(self):
            return self.units

        @property
        def output_size(self):
            return self.units

        def build(self, inputs_shape):
            self.kernel = self.add_variable("kernel", [inputs_shape[-1], self.units])
            self.recurrent_kernel = self.add_weight("recurrent_kernel", [self.units, self.units],
                                                    initializer=tf.zeros_initializer())
            self.built = True

        def call(self, inputs, state):
            h = tf.tanh(tf.matmul(inputs, self.kernel) + tf.matmul(state, self.recurrent_kernel))
            return h, h

    x = tf.placeholder(tf.float64, X.shape)
    cell = MinimalRNNCell(3)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    assert [v.op.name for v in tf.trainable_variables()] == ["rnn/minimal_rnn_cell/kernel",
                                                             "rnn/minimal_rnn_cell/recurrent_kernel"]
    assert cell.built and cell.dtype == np.float64
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel = sess.run(cell.kernel)
        got = sess.run(outputs, {x: X})
    np.testing.assert_allclose(got, np.tanh(X @ kernel), rtol=1e-10)  # a zero recurrent kernel
    named = MinimalRNNCell(2, name="custom")
    tf.nn.dynamic_rnn(named, x, dtype=tf.float64, scope="other")
    assert named.variables[0].op.name == "other/custom/kernel"


def test_attention_cell_wrapper_matches_its_equations():
    out, final, v = run_cell(tf.contrib.rnn.AttentionCellWrapper(tf.nn.rnn_cell.BasicRNNCell(4), attn_length=3,
                                                                 attn_vec_size=2))
    p = "attention_cell_wrapper/"
    assert sorted(v) == sorted(p + n for n in (
        "kernel", "bias", "basic_rnn_cell/kernel", "basic_rnn_cell/bias", "attention/attn_w", "attention/attn_v",
        "attention/kernel", "attention/bias", "attn_output_projection/kernel", "attn_output_projection/bias"))
    assert v[p + "attention/attn_w"].shape == (1, 1, 4, 2) and v[p + "kernel"].shape == (9, 5)

    def step(x, state):
        h, attns, window = state
        window = window.reshape(3, 3, 4)
        mixed = np.concatenate([x, attns], 1) @ v[p + "kernel"] + v[p + "bias"]
        h = np.tanh(np.concatenate([mixed, h], 1) @ v[p + "basic_rnn_cell/kernel"] + v[p + "basic_rnn_cell/bias"])
        features = window @ v[p + "attention/attn_w"][0, 0]
        y = h @ v[p + "attention/kernel"] + v[p + "attention/bias"]
        scores = (v[p + "attention/attn_v"] * np.tanh(features + y[:, None])).sum(axis=2)
        weights = np.exp(scores - scores.max(1, keepdims=True))
        weights /= weights.sum(1, keepdims=True)
        read = (weights[:, :, None] * window).sum(axis=1)
        output = np.concatenate([h, read], 1) @ v[p + "attn_output_projection/kernel"] + \
            v[p + "attn_output_projection/bias"]
        window = np.concatenate([window[:, 1:], output[:, None]], 1).reshape(3, 12)
        return output, (h, read, window)

    expected, (h, read, window) = unroll(step, (np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 12))))
    np.testing.assert_allclose(out, expected, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(final[2], window, rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match="attn_length should be greater than zero"):
        tf.contrib.rnn.AttentionCellWrapper(tf.nn.rnn_cell.BasicRNNCell(4), attn_length=0)
    with pytest.raises(TypeError, match="not RNNCell"):
        tf.contrib.rnn.AttentionCellWrapper("cell", attn_length=2)


def _conv1d_same(x, kernel):
    """[batch, width, in] * [k, in, out] with TF's SAME padding (the extra column after)."""
    k = kernel.shape[0]
    padded = np.pad(x, [(0, 0), ((k - 1) // 2, k - 1 - (k - 1) // 2), (0, 0)])
    return np.stack([np.einsum("bki,kio->bo", padded[:, w:w + k], kernel) for w in range(x.shape[1])], axis=1)


def test_conv1d_lstm_cell_with_sequence_lengths_and_skip_connection():
    x = tf.placeholder(tf.float64, [2, 3, 6, 2])  # [batch, time, width, channels]
    cell = tf.contrib.rnn.Conv1DLSTMCell(input_shape=[6, 2], output_channels=3, kernel_shape=[3],
                                        skip_connection=True, forget_bias=0.5)
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=[3, 1], dtype=tf.float64)
    assert outputs.shape == (2, 3, 6, 5)
    assert [v.op.name for v in tf.trainable_variables()] == ["rnn/conv_lstm_cell/kernel", "rnn/conv_lstm_cell/biases"]
    value = RNG.standard_normal((2, 3, 6, 2))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        biases = RNG.uniform(-0.5, 0.5, 12)
        sess.run(tf.trainable_variables()[1].assign(biases))
        kernel = sess.run(tf.trainable_variables()[0])
        got, (c_got, h_got) = sess.run([outputs, state], {x: value})
    c, h = np.zeros((2, 6, 3)), np.zeros((2, 6, 3))
    for t in range(3):
        gates = _conv1d_same(np.concatenate([value[:, t], h], -1), kernel) + biases
        i, j, f, o = np.split(gates, 4, axis=-1)
        new_c = sig(f + 0.5) * c + sig(i) * np.tanh(j)
        new_h = np.tanh(new_c) * sig(o)
        running = np.array([t < 3, t < 1])[:, None, None]
        expected = np.where(running, np.concatenate([new_h, value[:, t]], -1), 0.0)
        np.testing.assert_allclose(got[:, t], expected, rtol=1e-8, atol=1e-12)
        c, h = np.where(running, new_c, c), np.where(running, new_h, h)
    np.testing.assert_allclose(c_got, c, rtol=1e-8)
    np.testing.assert_allclose(h_got, h, rtol=1e-8)
    with pytest.raises(ValueError, match="Invalid input_shape"):
        tf.contrib.rnn.Conv2DLSTMCell(input_shape=[6, 2], output_channels=3, kernel_shape=[3, 3])


def test_conv2d_lstm_cell_trains_on_images():
    """A TF1 script: predict each pixel's running mean with a Conv2DLSTM; the loss falls."""
    rng = np.random.default_rng(2)
    frames = rng.uniform(size=(4, 3, 5, 5, 1)).astype(np.float32)
    targets = np.cumsum(frames, axis=1) / np.arange(1, 4)[None, :, None, None, None]
    x = tf.placeholder(tf.float32, [None, 3, 5, 5, 1])
    y = tf.placeholder(tf.float32, [None, 3, 5, 5, 1])
    with tf.variable_scope("model", initializer=tf.glorot_uniform_initializer(seed=1)):
        cell = tf.contrib.rnn.ConvLSTMCell(2, input_shape=[5, 5, 1], output_channels=4, kernel_shape=[3, 3])
        outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        prediction = tf.layers.conv3d(outputs, 1, 1, kernel_initializer=tf.glorot_uniform_initializer(seed=11))
    loss = tf.reduce_mean(tf.square(prediction - y))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: frames, y: targets})
        for _ in range(40):
            sess.run(train, {x: frames, y: targets})
        last = sess.run(loss, {x: frames, y: targets})
    assert last < 0.3 * first  # measured 0.040 (seeds 1-5: 0.03-0.10) of the first loss
