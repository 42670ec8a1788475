"""Saving and loading Keras models without pickle: model.save/load_model round trips give identical
predictions (and stay compiled); corrupt or mismatched files are refused naming the file and weight."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers
ModelFileError = tf.keras.models.load_model.__globals__["ModelFileError"]


def _trained(digits) -> tf.keras.Model:
    tf.set_random_seed(0)
    np.random.seed(0)
    inp = tf.keras.Input(shape=(64,))
    h = layers.Dense(32, activation="relu", kernel_regularizer=tf.keras.regularizers.l2(1e-4))(inp)
    h = layers.BatchNormalization()(h)
    out = layers.Dense(10, activation="softmax")(layers.Dropout(0.1)(h))
    model = tf.keras.Model(inp, out)
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"], digits["y_train"], epochs=2, verbose=0)
    return model


def test_save_and_load_model_give_identical_predictions_and_a_compiled_model(digits, tmp_path):
    model = _trained(digits)
    want = model.predict(digits["x_test"])
    model.save(str(tmp_path / "model"))
    assert sorted(os.listdir(tmp_path / "model")) == ["model.json", "weights.npz"]
    tf.reset_default_graph()
    restored = tf.keras.models.load_model(str(tmp_path / "model"))
    np.testing.assert_array_equal(restored.predict(digits["x_test"]), want)
    assert [l.name for l in restored.layers] == [l.name for l in model.layers]
    restored.fit(digits["x_train"], digits["y_train"], epochs=1, verbose=0)  # compiled from the saved config
    assert restored.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1] > 0.8


def test_weights_round_trip_by_order_and_by_name(digits, tmp_path):
    model = _trained(digits)
    path = str(tmp_path / "weights")
    model.save_weights(path)
    assert os.path.exists(path)  # the exact name, no suffix added
    twin = _trained(digits)  # same architecture, other layer names
    twin.load_weights(path)
    np.testing.assert_array_equal(twin.predict(digits["x_test"]), model.predict(digits["x_test"]))
    partial = tf.keras.Sequential([layers.Dense(32, input_shape=(64,), name=model.layers[1].name)])
    partial.load_weights(path, by_name=True)
    np.testing.assert_array_equal(partial.get_weights()[0], model.layers[1].get_weights()[0])


def test_corrupt_and_mismatched_files_are_refused_by_name(digits, tmp_path):
    model = _trained(digits)
    model.save(str(tmp_path / "model"))
    weights = tmp_path / "model" / "weights.npz"
    good = weights.read_bytes()
    weights.write_bytes(b"not a zip archive")
    with pytest.raises(ModelFileError, match="weights.npz: not a flowstack Keras weights file"):
        tf.keras.models.load_model(str(tmp_path / "model"))
    weights.write_bytes(good)
    with np.load(str(weights), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    kernel = [k for k in arrays if k.endswith(":kernel")][0]
    arrays[kernel] = arrays[kernel][:, :5]
    with open(weights, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ModelFileError, match=f"weight '{kernel}' has shape \\(64, 5\\)"):
        tf.keras.models.load_model(str(tmp_path / "model"))
    del arrays[kernel]
    with open(weights, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ModelFileError, match=f"weight '{kernel}' .* is missing"):
        tf.keras.models.load_model(str(tmp_path / "model"))
    (tmp_path / "model" / "model.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="model.json: not a flowstack Keras model file"):
        tf.keras.models.load_model(str(tmp_path / "model"))
    with pytest.raises(ModelFileError, match="nowhere: not a saved Keras model folder"):
        tf.keras.models.load_model(str(tmp_path / "nowhere"))
    other = tf.keras.Sequential([layers.Dense(3, input_shape=(64,))])
    with pytest.raises(ModelFileError, match="containing 3 layers into a model with 1 layers"):
        model.save_weights(str(tmp_path / "fresh.npz"))
        other.load_weights(str(tmp_path / "fresh.npz"))


def test_a_lambda_layer_is_saved_by_name_and_needs_custom_objects(tmp_path):
    def double(x):
        return x * 2.0

    inp = tf.keras.Input(shape=(3,))
    model = tf.keras.Model(inp, layers.Lambda(double)(layers.Dense(2)(inp)))
    model.save(str(tmp_path / "m"))
    config = json.loads((tmp_path / "m" / "model.json").read_text())
    assert config["model_config"]["config"]["layers"][2]["config"]["function"] == "double"
    with pytest.raises(ValueError, match="Lambda: unknown function 'double'"):
        tf.keras.models.load_model(str(tmp_path / "m"))
    restored = tf.keras.models.load_model(str(tmp_path / "m"), custom_objects={"double": double})
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(restored.predict(x), model.predict(x))
    with pytest.raises(ValueError, match="anonymous function, which cannot be saved"):
        tf.keras.Model(inp, layers.Lambda(lambda t: t + 1.0)(inp)).save(str(tmp_path / "anon"))


def test_tf_initializer_objects_are_saved_by_their_arguments(tmp_path):
    model = tf.keras.Sequential([
        layers.Dense(3, input_shape=(2,), kernel_initializer=tf.truncated_normal_initializer(stddev=0.1),
                     bias_initializer=tf.constant_initializer(0.5)),
        layers.Dense(2, kernel_initializer=tf.glorot_uniform_initializer(seed=3))])
    model.save(str(tmp_path / "m"))
    restored = tf.keras.models.load_model(str(tmp_path / "m"))
    assert restored.layers[0].kernel_initializer.stddev == 0.1
    np.testing.assert_allclose(restored.predict(np.ones((1, 2))), model.predict(np.ones((1, 2))), rtol=1e-6)
    assert restored.predict_classes(np.ones((4, 2))).shape == (4,)
