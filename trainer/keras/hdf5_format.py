"""Keras' HDF5 files (``model.save("m.h5")``, ``save_weights("w.h5")``), in the layout TF 1.x's Keras
writes, through h5py (the ``train`` extra), so weights and models move between flowstack and Keras.

A weights group holds ``layer_names`` (the layers with weights, in order) and, per layer, a group whose
``weight_names`` attribute lists that layer's weights in order, each a dataset at that name. A model
file adds ``model_config`` and ``training_config`` (JSON) at its root and keeps the weights under
``model_weights``. Loading matches layers by order (or by name) and checks every weight's shape.
"""

from __future__ import annotations

import json
import os

import numpy as np

from trainer.keras import backend as K

__all__ = ["HDF5_SUFFIXES", "is_hdf5_path", "load_model_from_hdf5", "load_weights_from_hdf5", "save_model_to_hdf5",
           "save_weights_to_hdf5"]

HDF5_SUFFIXES = (".h5", ".hdf5")
KERAS_VERSION = "2.2.4-tf"  # what TF 1.15's Keras stamps its files with


def is_hdf5_path(path: str) -> bool:
    return str(path).endswith(HDF5_SUFFIXES)


def _h5py():
    try:
        import h5py
    except ImportError:
        from trainer.keras.saving import ModelFileError

        raise ModelFileError("Keras' HDF5 (.h5) files need h5py: pip install 'flowstack[train]' (or h5py)") from None
    return h5py


def _open(path: str, mode: str):
    from trainer.keras.saving import ModelFileError

    h5py = _h5py()
    if mode == "r" and not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file")
    try:
        return h5py.File(path, mode)
    except OSError as e:
        raise ModelFileError(f"{path}: not a readable HDF5 file ({e})") from None


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _weight_name(variable) -> str:
    return f"{variable.op.name}:0"


def _write_weights(group, model) -> None:
    layers = [layer for layer in model.layers if layer.weights]
    group.attrs["layer_names"] = [layer.name.encode("utf-8") for layer in layers]
    group.attrs["backend"] = b"tensorflow"
    group.attrs["keras_version"] = KERAS_VERSION.encode()
    values = iter(K.batch_get_value([w for layer in layers for w in layer.weights]))
    for layer in layers:
        layer_group = group.create_group(layer.name)
        names = [_weight_name(w) for w in layer.weights]
        layer_group.attrs["weight_names"] = [n.encode("utf-8") for n in names]
        for name in names:
            value = next(values)
            dataset = layer_group.create_dataset(name, value.shape, dtype=value.dtype)
            if value.shape:
                dataset[:] = value
            else:
                dataset[()] = value


def _read_weights(group, path: str) -> list[tuple[str, list[np.ndarray]]]:
    """[(layer name, [(weight name, array)] in order)] of a weights group."""
    from trainer.keras.saving import ModelFileError

    if "layer_names" not in group.attrs:
        raise ModelFileError(f"{path}: no layer_names attribute; not a Keras weights file")
    saved = []
    for layer_name in (_text(n) for n in group.attrs["layer_names"]):
        if layer_name not in group:
            raise ModelFileError(f"{path}: layer {layer_name!r} is listed but its group is missing")
        layer_group = group[layer_name]
        names = [_text(n) for n in layer_group.attrs.get("weight_names", [])]
        try:
            saved.append((layer_name, [(n, np.asarray(layer_group[n][()])) for n in names]))
        except KeyError as e:
            raise ModelFileError(f"{path}: layer {layer_name!r} lists a weight that is missing: {e}") from None
    return [(name, values) for name, values in saved if values]


def save_weights_to_hdf5(model, path: str) -> None:
    tmp = path + ".tmp"
    with _open(tmp, "w") as f:
        _write_weights(f, model)
    os.replace(tmp, path)


def load_weights_from_hdf5(model, path: str, by_name: bool = False) -> None:
    """Weights from a ``save_weights`` file or a whole-model file (its ``model_weights``)."""
    with _open(path, "r") as f:
        group = f["model_weights"] if "model_weights" in f and "layer_names" not in f.attrs else f
        saved = _read_weights(group, path)
    from trainer.keras.saving import assign_layer_weights

    assign_layer_weights(model, saved, path, by_name)


def save_model_to_hdf5(model, path: str, training_config: dict | None) -> None:
    tmp = path + ".tmp"
    with _open(tmp, "w") as f:
        f.attrs["keras_version"] = KERAS_VERSION.encode()
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = model.to_json().encode("utf-8")
        if training_config is not None:
            f.attrs["training_config"] = json.dumps(training_config).encode("utf-8")
        _write_weights(f.create_group("model_weights"), model)
    os.replace(tmp, path)


def load_model_from_hdf5(path: str) -> tuple[dict, dict | None, list]:
    """(model config, training config or None, saved weights) of a ``model.save`` HDF5 file."""
    from trainer.keras.saving import ModelFileError

    with _open(path, "r") as f:
        if "model_config" not in f.attrs:
            raise ModelFileError(f"{path}: no model_config attribute; a weights-only file (use load_weights)")
        try:
            config = json.loads(_text(f.attrs["model_config"]))
            training = json.loads(_text(f.attrs["training_config"])) if "training_config" in f.attrs else None
        except ValueError as e:
            raise ModelFileError(f"{path}: its model_config or training_config is not JSON: {e}") from None
        saved = _read_weights(f["model_weights"] if "model_weights" in f else f, path)
    return config, training, saved
