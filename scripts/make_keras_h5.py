"""Write the Keras-made HDF5 model that tests/tf1_compat/test_keras_hdf5.py loads.

Run with Keras installed, outside flowstack's environment (see scripts/make_tf_checkpoints.py):

    /tmp/tfenv/bin/python scripts/make_keras_h5.py tests/tf1_compat/keras_files

A Dense-BatchNormalization-Dense model with seeded weights, saved by Keras' model.save in its HDF5
layout, and ``dense_bn.npz``: five inputs and Keras' predictions for them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(10, activation="softmax")])
    rng = np.random.default_rng(1)
    model.set_weights([rng.standard_normal(w.shape).astype("float32") * 0.1 + (1 if "variance" in w.path else 0)
                       for w in model.weights])
    model.save(str(out / "dense_bn.h5"))
    x = rng.random((5, 64), dtype=np.float32)
    np.savez(out / "dense_bn.npz", x=x, predictions=model.predict(x, verbose=0))


if __name__ == "__main__":
    main(sys.argv[1])
