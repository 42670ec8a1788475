"""``Embedding``: rows of an [input_dim, output_dim] table; ``mask_zero`` masks index 0."""

from __future__ import annotations

import trainer as tf
from trainer.keras import constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer

__all__ = ["Embedding"]


class Embedding(Layer):
    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer="uniform", embeddings_regularizer=None,
                 activity_regularizer=None, embeddings_constraint=None, mask_zero: bool = False, input_length=None,
                 **kwargs):
        if input_length is not None and "input_shape" not in kwargs and "batch_input_shape" not in kwargs:
            kwargs["input_shape"] = tuple(input_length) if isinstance(input_length, (list, tuple)) else (input_length,)
        kwargs.setdefault("dtype", "int32")
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer)
        self.embeddings_constraint = constraints.get(embeddings_constraint)
        self.mask_zero, self.input_length = mask_zero, input_length

    def build(self, input_shape):
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim), dtype="float32",
                                          initializer=self.embeddings_initializer,
                                          regularizer=self.embeddings_regularizer,
                                          constraint=self.embeddings_constraint)
        self.built = True

    def call(self, inputs):
        ids = inputs if inputs.dtype in (tf.int32, tf.int64) else tf.cast(inputs, tf.int32)
        return tf.nn.embedding_lookup(self.embeddings, ids)

    def compute_mask(self, inputs, mask=None):
        return tf.not_equal(inputs, tf.cast(0, inputs.dtype)) if self.mask_zero else None
