"""Keras-layout weights set by hand give the outputs of Keras' own equations (NumPy references):
what a user relies on when moving a trained Keras model's ``get_weights()`` arrays over."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

K = tf.keras.backend
rng = np.random.default_rng(0)


def _hard_sigmoid(x):
    return np.clip(0.2 * x + 0.5, 0.0, 1.0)


def _run(layer, x, weights):
    inp = tf.keras.Input(shape=x.shape[1:])
    model = tf.keras.Model(inp, layer(inp))
    layer.set_weights(weights)
    return model.predict(x)


def test_dense_kernel_is_in_by_out():
    x = rng.normal(size=(5, 4)).astype(np.float32)
    w, b = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    got = _run(tf.keras.layers.Dense(3, activation="tanh"), x, [w, b])
    np.testing.assert_allclose(got, np.tanh(x @ w + b), rtol=1e-5, atol=1e-5)


def test_conv2d_kernel_is_kh_kw_in_out():
    x = rng.normal(size=(2, 5, 5, 2)).astype(np.float32)
    w, b = rng.normal(size=(3, 3, 2, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    got = _run(tf.keras.layers.Conv2D(4, 3), x, [w, b])
    want = np.zeros((2, 3, 3, 4), np.float32)
    for i in range(3):
        for j in range(3):
            want[:, i, j, :] = np.einsum("nhwc,hwco->no", x[:, i:i + 3, j:j + 3, :], w) + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _lstm_reference(x, kernel, recurrent, bias, units):
    h = np.zeros((x.shape[0], units), np.float32)
    c = np.zeros_like(h)
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f = _hard_sigmoid(z[:, :units]), _hard_sigmoid(z[:, units:2 * units])
        c = f * c + i * np.tanh(z[:, 2 * units:3 * units])
        h = _hard_sigmoid(z[:, 3 * units:]) * np.tanh(c)
    return h


def _gru_reference(x, kernel, recurrent, bias, units):
    h = np.zeros((x.shape[0], units), np.float32)
    for t in range(x.shape[1]):
        xw = x[:, t] @ kernel + bias
        z = _hard_sigmoid(xw[:, :units] + h @ recurrent[:, :units])
        r = _hard_sigmoid(xw[:, units:2 * units] + h @ recurrent[:, units:2 * units])
        hh = np.tanh(xw[:, 2 * units:] + (r * h) @ recurrent[:, 2 * units:])
        h = z * h + (1 - z) * hh
    return h


def _simple_rnn_reference(x, kernel, recurrent, bias, units):
    h = np.zeros((x.shape[0], units), np.float32)
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t] @ kernel + h @ recurrent + bias)
    return h


@pytest.mark.parametrize("layer_class, gates, reference", [
    (tf.keras.layers.LSTM, 4, _lstm_reference),
    (tf.keras.layers.GRU, 3, _gru_reference),
    (tf.keras.layers.SimpleRNN, 1, _simple_rnn_reference),
])
def test_recurrent_layers_follow_keras_equations_and_gate_order(layer_class, gates, reference):
    units, features = 3, 2
    x = rng.normal(size=(4, 5, features)).astype(np.float32)
    kernel = rng.normal(size=(features, gates * units)).astype(np.float32) * 0.5
    recurrent = rng.normal(size=(units, gates * units)).astype(np.float32) * 0.5
    bias = rng.normal(size=(gates * units,)).astype(np.float32) * 0.5
    layer = layer_class(units)
    got = _run(layer, x, [kernel, recurrent, bias])
    assert [tuple(w.shape) for w in layer.weights] == [kernel.shape, recurrent.shape, bias.shape]
    np.testing.assert_allclose(got, reference(x, kernel, recurrent, bias, units), rtol=1e-4, atol=1e-5)


def test_return_sequences_go_backwards_and_return_state():
    units = 2
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    weights = [rng.normal(size=(2, 8)).astype(np.float32), rng.normal(size=(2, 8)).astype(np.float32),
               np.zeros(8, np.float32)]
    inp = tf.keras.Input(shape=(4, 2))
    layer = tf.keras.layers.LSTM(units, return_sequences=True, return_state=True, go_backwards=True)
    seq, h, c = layer(inp)
    model = tf.keras.Model(inp, [seq, h, c])
    layer.set_weights(weights)
    got_seq, got_h, _ = model.predict(x)
    want_h = _lstm_reference(x[:, ::-1], *weights, units)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_seq[:, -1], want_h, rtol=1e-4, atol=1e-5)
    assert got_seq.shape == (3, 4, units)


def test_batch_normalization_at_inference_uses_the_moving_statistics():
    x = rng.normal(size=(6, 3)).astype(np.float32)
    gamma, beta = np.array([1.0, 2.0, 0.5], np.float32), np.array([0.0, -1.0, 1.0], np.float32)
    mean, var = np.array([0.5, -0.2, 0.0], np.float32), np.array([2.0, 0.5, 1.0], np.float32)
    layer = tf.keras.layers.BatchNormalization()
    got = _run(layer, x, [gamma, beta, mean, var])
    np.testing.assert_allclose(got, gamma * (x - mean) / np.sqrt(var + 1e-3) + beta, rtol=1e-5, atol=1e-5)
    assert [w.op.name.rsplit("/", 1)[-1] for w in layer.weights] == ["gamma", "beta", "moving_mean",
                                                                     "moving_variance"]
    assert len(layer.trainable_weights) == 2


def test_set_weights_names_the_layer_on_a_shape_mismatch():
    layer = tf.keras.layers.Dense(3)
    layer(tf.keras.Input(shape=(4,)))
    with pytest.raises(ValueError, match=r"Layer weight shape \(4, 3\) not compatible with provided weight shape "
                                         r"\(3, 4\).*dense"):
        layer.set_weights([np.zeros((3, 4)), np.zeros(3)])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_cudnn_layers_keep_their_two_biases_and_sigmoid_gates():
    units, features = 3, 2
    x = rng.normal(size=(4, 5, features)).astype(np.float32)
    k4, r4 = rng.normal(size=(features, 4 * units)).astype(np.float32), rng.normal(size=(units, 4 * units)).astype(
        np.float32)
    b8 = rng.normal(size=(8 * units,)).astype(np.float32)
    h = c = np.zeros((4, units), np.float32)
    for t in range(5):
        z = x[:, t] @ k4 + h @ r4 + b8[:4 * units] + b8[4 * units:]
        i, f, o = _sigmoid(z[:, :units]), _sigmoid(z[:, units:2 * units]), _sigmoid(z[:, 3 * units:])
        c = f * c + i * np.tanh(z[:, 2 * units:3 * units])
        h = o * np.tanh(c)
    np.testing.assert_allclose(_run(tf.keras.layers.CuDNNLSTM(units), x, [k4, r4, b8]), h, rtol=1e-4, atol=1e-5)

    k3, r3 = rng.normal(size=(features, 3 * units)).astype(np.float32), rng.normal(size=(units, 3 * units)).astype(
        np.float32)
    b6 = rng.normal(size=(6 * units,)).astype(np.float32)
    h = np.zeros((4, units), np.float32)
    for t in range(5):
        xw, hu = x[:, t] @ k3 + b6[:3 * units], h @ r3 + b6[3 * units:]
        z = _sigmoid(xw[:, :units] + hu[:, :units])
        r = _sigmoid(xw[:, units:2 * units] + hu[:, units:2 * units])
        h = z * h + (1 - z) * np.tanh(xw[:, 2 * units:] + r * hu[:, 2 * units:])
    np.testing.assert_allclose(_run(tf.keras.layers.CuDNNGRU(units), x, [k3, r3, b6]), h, rtol=1e-4, atol=1e-5)
    # GRU(reset_after=True, recurrent_activation="sigmoid") is the same computation, bias as [2, 3u]
    gru = tf.keras.layers.GRU(units, reset_after=True, recurrent_activation="sigmoid")
    np.testing.assert_allclose(_run(gru, x, [k3, r3, b6.reshape(2, 3 * units)]), h, rtol=1e-4, atol=1e-5)


def test_layer_normalization_and_spatial_dropout():
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    gamma, beta = rng.normal(size=5).astype(np.float32), rng.normal(size=5).astype(np.float32)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3) * gamma + beta
    np.testing.assert_allclose(_run(tf.keras.layers.LayerNormalization(), x, [gamma, beta]), want, rtol=1e-4,
                               atol=1e-5)
    tf.set_random_seed(0)
    inp = tf.keras.Input(shape=(6, 6, 8))
    out = tf.keras.layers.SpatialDropout2D(0.5)(inp, training=True)
    with tf.Session() as sess:
        dropped = sess.run(out, {inp: np.ones((4, 6, 6, 8), np.float32)})
    per_channel = dropped.reshape(4, 36, 8)
    assert (per_channel.min(1) == per_channel.max(1)).all()  # a channel is dropped or kept whole
    assert 0 < (per_channel[:, 0] == 0).mean() < 1


def test_locally_connected_layers_use_one_filter_per_position():
    x = rng.normal(size=(2, 5, 3)).astype(np.float32)
    kernel = rng.normal(size=(2, 2 * 3, 4)).astype(np.float32)  # 2 positions (k=2, stride 2), patch 2*3
    bias = rng.normal(size=(2, 4)).astype(np.float32)
    got = _run(tf.keras.layers.LocallyConnected1D(4, 2, strides=2), x, [kernel, bias])
    want = np.stack([x[:, 2 * i:2 * i + 2].reshape(2, -1) @ kernel[i] + bias[i] for i in range(2)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    images = rng.normal(size=(2, 4, 4, 1)).astype(np.float32)
    kernel2 = rng.normal(size=(9, 4, 2)).astype(np.float32)
    bias2 = rng.normal(size=(3, 3, 2)).astype(np.float32)
    got2 = _run(tf.keras.layers.LocallyConnected2D(2, 2), images, [kernel2, bias2])
    want2 = np.stack([images[:, i:i + 2, j:j + 2].reshape(2, -1) @ kernel2[3 * i + j] + bias2[i, j]
                      for i in range(3) for j in range(3)], axis=1).reshape(2, 3, 3, 2)
    np.testing.assert_allclose(got2, want2, rtol=1e-5, atol=1e-5)


def _conv_same(x, w):
    """'same' convolution of NHWC ``x`` with [kh, kw, in, out] ``w`` (odd kernel)."""
    kh, kw = w.shape[:2]
    padded = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    out = np.zeros(x.shape[:3] + (w.shape[3],), np.float32)
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            out[:, i, j] = np.einsum("nhwc,hwco->no", padded[:, i:i + kh, j:j + kw], w)
    return out


def test_conv_lstm_2d_follows_the_convolutional_lstm_equations():
    filters = 2
    x = rng.normal(size=(2, 3, 4, 4, 1)).astype(np.float32)
    kernel = rng.normal(size=(3, 3, 1, 4 * filters)).astype(np.float32) * 0.5
    recurrent = rng.normal(size=(3, 3, filters, 4 * filters)).astype(np.float32) * 0.5
    bias = rng.normal(size=(4 * filters,)).astype(np.float32) * 0.5
    got = _run(tf.keras.layers.ConvLSTM2D(filters, 3, padding="same"), x, [kernel, recurrent, bias])
    h = c = np.zeros((2, 4, 4, filters), np.float32)
    for t in range(3):
        z = _conv_same(x[:, t], kernel) + bias + _conv_same(h, recurrent)
        f = filters
        i, fg, o = _hard_sigmoid(z[..., :f]), _hard_sigmoid(z[..., f:2 * f]), _hard_sigmoid(z[..., 3 * f:])
        c = fg * c + i * np.tanh(z[..., 2 * f:3 * f])
        h = o * np.tanh(c)
    np.testing.assert_allclose(got, h, rtol=1e-4, atol=1e-4)
