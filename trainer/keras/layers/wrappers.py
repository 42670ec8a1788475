"""``TimeDistributed`` (a layer applied to every timestep) and ``Bidirectional`` (a recurrent layer run
forwards and backwards, outputs merged)."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer
from trainer.keras.serialization import to_json_value

__all__ = ["Bidirectional", "TimeDistributed", "Wrapper"]


def _layer(layer):
    if isinstance(layer, dict):
        from trainer.keras.layers import deserialize

        return deserialize(layer)
    return layer


class Wrapper(Layer):
    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = _layer(layer)

    @property
    def trainable_weights(self) -> list:
        return self.layer.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return self.layer.non_trainable_weights if self.trainable else self.layer.weights

    @property
    def losses(self) -> list:
        return self.layer.losses + list(self._losses)

    @property
    def updates(self) -> list:
        return self.layer.updates + list(self._updates)

    def get_config(self) -> dict:
        config = super().get_config()
        config["layer"] = to_json_value(self.layer)
        return config


class TimeDistributed(Wrapper):
    """``layer`` on each [batch, features...] slice of a [batch, time, features...] input (time known)."""

    def call(self, inputs, training=None, mask=None):
        shape = K.int_shape(inputs)
        steps, inner = shape[1], shape[2:]
        if steps is None or None in inner:
            raise ValueError(f"TimeDistributed {self.name!r}: needs known time and feature sizes, got {shape}")
        flat = tf.reshape(inputs, (-1,) + tuple(inner))
        with tf.name_scope(self.layer.name):
            if not self.layer.built:
                self.layer.build((None,) + tuple(inner))
                self.layer.built = True
            y = self.layer.call(flat)
        out_inner = K.int_shape(y)[1:]
        return tf.reshape(y, (-1, steps) + tuple(out_inner))


class Bidirectional(Wrapper):
    """``merge_mode``: "concat" (default), "sum", "mul", "ave", or None (a list of both)."""

    MERGES = {"concat": lambda f, b: K.concatenate([f, b], -1), "sum": lambda f, b: f + b,
              "mul": lambda f, b: f * b, "ave": lambda f, b: (f + b) / 2.0}

    def __init__(self, layer, merge_mode: str | None = "concat", weights=None, backward_layer=None, **kwargs):
        layer = _layer(layer)
        if merge_mode not in self.MERGES and merge_mode is not None:
            raise ValueError(f"Invalid merge mode {merge_mode!r}. Merge mode should be one of "
                             "{'sum', 'mul', 'ave', 'concat', None}")
        super().__init__(layer, **kwargs)
        if layer.return_state:
            raise NotImplementedError("Bidirectional over a layer with return_state=True is not built in flowstack")
        self.merge_mode = merge_mode
        config = layer.get_config()
        self.forward_layer = type(layer).from_config({**config, "name": "forward_" + layer.name})
        backward = backward_layer or type(layer).from_config({**config, "name": "backward_" + layer.name,
                                                              "go_backwards": not layer.go_backwards})
        self.backward_layer = _layer(backward)
        self.return_sequences = layer.return_sequences
        self.supports_masking = True
        if weights is not None:
            self._initial_weights = weights

    @property
    def trainable_weights(self) -> list:
        return self.forward_layer.trainable_weights + self.backward_layer.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.forward_layer.weights + self.backward_layer.weights
        return self.forward_layer.non_trainable_weights + self.backward_layer.non_trainable_weights

    def call(self, inputs, training=None, mask=None):
        outputs = []
        for layer in (self.forward_layer, self.backward_layer):
            with tf.name_scope(layer.name):
                if not layer.built:
                    layer.build(K.int_shape(inputs))
                    layer.built = True
                outputs.append(layer.call(inputs, mask=mask))
        forward, backward = outputs
        if self.return_sequences:
            backward = K.reverse(backward, 1)
        if self.merge_mode is None:
            return [forward, backward]
        return self.MERGES[self.merge_mode](forward, backward)

    def compute_mask(self, inputs, mask=None):
        mask = mask[0] if isinstance(mask, list) else mask
        return mask if self.return_sequences else None

    def get_config(self) -> dict:
        config = super().get_config()
        config.pop("weights", None)
        config.pop("backward_layer", None)
        return config
