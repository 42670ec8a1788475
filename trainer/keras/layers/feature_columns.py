"""``DenseFeatures``: feature columns (``tf.feature_column``) as a Keras layer over a dict of features."""

from __future__ import annotations

import trainer as tf
from trainer.keras.engine.base_layer import Layer

__all__ = ["DenseFeatures"]


class DenseFeatures(Layer):
    """``tf.feature_column.input_layer(features, feature_columns)``; an embedding column's table becomes
    the layer's weight."""

    def __init__(self, feature_columns, trainable: bool = True, name: str | None = None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.feature_columns = list(feature_columns)

    def __call__(self, features, *args, **kwargs):
        if not isinstance(features, dict):
            raise ValueError(f"DenseFeatures {self.name!r} expects a dict of features (column key -> tensor), "
                             f"got {type(features).__name__}")
        known = {id(v) for v in tf.global_variables()}
        with tf.name_scope(self.name):
            out = tf.feature_column.input_layer(features, self.feature_columns, trainable=self.trainable)
        for v in tf.global_variables():
            if id(v) not in known:
                (self._trainable_weights if v.trainable else self._non_trainable_weights).append(v)
        self.built = True
        return out

    def get_config(self) -> dict:
        raise NotImplementedError("DenseFeatures' feature columns cannot be serialized in flowstack; rebuild the "
                                  "layer in code and load its weights with load_weights")
