"""``tf.keras.experimental.export_saved_model``: a Keras model as a SavedModel that tf.saved_model loads
with its serving signature, and that load_from_saved_model turns back into the Keras model."""

from __future__ import annotations

import numpy as np

import trainer as tf


def test_export_and_load_a_saved_model(digits, tmp_path):
    tf.set_random_seed(0)
    inp = tf.keras.Input(shape=(64,), name="pixels")
    out = tf.keras.layers.Dense(10, activation="softmax", name="probabilities")(
        tf.keras.layers.Dense(16, activation="relu")(inp))
    model = tf.keras.Model(inp, out)
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)
    want = model.predict(digits["x_test"])
    path = str(tmp_path / "saved")
    tf.keras.experimental.export_saved_model(model, path)

    graph = tf.Graph()
    with tf.Session(graph=graph) as sess:
        meta = tf.saved_model.loader.load(sess, ["serve"], path)
        signature = meta.signature_def["serving_default"]
        x = graph.get_tensor_by_name(signature.inputs["pixels"].name)
        y = graph.get_tensor_by_name(signature.outputs["probabilities"].name)
        np.testing.assert_allclose(sess.run(y, {x: digits["x_test"]}), want, rtol=1e-5, atol=1e-6)

    tf.reset_default_graph()
    restored = tf.keras.experimental.load_from_saved_model(path)
    np.testing.assert_allclose(restored.predict(digits["x_test"]), want, rtol=1e-5, atol=1e-6)


def test_cosine_decay_schedules_the_rate():
    schedule = tf.keras.experimental.CosineDecay(0.1, decay_steps=10)
    with tf.Session() as sess:
        rates = sess.run([schedule(tf.constant(step)) for step in (0, 5, 10)])
    np.testing.assert_allclose(rates, [0.1, 0.05, 0.0], atol=1e-6)
