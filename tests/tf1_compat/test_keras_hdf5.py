"""Keras' HDF5 files: ``model.save("m.h5")``, ``save_weights("w.h5")`` and their loading, as TF 1.x's
Keras writes them, and weights a real Keras saved (``keras_files/``, scripts/make_keras_h5.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trainer as tf
from trainer.keras.saving import ModelFileError

pytest.importorskip("h5py")
layers = tf.keras.layers
KERAS_FILES = Path(__file__).parent / "keras_files"


def dense_bn():
    return tf.keras.Sequential([layers.Dense(32, activation="relu", input_shape=(64,)), layers.BatchNormalization(),
                                layers.Dense(10, activation="softmax")])


def test_a_model_saved_to_h5_loads_whole_and_compiled(digits, tmp_path) -> None:
    model = dense_bn()
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"], digits["y_train"], epochs=3, verbose=0)
    model.save(str(tmp_path / "model.h5"))
    loaded = tf.keras.models.load_model(str(tmp_path / "model.h5"))
    np.testing.assert_array_equal(loaded.predict(digits["x_test"]), model.predict(digits["x_test"]))
    assert loaded.evaluate(digits["x_test"], digits["y_test"], verbose=0)[1] > 0.85  # compiled from the file

    model.save_weights(str(tmp_path / "weights.h5"))
    fresh = dense_bn()
    fresh.load_weights(str(tmp_path / "weights.h5"))
    np.testing.assert_array_equal(fresh.predict(digits["x_test"]), model.predict(digits["x_test"]))
    by_name = tf.keras.Sequential([layers.Dense(32, activation="relu", input_shape=(64,), name="dense")])
    by_name.load_weights(str(tmp_path / "weights.h5"), by_name=True)
    np.testing.assert_array_equal(by_name.get_weights()[0], model.get_weights()[0])


def test_weights_keras_saved_give_keras_predictions() -> None:
    expected = np.load(KERAS_FILES / "dense_bn.npz")
    model = dense_bn()
    model.load_weights(str(KERAS_FILES / "dense_bn.h5"))
    np.testing.assert_allclose(model.predict(expected["x"]), expected["predictions"], rtol=1e-5, atol=1e-6)


def test_bad_hdf5_files_are_named(tmp_path) -> None:
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(ModelFileError, match="junk.h5: not a readable HDF5 file"):
        dense_bn().load_weights(str(tmp_path / "junk.h5"))
    model = dense_bn()
    model.save_weights(str(tmp_path / "weights.h5"))
    with pytest.raises(ModelFileError, match="weights-only file"):
        tf.keras.models.load_model(str(tmp_path / "weights.h5"))
    narrow = tf.keras.Sequential([layers.Dense(16, input_shape=(64,)), layers.BatchNormalization(), layers.Dense(10)])
    with pytest.raises(ModelFileError, match=r"weight 'dense\w*/kernel:0' has shape \(64, 32\), layer 'dense\w*'"):
        narrow.load_weights(str(tmp_path / "weights.h5"))
    with pytest.raises(ModelFileError, match="containing 3 layers into a model with 1 layers"):
        tf.keras.Sequential([layers.Dense(32, input_shape=(64,))]).load_weights(str(tmp_path / "weights.h5"))
    with pytest.raises(ModelFileError, match="no such file"):
        tf.keras.models.load_model(str(tmp_path / "missing.h5"))
    with pytest.raises(ModelFileError, match="Keras 3's"):
        model.save(str(tmp_path / "model.keras"))
