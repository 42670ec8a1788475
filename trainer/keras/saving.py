"""Saving Keras models and weights without pickle.

``model.save(path)`` writes a folder: ``model.json`` (the architecture, as ``to_json``, and the
compile arguments) and ``weights.npz``. ``save_weights(path)`` writes that npz alone. The npz holds
one array per weight, keyed ``<layer>/<index>:<weight>``, and ``__manifest__``: a JSON list of the
layers with weights, in order, and their keys (a NumPy string array, so ``np.load`` runs with
``allow_pickle=False``). Loading checks every weight's presence and shape and names the file and the
weight on any mismatch. A path ending ``.h5``/``.hdf5`` is Keras' HDF5 layout instead
(trainer/keras/hdf5_format.py), read and written as TF 1.x's Keras does.
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from trainer.keras import backend as K, hdf5_format

__all__ = ["ModelFileError", "assign_layer_weights", "load_model", "load_weights", "model_from_config", "model_from_json", "model_from_yaml",
           "save_model", "save_weights", "training_config"]

MODEL_FILE, WEIGHTS_FILE, MANIFEST = "model.json", "weights.npz", "__manifest__"
FORMAT = "flowstack-keras"


class ModelFileError(ValueError):
    """A model or weights file that is missing, corrupt, or does not match the model."""


def _refuse_keras_zip(path: str) -> None:
    if str(path).endswith(".keras"):
        raise ModelFileError(f"{path}: the .keras zip format is Keras 3's, not TF 1.x's; save to a folder "
                             "(no suffix) or to an .h5 file")


def _weighted_layers(model) -> list:
    return [layer for layer in model.layers if layer.weights]


def _leaf(variable) -> str:
    return variable.op.name.rsplit("/", 1)[-1]


def save_weights(model, filepath) -> None:
    filepath = os.fspath(filepath)
    _refuse_keras_zip(filepath)
    if hdf5_format.is_hdf5_path(filepath):
        return hdf5_format.save_weights_to_hdf5(model, filepath)
    values = K.batch_get_value(model.weights)
    by_variable = {id(v): value for v, value in zip(model.weights, values)}
    arrays, manifest = {}, []
    for layer in _weighted_layers(model):
        keys = []
        for i, w in enumerate(layer.weights):
            key = f"{layer.name}/{i}:{_leaf(w)}"
            arrays[key] = by_variable[id(w)]
            keys.append(key)
        manifest.append([layer.name, keys])
    arrays[MANIFEST] = np.asarray(json.dumps({"format": FORMAT, "version": 1, "layers": manifest}))
    directory = os.path.dirname(os.path.abspath(filepath))
    os.makedirs(directory, exist_ok=True)
    tmp = filepath + ".tmp"
    with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a bare name
        np.savez(f, **arrays)
    os.replace(tmp, filepath)


def _read_weights(filepath: str) -> tuple[dict, list]:
    if not os.path.exists(filepath):
        raise ModelFileError(f"{filepath}: no such weights file")
    try:
        with np.load(filepath, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise ModelFileError(f"{filepath}: not a flowstack Keras weights file (a NumPy .npz archive): {e}") from None
    if MANIFEST not in arrays:
        raise ModelFileError(f"{filepath}: the weights archive has no {MANIFEST} entry; it was not written by "
                             "save_weights")
    try:
        manifest = json.loads(str(arrays.pop(MANIFEST)))
        layers = manifest["layers"]
    except (ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{filepath}: its {MANIFEST} entry is corrupt: {e}") from None
    return arrays, layers


def load_weights(model, filepath, by_name: bool = False) -> None:
    """Weights saved by ``save_weights``: layer by layer in order, or by layer name (``by_name``)."""
    filepath = os.fspath(filepath)
    _refuse_keras_zip(filepath)
    if hdf5_format.is_hdf5_path(filepath):
        return hdf5_format.load_weights_from_hdf5(model, filepath, by_name)
    arrays, saved = _read_weights(filepath)
    layers = []
    for name, keys in saved:
        missing = [key for key in keys if key not in arrays]
        if missing:
            raise ModelFileError(f"{filepath}: weight {missing[0]!r} (of layer {name!r}) is missing")
        layers.append((name, [(key, arrays[key]) for key in keys]))
    assign_layer_weights(model, layers, filepath, by_name)


def assign_layer_weights(model, saved: list, path: str, by_name: bool) -> None:
    """Set the weights of ``model``'s layers that have weights from ``saved`` ([(layer name, [(weight
    label, array)])]), matched in order or by name; the counts and every shape are checked first,
    naming the file, the layer and the weight."""
    layers = _weighted_layers(model)
    if by_name:
        saved_by_name = dict(saved)
        pairs = [(layer, saved_by_name[layer.name]) for layer in layers if layer.name in saved_by_name]
    else:
        if len(saved) != len(layers):
            raise ModelFileError(f"{path}: you are trying to load a weight file containing {len(saved)} layers "
                                 f"into a model with {len(layers)} layers")
        pairs = [(layer, values) for layer, (_, values) in zip(layers, saved)]
    assignments = []
    for layer, values in pairs:
        if len(values) != len(layer.weights):
            raise ModelFileError(f"{path}: layer {layer.name!r} has {len(layer.weights)} weights, the file holds "
                                 f"{len(values)} for it")
        for w, (label, value) in zip(layer.weights, values):
            if tuple(value.shape) != tuple(w.shape):
                raise ModelFileError(f"{path}: weight {label!r} has shape {value.shape}, layer {layer.name!r} "
                                     f"expects {tuple(w.shape)} for {w.op.name}")
            assignments.append((w, value))
    K.batch_set_value(assignments)


def training_config(model) -> dict | None:
    """What ``compile`` was given, as JSON (None for an uncompiled model or a tf.train optimizer)."""
    from trainer.keras import losses, metrics, optimizers
    from trainer.keras.serialization import to_json_value

    if not model.compiled or isinstance(model.optimizer, optimizers.TFOptimizer):
        return None
    loss = model.loss
    serial_loss = {k: losses.serialize(v) for k, v in loss.items()} if isinstance(loss, dict) else \
        [losses.serialize(v) for v in loss] if isinstance(loss, (list, tuple)) else losses.serialize(loss)
    serial_metrics = to_json_value([metrics.serialize(m) for m in model.metrics]) \
        if isinstance(model.metrics, (list, tuple)) else to_json_value(model.metrics)
    return {"optimizer_config": optimizers.serialize(model.optimizer), "loss": serial_loss,
            "metrics": serial_metrics, "loss_weights": model.loss_weights}


def save_model(model, filepath, overwrite: bool = True, include_optimizer: bool = True) -> None:
    """A folder with ``model.json`` and ``weights.npz`` (an ``.h5`` path: Keras' HDF5 file); the
    optimizer's configuration (not its slots) is kept."""
    filepath = os.fspath(filepath)
    _refuse_keras_zip(filepath)
    if os.path.exists(filepath) and not overwrite:
        raise ModelFileError(f"{filepath} exists and overwrite=False")
    if hdf5_format.is_hdf5_path(filepath):
        return hdf5_format.save_model_to_hdf5(model, filepath, training_config(model) if include_optimizer else None)
    if os.path.isfile(filepath):
        raise ModelFileError(f"{filepath} is a file; model.save writes a folder (model.json, weights.npz)")
    config = json.loads(model.to_json())
    document = {"format": FORMAT, "version": 1, "model_config": config,
                "training_config": training_config(model) if include_optimizer else None}
    os.makedirs(filepath, exist_ok=True)
    save_weights(model, os.path.join(filepath, WEIGHTS_FILE))
    tmp = os.path.join(filepath, MODEL_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(document, f)
    os.replace(tmp, os.path.join(filepath, MODEL_FILE))


def model_from_config(config: dict, custom_objects=None) -> object:
    from trainer.keras.layers import deserialize

    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"model_from_config expects a dict with 'class_name' and 'config', got {type(config)}")
    return deserialize(config, custom_objects)


def model_from_json(json_string: str, custom_objects=None) -> object:
    try:
        config = json.loads(json_string)
    except ValueError as e:
        raise ValueError(f"model_from_json: not JSON: {e}") from None
    return model_from_config(config, custom_objects)


def model_from_yaml(yaml_string: str, custom_objects=None) -> object:
    """A model from ``to_yaml``'s text (needs PyYAML, as Keras does)."""
    try:
        import yaml
    except ImportError:
        raise ImportError("Requires yaml module installed (`pip install pyyaml`).") from None
    return model_from_config(yaml.safe_load(yaml_string), custom_objects)


def load_model(filepath, custom_objects=None, compile: bool = True):  # noqa: A002 - Keras' argument name
    """A model saved by ``model.save``: its architecture, weights and (if ``compile``) compile arguments."""
    from trainer.keras.serialization import CustomObjectScope

    filepath = os.fspath(filepath)
    _refuse_keras_zip(filepath)
    if hdf5_format.is_hdf5_path(filepath):
        config, training, saved = hdf5_format.load_model_from_hdf5(filepath)
        with CustomObjectScope(custom_objects or {}):
            model = model_from_config(config, custom_objects)
            assign_layer_weights(model, saved, filepath, by_name=False)
            if compile and training:
                _compile(model, training, custom_objects)
        return model
    if not os.path.isdir(filepath):
        raise ModelFileError(f"{filepath}: not a saved Keras model folder (model.save writes a folder with "
                             f"{MODEL_FILE} and {WEIGHTS_FILE})")
    model_path = os.path.join(filepath, MODEL_FILE)
    try:
        with open(model_path) as f:
            document = json.load(f)
        config = document["model_config"]
    except FileNotFoundError:
        raise ModelFileError(f"{model_path}: missing; {filepath} was not written by model.save") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"{model_path}: not a flowstack Keras model file: {e}") from None
    if document.get("format") != FORMAT or document.get("version", 0) > 1:
        raise ModelFileError(f"{model_path}: format {document.get('format')!r} version {document.get('version')} "
                             f"is not {FORMAT!r} version 1 or older")
    with CustomObjectScope(custom_objects or {}):
        model = model_from_config(config, custom_objects)
        load_weights(model, os.path.join(filepath, WEIGHTS_FILE))
        training = document.get("training_config")
        if compile and training:
            _compile(model, training, custom_objects)
    return model


def _compile(model, training: dict, custom_objects) -> None:
    from trainer.keras import optimizers

    model.compile(optimizer=optimizers.deserialize(training["optimizer_config"], custom_objects),
                  loss=training["loss"], metrics=training["metrics"], loss_weights=training.get("loss_weights"))
