"""Mistakes a Keras user makes get a clear error naming the thing: wrong input shapes, unknown names,
fit before compile, unbuilt options, and the tf.keras symbols flowstack does not provide."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers


def _mlp():
    return tf.keras.Sequential([layers.Dense(8, activation="relu", input_shape=(64,)), layers.Dense(10)])


def test_fit_before_compile_is_refused():
    with pytest.raises(RuntimeError, match=r"You must compile your model before training/testing"):
        _mlp().fit(np.zeros((4, 64)), np.zeros(4))


def test_a_wrong_input_or_target_shape_names_the_input_and_the_shapes():
    model = _mlp()
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"Error when checking input: expected dense_input to have shape \(64,\) "
                                         r"but got array with shape \(32,\)"):
        model.fit(np.zeros((4, 32)), np.zeros(4), verbose=0)
    with pytest.raises(ValueError, match=r"expected dense_input to have 2 dimensions, but got array with shape "
                                         r"\(4, 8, 8\)"):
        model.predict(np.zeros((4, 8, 8)))
    with pytest.raises(ValueError, match="same number of samples as target arrays"):
        model.fit(np.zeros((4, 64)), np.zeros(5), verbose=0)
    categorical = _mlp()
    categorical.compile("adam", "categorical_crossentropy")
    with pytest.raises(ValueError, match=r"Error when checking target: expected dense_\d+ to have shape \(10,\) but "
                                         r"got array with shape \(3,\)"):
        categorical.fit(np.zeros((4, 64)), np.zeros((4, 3)), verbose=0)


@pytest.mark.parametrize("compile_args, message", [
    ({"optimizer": "adamw", "loss": "mse"}, r"Unknown optimizer: 'adamw'"),
    ({"optimizer": "adam", "loss": "mean_squared_eror"}, r"Unknown loss function: 'mean_squared_eror' \(did you "
                                                         r"mean 'mean_squared_error'"),
    ({"optimizer": "adam", "loss": "mse", "metrics": ["acuracy"]}, r"Unknown metric function: 'acuracy'"),
    ({"optimizer": "adam"}, r"a `loss` is required"),
])
def test_unknown_names_fail_at_compile(compile_args, message):
    with pytest.raises(ValueError, match=message):
        _mlp().compile(**compile_args)


def test_unknown_activation_and_unbuilt_options_are_named():
    with pytest.raises(ValueError, match=r"Unknown activation function: 'rleu' \(did you mean 'relu'"):
        layers.Dense(3, activation="rleu")
    with pytest.raises(ValueError, match=r"LSTM\w*\(recurrent_dropout=1.5\): a rate in \[0, 1\)"):
        layers.LSTM(4, recurrent_dropout=1.5)
    with pytest.raises(NotImplementedError, match=r"LSTM\(stateful=True\) is not built"):
        layers.LSTM(4, stateful=True)
    with pytest.raises(NotImplementedError, match=r"Conv2D\(data_format='channels_first'\) is not built"):
        layers.Conv2D(4, 3, data_format="channels_first")
    with pytest.raises(NotImplementedError, match=r"compile\(sample_weight_mode=...\) is not built"):
        _mlp().compile("adam", "mse", sample_weight_mode="temporal")
    model = _mlp()
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"The classes \[1\] exist in the data but not in `class_weight`"):
        model.fit(np.zeros((2, 64)), np.array([0, 1]), class_weight={0: 1.0}, verbose=0)
    with pytest.raises(TypeError, match=r"Dense: unexpected keyword argument\(s\) \['unit'\]"):
        layers.Dense(3, unit=4)


def test_recurrent_constants_are_refused_by_name():
    inp = tf.keras.Input(shape=(None, 3))
    with pytest.raises(NotImplementedError, match="constants"):
        layers.GRU(2)(inp, constants=[inp])


def test_models_must_start_from_keras_inputs():
    x = tf.placeholder(tf.float32, [None, 3])
    with pytest.raises(ValueError, match="Input tensors to a Model must come from `tf.keras.Input`"):
        tf.keras.Model(x, layers.Dense(2)(x))
    a, b = tf.keras.Input(shape=(3,)), tf.keras.Input(shape=(3,))
    with pytest.raises(ValueError, match="Graph disconnected"):
        tf.keras.Model(a, layers.add([layers.Dense(2)(a), layers.Dense(2)(b)]))


def test_missing_tf_keras_symbols_raise_the_tf1_aware_error():
    with pytest.raises(AttributeError, match="tf.keras.datasets downloads its data, and flowstack makes no "
                                             "downloads"):
        tf.keras.datasets.mnist.load_data()
    with pytest.raises(AttributeError, match=r"tf.keras.callbacks.RemoteMonitor is a TensorFlow 1.x symbol that "
                                             r"flowstack does not support"):
        tf.keras.callbacks.RemoteMonitor
    with pytest.raises(AttributeError, match=r"tf.keras.layers.Dense2 does not exist .*nearest supported: "
                                             r"tf.keras.layers.Dense"):
        tf.keras.layers.Dense2
    assert not hasattr(tf.keras.utils, "get_file")


def test_summary_of_an_unbuilt_model_says_to_build_it():
    with pytest.raises(ValueError, match="This model has not yet been built"):
        tf.keras.Sequential([layers.Dense(2)]).summary()
