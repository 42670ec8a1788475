"""Pooling layers (channels_last): Max/AveragePooling1D/2D and the global poolings."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer
from trainer.keras.layers.conv import check_channels_last, check_padding, normalize_tuple

__all__ = ["AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "GlobalAveragePooling1D",
           "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
           "GlobalMaxPooling3D", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D"]


class Pooling2D(Layer):
    pool_mode = "max"

    def __init__(self, pool_size=(2, 2), strides=None, padding: str = "valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last(type(self).__name__, data_format)
        self.pool_size = normalize_tuple(pool_size, 2, "pool_size")
        self.strides = normalize_tuple(strides if strides is not None else self.pool_size, 2, "strides")
        self.padding = check_padding(type(self).__name__, padding)
        self.data_format = data_format

    def call(self, inputs):
        return K.pool2d(inputs, self.pool_size, self.strides, self.padding, pool_mode=self.pool_mode)


class MaxPooling2D(Pooling2D):
    pool_mode = "max"


class AveragePooling2D(Pooling2D):
    pool_mode = "avg"


class Pooling3D(Layer):
    pool_mode = "max"

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding: str = "valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last(type(self).__name__, data_format)
        self.pool_size = normalize_tuple(pool_size, 3, "pool_size")
        self.strides = normalize_tuple(strides if strides is not None else self.pool_size, 3, "strides")
        self.padding = check_padding(type(self).__name__, padding)
        self.data_format = data_format

    def call(self, inputs):
        return K.pool3d(inputs, self.pool_size, self.strides, self.padding, pool_mode=self.pool_mode)


class MaxPooling3D(Pooling3D):
    pool_mode = "max"


class AveragePooling3D(Pooling3D):
    pool_mode = "avg"


class Pooling1D(Layer):
    pool_mode = "max"

    def __init__(self, pool_size: int = 2, strides=None, padding: str = "valid", data_format="channels_last",
                 **kwargs):
        super().__init__(**kwargs)
        check_channels_last(type(self).__name__, data_format)
        self.pool_size = normalize_tuple(pool_size, 1, "pool_size")
        self.strides = normalize_tuple(strides if strides is not None else self.pool_size, 1, "strides")
        self.padding = check_padding(type(self).__name__, padding)
        self.data_format = data_format

    def call(self, inputs):
        y = K.pool2d(tf.expand_dims(inputs, 1), (1,) + self.pool_size, (1,) + self.strides, self.padding,
                     pool_mode=self.pool_mode)
        return tf.squeeze(y, [1])


class MaxPooling1D(Pooling1D):
    pool_mode = "max"


class AveragePooling1D(Pooling1D):
    pool_mode = "avg"


class GlobalPooling(Layer):
    axes = (1, 2)
    reduce = staticmethod(tf.reduce_mean)

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last(type(self).__name__, data_format)
        self.data_format = data_format

    def call(self, inputs):
        return type(self).reduce(inputs, axis=list(self.axes))


class GlobalAveragePooling2D(GlobalPooling):
    axes, reduce = (1, 2), staticmethod(tf.reduce_mean)


class GlobalMaxPooling2D(GlobalPooling):
    axes, reduce = (1, 2), staticmethod(tf.reduce_max)


class GlobalAveragePooling1D(GlobalPooling):
    axes, reduce = (1,), staticmethod(tf.reduce_mean)


class GlobalMaxPooling1D(GlobalPooling):
    axes, reduce = (1,), staticmethod(tf.reduce_max)


class GlobalAveragePooling3D(GlobalPooling):
    axes, reduce = (1, 2, 3), staticmethod(tf.reduce_mean)


class GlobalMaxPooling3D(GlobalPooling):
    axes, reduce = (1, 2, 3), staticmethod(tf.reduce_max)
