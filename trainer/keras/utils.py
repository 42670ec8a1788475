"""``tf.keras.utils``: ``to_categorical``, ``normalize``, ``Sequence``, custom-object scopes."""

from __future__ import annotations

import numpy as np

from trainer.keras.enqueuers import GeneratorEnqueuer, OrderedEnqueuer, SequenceEnqueuer
from trainer.keras.image_utils import array_to_img, img_to_array, load_img, save_img
from trainer.keras.serialization import CustomObjectScope, get_custom_objects

__all__ = ["CustomObjectScope", "GeneratorEnqueuer", "OrderedEnqueuer", "Progbar", "Sequence", "SequenceEnqueuer",
           "array_to_img", "img_to_array", "load_img", "save_img", "custom_object_scope", "deserialize_keras_object",
           "get_custom_objects", "get_registered_name", "get_registered_object", "get_source_inputs", "normalize",
           "register_keras_serializable", "serialize_keras_object", "to_categorical"]

custom_object_scope = CustomObjectScope


def to_categorical(y, num_classes=None, dtype="float32") -> np.ndarray:
    """Class indices as one-hot rows (the class axis appended, a trailing axis of 1 dropped)."""
    y = np.asarray(y, dtype="int")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    y = y.ravel()
    num_classes = num_classes or int(np.max(y)) + 1
    out = np.zeros((len(y), num_classes), dtype=dtype)
    out[np.arange(len(y)), y] = 1
    return out.reshape(shape + (num_classes,))


def normalize(x, axis: int = -1, order: int = 2) -> np.ndarray:
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


class Sequence:
    """Batches by index: subclass with ``__len__`` (batches per epoch) and ``__getitem__(i)`` -> (x, y)."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def on_epoch_end(self) -> None:
        pass

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


class Progbar:
    """A minimal text progress bar: ``update(current, values)`` prints ``current/target`` and the values."""

    def __init__(self, target, width: int = 30, verbose: int = 1, interval: float = 0.05, stateful_metrics=None,
                 unit_name: str = "step"):
        self.target, self.verbose = target, verbose

    def update(self, current, values=None) -> None:
        if self.verbose:
            text = " - ".join(f"{k}: {v:.4f}" for k, v in (values or []))
            print(f"{current}/{self.target} {text}".rstrip())

    def add(self, n, values=None) -> None:
        self.update(n, values)


def get_source_inputs(tensor, layer=None, node_index=None) -> list:
    """The Input tensors ``tensor`` was computed from."""
    from trainer.keras.engine.base_layer import keras_history
    from trainer.keras.engine.input_layer import InputLayer

    history = keras_history(tensor)
    if history is None:
        return [tensor]
    node = history.layer.inbound_nodes[history.node_index]
    if isinstance(history.layer, InputLayer):
        return [tensor]
    found = []
    for t in node.input_tensors:
        for s in get_source_inputs(t):
            if all(s is not f for f in found):
                found.append(s)
    return found


def register_keras_serializable(package: str = "Custom", name: str | None = None) -> object:
    """A class decorator: the class is found by ``"<package>>name"`` when loading, without custom_objects."""
    def register(cls):
        key = f"{package}>{name or cls.__name__}"
        if key in get_custom_objects():
            raise ValueError(f"{key} has already been registered to {get_custom_objects()[key]}")
        get_custom_objects()[key] = cls
        get_custom_objects().setdefault(name or cls.__name__, cls)
        _REGISTERED_NAMES[cls] = key
        return cls
    return register


_REGISTERED_NAMES: dict = {}


def get_registered_name(obj) -> str:
    """The name ``obj`` was registered under, else its ``__name__``."""
    return _REGISTERED_NAMES.get(obj, getattr(obj, "__name__", str(obj)))


def get_registered_object(name: str, custom_objects=None, module_objects=None) -> object:
    """``name`` looked up in the custom-object scopes, then ``custom_objects``, then ``module_objects``."""
    from trainer.keras.serialization import custom_objects as scoped

    for table in (scoped(), custom_objects or {}, module_objects or {}):
        if name in table:
            return table[name]
    return None


def serialize_keras_object(instance) -> object:
    from trainer.keras.serialization import to_json_value

    return to_json_value(instance)


def deserialize_keras_object(identifier, module_objects=None, custom_objects=None,
                             printable_module_name: str = "object"):
    from trainer.keras.serialization import deserialize

    return deserialize(identifier, module_objects or {}, printable_module_name, custom_objects)


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.utils", name, globals())
