"""The Keras ``Layer``: weights made in ``build``, ops made in ``call``, and the record of each call
(a ``Node``) from which a functional ``Model`` reads its topology.

In graph mode a Keras tensor is an ordinary trainer Tensor; what makes it a Keras tensor is its
history, ``(layer, node_index, tensor_index)``, kept here beside the tensor (tensors have fixed
slots), and likewise its mask. A layer's variables are ordinary graph variables (trainable
collection, Saver, exporter).
"""

from __future__ import annotations

import inspect
import weakref
from typing import NamedTuple

import numpy as np

import trainer as tf
from trainer.keras import backend as K
from trainer.keras import constraints, initializers, regularizers
from trainer.keras.serialization import config_from_attributes, snake_case

__all__ = ["InputSpec", "KerasHistory", "Layer", "Node", "keras_history", "keras_mask", "to_list",
           "unique_layer_name", "unpack"]


class KerasHistory(NamedTuple):
    layer: "Layer"
    node_index: int
    tensor_index: int


_HISTORY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# The layer calls in progress, outermost first, each with the updates made during it (a nested model's
# layers' too) as (update, the layers called between that call and the update's layer, that layer): a
# model trains with the updates of its own calls only, and not those of layers frozen at compile time.
_UPDATE_RECORDERS: list[tuple["Layer", list]] = []
_MASKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def keras_history(tensor) -> KerasHistory | None:
    return _HISTORY.get(tensor) if isinstance(tensor, tf.Tensor) else None


def keras_mask(tensor) -> object:
    return _MASKS.get(tensor) if isinstance(tensor, tf.Tensor) else None


def to_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def unpack(xs: list) -> object:
    return xs[0] if len(xs) == 1 else xs


def unique_layer_name(prefix: str) -> str:
    """``prefix``, then ``prefix_1``, ``prefix_2``, ... within the default graph, as TF 1.15's Keras names layers."""
    uid = K.get_uid(prefix)
    return prefix if uid == 1 else f"{prefix}_{uid - 1}"


def _accepts(fn, argument: str) -> bool:
    params = inspect.signature(fn).parameters
    return argument in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


