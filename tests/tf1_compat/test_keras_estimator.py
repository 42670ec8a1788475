"""``tf.keras.estimator.model_to_estimator``: a compiled Keras model becomes an Estimator that predicts
and evaluates like it from its current weights and keeps training from them."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_model_to_estimator_starts_from_the_keras_weights_and_trains_on(digits, tmp_path):
    tf.set_random_seed(0)
    np.random.seed(0)
    model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(64,)),
                                 tf.keras.layers.BatchNormalization(),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"], digits["y_train"], epochs=2, verbose=0)
    keras_loss, keras_accuracy = model.evaluate(digits["x_test"], digits["y_test"], verbose=0)
    want = model.predict(digits["x_test"])
    estimator = tf.keras.estimator.model_to_estimator(model, model_dir=str(tmp_path))
    test_input = tf.estimator.inputs.numpy_input_fn({"dense_input": digits["x_test"]}, digits["y_test"],
                                                    shuffle=False, batch_size=500)
    got = np.array([p for p in estimator.predict(test_input)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    before = estimator.evaluate(test_input)
    assert np.isclose(before["acc"], keras_accuracy) and np.isclose(before["loss"], keras_loss, rtol=1e-5)
    estimator.train(tf.estimator.inputs.numpy_input_fn({"dense_input": digits["x_train"]}, digits["y_train"],
                                                       batch_size=32, num_epochs=3, shuffle=True))
    after = estimator.evaluate(test_input)
    assert after["global_step"] == 132 and after["acc"] > max(before["acc"], 0.9), (before, after)


def test_model_to_estimator_needs_a_compiled_graph_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    with pytest.raises(ValueError, match="has not been compiled yet"):
        tf.keras.estimator.model_to_estimator(model)
