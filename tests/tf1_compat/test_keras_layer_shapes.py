"""Every shape and elementwise layer against a NumPy expression of what Keras computes."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers
rng = np.random.default_rng(0)
X3 = rng.normal(size=(2, 6, 4)).astype(np.float32)
X4 = rng.normal(size=(2, 6, 6, 3)).astype(np.float32)


def _apply(layer, x):
    inp = tf.keras.Input(shape=x.shape[1:])
    return tf.keras.Model(inp, layer(inp)).predict(x)


@pytest.mark.parametrize("layer, x, want", [
    (layers.Reshape((4, 6)), X3, X3.reshape(2, 4, 6)),
    (layers.Reshape((-1, 2)), X3, X3.reshape(2, 12, 2)),
    (layers.Permute((2, 1)), X3, X3.transpose(0, 2, 1)),
    (layers.Flatten(), X4, X4.reshape(2, -1)),
    (layers.Cropping1D((1, 2)), X3, X3[:, 1:4]),
    (layers.Cropping2D(((1, 0), (2, 1))), X4, X4[:, 1:, 2:5]),
    (layers.ZeroPadding1D(2), X3, np.pad(X3, ((0, 0), (2, 2), (0, 0)))),
    (layers.ZeroPadding2D((1, 2)), X4, np.pad(X4, ((0, 0), (1, 1), (2, 2), (0, 0)))),
    (layers.UpSampling1D(2), X3, X3.repeat(2, axis=1)),
    (layers.UpSampling2D((2, 3)), X4, X4.repeat(2, axis=1).repeat(3, axis=2)),
    (layers.MaxPooling1D(2), X3, X3.reshape(2, 3, 2, 4).max(2)),
    (layers.AveragePooling2D(2), X4, X4.reshape(2, 3, 2, 3, 2, 3).mean((2, 4))),
    (layers.MaxPooling2D(3, strides=3), X4, X4.reshape(2, 2, 3, 2, 3, 3).max((2, 4))),
    (layers.GlobalMaxPooling1D(), X3, X3.max(1)),
    (layers.GlobalAveragePooling2D(), X4, X4.mean((1, 2))),
    (layers.LeakyReLU(0.1), X3, np.where(X3 > 0, X3, 0.1 * X3)),
    (layers.ReLU(max_value=0.5), X3, np.clip(X3, 0, 0.5)),
    (layers.ELU(0.5), X3, np.where(X3 > 0, X3, 0.5 * (np.exp(X3) - 1))),
    (layers.ThresholdedReLU(0.3), X3, np.where(X3 > 0.3, X3, 0)),
    (layers.Softmax(), X3, np.exp(X3) / np.exp(X3).sum(-1, keepdims=True)),
    (layers.Activation("sigmoid"), X3, 1 / (1 + np.exp(-X3))),
    (layers.Activation("hard_sigmoid"), X3, np.clip(0.2 * X3 + 0.5, 0, 1)),
    (layers.Masking(0.0), np.concatenate([X3[:, :3], np.zeros((2, 3, 4), np.float32)], 1),
     np.concatenate([X3[:, :3], np.zeros((2, 3, 4), np.float32)], 1)),
])
def test_layer_matches_numpy(layer, x, want):
    np.testing.assert_allclose(_apply(layer, x), want, rtol=1e-5, atol=1e-5)


def test_repeat_vector_and_merge_layers():
    a, b = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 3)).astype(np.float32)
    ia, ib = tf.keras.Input(shape=(3,)), tf.keras.Input(shape=(3,))
    outs = [layers.RepeatVector(2)(ia), layers.subtract([ia, ib]), layers.multiply([ia, ib]),
            layers.average([ia, ib]), layers.maximum([ia, ib]), layers.minimum([ia, ib]),
            layers.concatenate([ia, ib]), layers.dot([ia, ib], axes=1), layers.Dot(1, normalize=True)([ia, ib])]
    got = tf.keras.Model([ia, ib], outs).predict([a, b])
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    wants = [np.stack([a, a], 1), a - b, a * b, (a + b) / 2, np.maximum(a, b), np.minimum(a, b),
             np.concatenate([a, b], 1), (a * b).sum(1, keepdims=True), cosine[:, None]]
    for g, w in zip(got, wants):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_convolution_variants_match_numpy():
    x = rng.normal(size=(1, 5, 5, 2)).astype(np.float32)
    depthwise = rng.normal(size=(3, 3, 2, 2)).astype(np.float32)
    bias = rng.normal(size=(4,)).astype(np.float32)
    got = _run_weights(layers.DepthwiseConv2D(3, depth_multiplier=2), x, [depthwise, bias])
    want = np.zeros((1, 3, 3, 4), np.float32)
    for i in range(3):
        for j in range(3):
            patch = x[0, i:i + 3, j:j + 3]  # [3, 3, 2]
            want[0, i, j] = np.einsum("hwc,hwcm->cm", patch, depthwise).reshape(-1) + bias
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    pointwise = rng.normal(size=(1, 1, 4, 3)).astype(np.float32)
    sep_bias = rng.normal(size=(3,)).astype(np.float32)
    got = _run_weights(layers.SeparableConv2D(3, 3, depth_multiplier=2), x, [depthwise, pointwise, sep_bias])
    np.testing.assert_allclose(got, (want - bias) @ pointwise[0, 0] + sep_bias, rtol=1e-4, atol=1e-4)
    seq = rng.normal(size=(1, 5, 2)).astype(np.float32)
    kernel = rng.normal(size=(3, 2, 1)).astype(np.float32)
    causal = _run_weights(layers.Conv1D(1, 3, padding="causal", use_bias=False), seq, [kernel])
    padded = np.concatenate([np.zeros((1, 2, 2), np.float32), seq], 1)
    np.testing.assert_allclose(causal[0, :, 0], [np.sum(padded[0, t:t + 3] * kernel[:, :, 0]) for t in range(5)],
                               rtol=1e-4, atol=1e-5)
    up = _run_weights(layers.Conv2DTranspose(1, 2, strides=2, use_bias=False), np.ones((1, 2, 2, 1), np.float32),
                      [np.ones((2, 2, 1, 1), np.float32)])
    np.testing.assert_allclose(up, np.ones((1, 4, 4, 1)))


def _run_weights(layer, x, weights):
    inp = tf.keras.Input(shape=x.shape[1:])
    model = tf.keras.Model(inp, layer(inp))
    layer.set_weights(weights)
    return model.predict(x)


def test_time_distributed_applies_one_dense_per_step():
    kernel, bias = rng.normal(size=(4, 2)).astype(np.float32), rng.normal(size=(2,)).astype(np.float32)
    got = _run_weights(layers.TimeDistributed(layers.Dense(2)), X3, [kernel, bias])
    np.testing.assert_allclose(got, X3 @ kernel + bias, rtol=1e-5, atol=1e-5)


def test_conv3d_transpose_spreads_each_voxel_over_its_kernel():
    x = rng.normal(size=(2, 2, 2, 2, 1)).astype(np.float32)
    got = _run_weights(layers.Conv3DTranspose(1, 2, strides=2, use_bias=False), x,
                       [np.ones((2, 2, 2, 1, 1), np.float32)])
    want = x.repeat(2, 1).repeat(2, 2).repeat(2, 3)  # stride = kernel: each voxel fills its own 2x2x2 block
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
