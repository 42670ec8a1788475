"""Recurrent Keras classifiers on digits read row by row (8 timesteps of 8 pixels)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers


@pytest.mark.parametrize("recurrent", [layers.LSTM, layers.GRU])
def test_a_recurrent_classifier_over_rows_learns_digits(digits, recurrent):
    tf.set_random_seed(0)
    np.random.seed(0)
    model = tf.keras.Sequential([recurrent(32, input_shape=(8, 8)), layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"].reshape(-1, 8, 8), digits["y_train"], batch_size=32, epochs=8, verbose=0)
    accuracy = model.evaluate(digits["x_test"].reshape(-1, 8, 8), digits["y_test"], verbose=0)[1]
    assert accuracy >= 0.9, accuracy


def test_stacked_bidirectional_layers_over_rows(digits):
    tf.set_random_seed(0)
    np.random.seed(0)
    inp = tf.keras.Input(shape=(8, 8))
    h = layers.Bidirectional(layers.SimpleRNN(16, return_sequences=True), merge_mode="sum")(inp)
    h = layers.LSTM(16)(h)
    model = tf.keras.Model(inp, layers.Dense(10, activation="softmax")(h))
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    assert model.layers[1].output_shape == (None, 8, 16)
    model.fit(digits["x_train"].reshape(-1, 8, 8), digits["y_train"], epochs=8, verbose=0)
    assert model.evaluate(digits["x_test"].reshape(-1, 8, 8), digits["y_test"], verbose=0)[1] >= 0.8