class InputSpec:
    """What a layer expects of its input (kept for API compatibility; shapes are checked by the ops)."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None, axes=None):
        self.dtype, self.shape, self.ndim = dtype, shape, ndim
        self.max_ndim, self.min_ndim, self.axes = max_ndim, min_ndim, axes or {}


class Node:
    """One call of ``outbound_layer``: the tensors it took and the tensors it made."""

    def __init__(self, outbound_layer: "Layer", input_tensors: list, output_tensors: list, arguments: dict,
                 updates: list | None = None):
        self.outbound_layer = outbound_layer
        self.recorded_updates = updates or []  # (update, [inner layers it went through])
        self.input_tensors = input_tensors
        self.output_tensors = output_tensors
        self.arguments = arguments
        self.inbound_history = [keras_history(t) for t in input_tensors]

    @property
    def updates(self) -> list:
        """The updates this call made, but those of layers now frozen (``trainable = False``), as Keras."""
        if not self.outbound_layer.trainable:
            return []
        return [u for u, chain in self.recorded_updates if all(layer.trainable for layer in chain)]


# Arguments every layer takes (Keras' base-layer keywords).
_BASE_KEYWORDS = {"input_shape", "batch_input_shape", "batch_size", "input_dim", "weights", "activity_regularizer",
                  "input_length"}


class Layer:
    """Subclass it with ``build(input_shape)`` (``add_weight``) and ``call(inputs, training=None, mask=None)``."""

    def __init__(self, trainable: bool = True, name: str | None = None, dtype=None, **kwargs):
        unknown = set(kwargs) - _BASE_KEYWORDS
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(unknown)}")
        self.trainable = trainable
        self.name = name or unique_layer_name(snake_case(type(self).__name__))
        self.dtype = dtype or K.floatx()
        self.built = False
        self.supports_masking = False
        self.input_spec = None
        self.inbound_nodes: list[Node] = []
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._losses: list = []
        self._updates: list = []
        self._initial_weights = kwargs.get("weights")
        self.activity_regularizer = regularizers.get(kwargs.get("activity_regularizer"))
        if "batch_input_shape" in kwargs or "input_shape" in kwargs or "input_dim" in kwargs:
            if "batch_input_shape" in kwargs:
                batch_shape = tuple(kwargs["batch_input_shape"])
            else:
                shape = tuple(kwargs["input_shape"]) if "input_shape" in kwargs else (kwargs["input_dim"],)
                if "input_length" in kwargs and "input_shape" not in kwargs:
                    shape = (kwargs["input_length"],)
                batch_shape = (kwargs.get("batch_size"),) + shape
            self.batch_input_shape = batch_shape
        elif "input_length" in kwargs and kwargs["input_length"] is not None:
            self.batch_input_shape = (None, kwargs["input_length"])

    # -- to override ---------------------------------------------------------------------
    def build(self, input_shape) -> None:
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_mask(self, inputs, mask=None):
        return mask if self.supports_masking else None

    # -- weights -------------------------------------------------------------------------
    def add_weight(self, name: str, shape, dtype=None, initializer=None, regularizer=None, trainable: bool = True,
                   constraint=None, **kwargs):
        """A graph variable named ``<layer scope>/<name>``, its penalty added to ``losses``."""
        dtype = np.dtype(dtype or self.dtype)
        init = initializers.get(initializer) or initializers.glorot_uniform()
        shape = tuple(int(d) for d in shape)
        constraint = constraints.get(constraint)
        var = tf.Variable(lambda: init(shape, dtype=dtype), trainable=trainable, name=name, constraint=constraint)
        (self._trainable_weights if trainable else self._non_trainable_weights).append(var)
        regularizer = regularizers.get(regularizer)
        if regularizer is not None:
            with tf.name_scope(name + "/Regularizer"):
                self.add_loss(regularizer(var))
        return var

    add_variable = add_weight  # TF 1.x's older name

    def add_loss(self, losses, inputs=None) -> None:
        self._losses.extend(to_list(losses))

    def add_update(self, updates, inputs=None) -> None:
        updates = to_list(updates)
        self._updates.extend(updates)
        for level, (_, recorded) in enumerate(_UPDATE_RECORDERS):
            chain = [layer for layer, _ in _UPDATE_RECORDERS[level + 1:]] + [self]
            recorded.extend((u, chain) for u in updates)

    @property
    def trainable_weights(self) -> list:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    @property
    def weights(self) -> list:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def losses(self) -> list:
        return list(self._losses)

    @property
    def updates(self) -> list:
        return list(self._updates) if self.trainable else []  # a frozen layer's statistics stay (TF 1.15)

    def get_weights(self) -> list:
        return K.batch_get_value(self.weights)

    def set_weights(self, weights) -> None:
        params = self.weights
        if len(params) != len(weights):
            raise ValueError(f"You called `set_weights(weights)` on layer {self.name!r} with a weight list of length "
                             f"{len(weights)}, but the layer was expecting {len(params)} weights.")
        for p, w in zip(params, weights):
            if tuple(p.shape) != tuple(np.shape(w)):
                raise ValueError(f"Layer weight shape {tuple(p.shape)} not compatible with provided weight shape "
                                 f"{np.shape(w)} (layer {self.name!r}, weight {p.op.name})")
        K.batch_set_value(list(zip(params, weights)))

    def count_params(self) -> int:
        if not self.built:
            raise ValueError(f"You tried to call `count_params` on {self.name}, but the layer isn't built.")
        return int(sum(np.prod(tuple(w.shape)) for w in self.weights))

    # -- calling ---------------------------------------------------------------------------
    def __call__(self, inputs, *args, **kwargs):
        graph = tf.get_default_graph()
        flat = [x if isinstance(x, tf.Tensor) else tf.convert_to_tensor(x) for x in to_list(inputs)]
        inputs = flat if isinstance(inputs, (list, tuple)) else flat[0]
        masks = [keras_mask(x) for x in flat]
        previous_mask = None if all(m is None for m in masks) else unpack(masks)
        recorded: list = []
        _UPDATE_RECORDERS.append((self, recorded))
        try:
            outputs, outs, output_mask = self._call_in_scope(graph, inputs, flat, previous_mask, args, kwargs)
        finally:
            _UPDATE_RECORDERS.pop()
        self._add_node(flat, outs, {k: v for k, v in kwargs.items() if not isinstance(v, tf.Tensor)}, recorded)
        for o, m in zip(outs, to_list(output_mask) if output_mask is not None else [None] * len(outs)):
            if m is not None:
                _MASKS[o] = m
        return outs if isinstance(outputs, (list, tuple)) else outs[0]

    def _call_in_scope(self, graph, inputs, flat: list, previous_mask, args, kwargs):
        """Build (on the first call) and call in the layer's name scope: (outputs, their list, their mask)."""
        with graph.name_scope(self.name):
            if not self.built:
                shapes = [K.int_shape(x) for x in flat]
                self.build(unpack(shapes))
                self.built = True
                if self._initial_weights is not None:
                    self.set_weights(self._initial_weights)
                    self._initial_weights = None
            call_kwargs = dict(kwargs)
            if previous_mask is not None and "mask" not in call_kwargs and _accepts(self.call, "mask"):
                call_kwargs["mask"] = previous_mask
            outputs = self.call(inputs, *args, **call_kwargs)
            outs = to_list(outputs)
            # an output that is an input (Dropout at inference, a linear Activation) gets its own history
            outs = [tf.identity(o) if any(o is x for x in flat) else o for o in outs]
            output_mask = self.compute_mask(inputs, previous_mask)
            if self.activity_regularizer is not None:
                for o in outs:
                    batch = tf.cast(tf.shape(o)[0], o.dtype)
                    self.add_loss(self.activity_regularizer(o) / batch)
        return outputs, outs, output_mask

    def _add_node(self, inputs: list, outputs: list, arguments: dict, updates: list | None = None) -> None:
        node_index = len(self.inbound_nodes)
        self.inbound_nodes.append(Node(self, inputs, outputs, arguments, updates))
        for i, o in enumerate(outputs):
            _HISTORY[o] = KerasHistory(self, node_index, i)

    def apply(self, inputs, *args, **kwargs):
        return self(inputs, *args, **kwargs)

    @property
    def input(self):
        return unpack(self._node_tensors("input_tensors"))

    @property
    def output(self):
        return unpack(self._node_tensors("output_tensors"))

    @property
    def input_shape(self):
        return unpack([K.int_shape(t) for t in self._node_tensors("input_tensors")])

    @property
    def output_shape(self):
        return unpack([K.int_shape(t) for t in self._node_tensors("output_tensors")])

    def _node_tensors(self, which: str) -> list:
        if not self.inbound_nodes:
            raise AttributeError(f"Layer {self.name} is not connected, no input to return.")
        return getattr(self.inbound_nodes[0], which)

    def get_input_at(self, node_index: int):
        return unpack(self.inbound_nodes[node_index].input_tensors)

    def get_output_at(self, node_index: int):
        return unpack(self.inbound_nodes[node_index].output_tensors)

    # -- config ----------------------------------------------------------------------------
    def get_config(self) -> dict:
        """The constructor's arguments, read off the attributes of the same names."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": np.dtype(self.dtype).name}
        if getattr(self, "batch_input_shape", None) is not None:
            config["batch_input_shape"] = list(self.batch_input_shape)
        config.update(config_from_attributes(self))
        return config

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)
