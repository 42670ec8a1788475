"""Convolution layers (channels_last): Conv1D, Conv2D, Conv2DTranspose, SeparableConv2D,
DepthwiseConv2D, and the shape layers ZeroPadding, UpSampling and Cropping. Kernels are stored as
Keras stores them: Conv2D [kh, kw, in, out], Conv2DTranspose [kh, kw, out, in], DepthwiseConv2D
[kh, kw, in, depth_multiplier]."""

from __future__ import annotations


import trainer as tf
from trainer.keras import backend as K, constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer
from trainer.keras.layers.core import set_kernel_options
from trainer.ops import make_op

__all__ = ["Conv1D", "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Cropping1D", "Cropping2D",
           "Cropping3D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "UpSampling1D", "UpSampling2D",
           "UpSampling3D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D"]


def normalize_tuple(value, n: int, name: str) -> tuple:
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"The `{name}` argument must be a tuple of {n} integers. Received: {value}")
    return value


def check_channels_last(layer: str, data_format) -> None:
    if data_format not in (None, "channels_last"):
        raise NotImplementedError(f"{layer}(data_format={data_format!r}) is not built in flowstack; "
                                  "use channels_last (NHWC)")


def check_padding(layer: str, padding: str, allowed=("valid", "same")) -> str:
    padding = padding.lower()
    if padding not in allowed:
        raise ValueError(f"{layer}: padding must be one of {allowed}, got {padding!r}")
    return padding


class Conv(Layer):
    """The shared parts of Conv1D and Conv2D: a kernel [*kernel_size, in, filters] and a bias."""

    rank = 2

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid", data_format=None,
                 dilation_rate=1, activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        name = type(self).__name__
        check_channels_last(name, data_format)
        self.filters = int(filters)
        self.kernel_size = normalize_tuple(kernel_size, self.rank, "kernel_size")
        self.strides = normalize_tuple(strides, self.rank, "strides")
        allowed = ("valid", "same", "causal") if self.rank == 1 else ("valid", "same")
        self.padding = check_padding(name, padding, allowed)
        self.data_format = "channels_last"
        self.dilation_rate = normalize_tuple(dilation_rate, self.rank, "dilation_rate")
        set_kernel_options(self, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                           bias_regularizer, kernel_constraint, bias_constraint)

    def kernel_shape(self, channels: int) -> tuple:
        return self.kernel_size + (channels, self.filters)

    def build(self, input_shape):
        channels = input_shape[-1]
        if channels is None:
            raise ValueError(f"The channel dimension of the inputs to {self.name} should be defined. Found `None`.")
        self.kernel = self.add_weight("kernel", self.kernel_shape(channels), initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight("bias", (self.filters,), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def convolve(self, inputs):
        return K.conv2d(inputs, self.kernel, self.strides, self.padding, dilation_rate=self.dilation_rate)

    def call(self, inputs):
        y = self.convolve(inputs)
        if self.use_bias:
            y = tf.nn.bias_add(y, self.bias)
        return self.activation(y)


class Conv2D(Conv):
    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid", data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, **kwargs)


class Conv1D(Conv):
    rank = 1

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid", data_format="channels_last",
                 dilation_rate=1, activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, **kwargs)

    def convolve(self, inputs):
        padding = self.padding
        if padding == "causal":  # left-pad so output t sees inputs up to t only
            inputs = K.temporal_padding(inputs, (self.dilation_rate[0] * (self.kernel_size[0] - 1), 0))
            padding = "valid"
        x = tf.expand_dims(inputs, 1)
        y = K.conv2d(x, tf.expand_dims(self.kernel, 0), (1, self.strides[0]), padding,
                     dilation_rate=(1, self.dilation_rate[0]))
        return tf.squeeze(y, [1])


class Conv3D(Conv):
    """Kernel [kd, kh, kw, in, filters] over [batch, depth, height, width, channels]."""

    rank = 3

    def __init__(self, filters: int, kernel_size, strides=(1, 1, 1), padding: str = "valid", data_format=None,
                 dilation_rate=(1, 1, 1), activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, **kwargs)
        if self.dilation_rate != (1, 1, 1):
            raise NotImplementedError("Conv3D(dilation_rate != 1) is not built in flowstack")

    def convolve(self, inputs):
        return K.conv3d(inputs, self.kernel, self.strides, self.padding)


class Conv3DTranspose(Conv3D):
    """The gradient of a Conv3D with respect to its input; kernel [kd, kh, kw, filters, in]."""

    def kernel_shape(self, channels: int) -> tuple:
        return self.kernel_size + (self.filters, channels)

    def convolve(self, inputs):
        spatial = K.int_shape(inputs)[1:4]
        if None in spatial:
            raise ValueError(f"Conv3DTranspose {self.name!r} needs known spatial dimensions, got {spatial}")
        out = [d * s if self.padding == "same" else (d - 1) * s + k
               for d, s, k in zip(spatial, self.strides, self.kernel_size)]
        return tf.nn.conv3d_transpose(inputs, self.kernel, [-1, *out, self.filters], [1, *self.strides, 1],
                                      self.padding.upper())


class Conv2DTranspose(Conv2D):
    """The gradient of a Conv2D with respect to its input; kernel [kh, kw, filters, in]."""

    def kernel_shape(self, channels: int) -> tuple:
        return self.kernel_size + (self.filters, channels)

    def convolve(self, inputs):
        if self.dilation_rate != (1, 1):
            raise NotImplementedError("Conv2DTranspose(dilation_rate != 1) is not built in flowstack")
        nchw = tf.transpose(inputs, [0, 3, 1, 2])
        iohw = tf.transpose(self.kernel, [3, 2, 0, 1])
        attrs = {"strides": list(self.strides), "kernel_shape": list(self.kernel_size),
                 "auto_pad": "SAME_UPPER" if self.padding == "same" else "VALID"}
        y = make_op("ConvTranspose", [nchw, iohw], attrs).outputs[0]
        return tf.transpose(y, [0, 2, 3, 1])


class DepthwiseConv2D(Conv2D):
    """Each input channel convolved with its own ``depth_multiplier`` filters."""

    def __init__(self, kernel_size, strides=(1, 1), padding: str = "valid", depth_multiplier: int = 1,
                 data_format=None, activation=None, use_bias: bool = True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(1, kernel_size, strides, padding, data_format, (1, 1), activation, use_bias,
                         depthwise_initializer, bias_initializer, depthwise_regularizer, bias_regularizer,
                         activity_regularizer, depthwise_constraint, bias_constraint, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = self.kernel_initializer
        self.depthwise_regularizer = self.kernel_regularizer
        self.depthwise_constraint = self.kernel_constraint

    def build(self, input_shape):
        channels = input_shape[-1]
        depthwise_shape = self.kernel_size + (channels, self.depth_multiplier)
        self.depthwise_kernel = self.add_weight("depthwise_kernel", depthwise_shape,
                                                initializer=self.depthwise_initializer,
                                                regularizer=self.depthwise_regularizer,
                                                constraint=self.depthwise_constraint)
        self.filters = channels * self.depth_multiplier
        self.bias = self.add_weight("bias", (self.filters,), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def convolve(self, inputs):
        return tf.nn.depthwise_conv2d(inputs, self.depthwise_kernel, [1, *self.strides, 1], self.padding.upper())


class SeparableConv2D(Conv2D):
    """A depthwise convolution, then a 1x1 convolution: depthwise [kh, kw, in, dm], pointwise [1, 1, in*dm, out]."""

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier: int = 1, activation=None, use_bias: bool = True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias,
                         "glorot_uniform", bias_initializer, None, bias_regularizer, activity_regularizer, None,
                         bias_constraint, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = initializers.get(depthwise_initializer)
        self.pointwise_initializer = initializers.get(pointwise_initializer)
        self.depthwise_regularizer = regularizers.get(depthwise_regularizer)
        self.pointwise_regularizer = regularizers.get(pointwise_regularizer)
        self.depthwise_constraint = constraints.get(depthwise_constraint)
        self.pointwise_constraint = constraints.get(pointwise_constraint)

    def kernel_shapes(self, channels: int) -> tuple[tuple, tuple]:
        """(depthwise, pointwise) kernel shapes, as Keras lays them out: [kh, kw, in, dm], [1, 1, in*dm, out]."""
        return self.kernel_size + (channels, self.depth_multiplier), (1, 1, channels * self.depth_multiplier,
                                                                      self.filters)

    def build(self, input_shape):
        depthwise_shape, pointwise_shape = self.kernel_shapes(input_shape[-1])
        self.depthwise_kernel = self.add_weight("depthwise_kernel", depthwise_shape,
                                                initializer=self.depthwise_initializer,
                                                regularizer=self.depthwise_regularizer,
                                                constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight("pointwise_kernel", pointwise_shape,
                                                initializer=self.pointwise_initializer,
                                                regularizer=self.pointwise_regularizer,
                                                constraint=self.pointwise_constraint)
        self.bias = self.add_weight("bias", (self.filters,), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def convolve(self, inputs):
        return tf.nn.separable_conv2d(inputs, self.depthwise_kernel, self.pointwise_kernel, [1, *self.strides, 1],
                                      self.padding.upper())


class SeparableConv1D(SeparableConv2D):
    """SeparableConv2D over a [batch, steps, channels] input seen as one row: depthwise [k, in, dm],
    pointwise [1, in*dm, out]."""

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid", data_format=None,
                 dilation_rate=1, depth_multiplier: int = 1, activation=None, use_bias: bool = True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, pointwise_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, **kwargs):
        k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
        st = strides if isinstance(strides, int) else strides[0]
        super().__init__(filters, (1, k), (1, st), padding, data_format, (1, 1), depth_multiplier, activation,
                         use_bias, depthwise_initializer, pointwise_initializer, bias_initializer,
                         depthwise_regularizer, pointwise_regularizer, bias_regularizer, activity_regularizer,
                         depthwise_constraint, pointwise_constraint, bias_constraint, **kwargs)
        if dilation_rate not in (1, (1,), [1]):
            raise NotImplementedError("SeparableConv1D(dilation_rate != 1) is not built in flowstack")
        self.kernel_size, self.strides, self.dilation_rate = (k,), (st,), (1,)

    def kernel_shapes(self, channels: int) -> tuple[tuple, tuple]:
        """Depthwise [k, in, dm] and pointwise [1, in*dm, out], Keras' 1-D layout."""
        return (self.kernel_size[0], channels, self.depth_multiplier), (1, channels * self.depth_multiplier,
                                                                        self.filters)

    def convolve(self, inputs):
        y = tf.nn.separable_conv2d(tf.expand_dims(inputs, 1), tf.expand_dims(self.depthwise_kernel, 0),
                                   tf.expand_dims(self.pointwise_kernel, 0), [1, 1, self.strides[0], 1],
                                   self.padding.upper())
        return tf.squeeze(y, [1])


class ZeroPadding1D(Layer):
    def __init__(self, padding=1, **kwargs):
        super().__init__(**kwargs)
        self.padding = normalize_tuple(padding, 2, "padding")

    def call(self, inputs):
        return K.temporal_padding(inputs, self.padding)


class ZeroPadding2D(Layer):
    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("ZeroPadding2D", data_format)
        if isinstance(padding, int):
            padding = ((padding, padding), (padding, padding))
        elif all(isinstance(p, int) for p in padding):
            padding = ((padding[0], padding[0]), (padding[1], padding[1]))
        self.padding = tuple(tuple(int(v) for v in p) for p in padding)
        self.data_format = data_format

    def call(self, inputs):
        return K.spatial_2d_padding(inputs, self.padding, "channels_last")


def _upsample(x, axis: int, factor: int):
    """Nearest-neighbour repetition along ``axis`` (a static size)."""
    return K.repeat_elements(x, factor, axis) if factor != 1 else x


class UpSampling1D(Layer):
    def __init__(self, size: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.size = int(size)

    def call(self, inputs):
        return _upsample(inputs, 1, self.size)


class UpSampling2D(Layer):
    def __init__(self, size=(2, 2), data_format=None, interpolation: str = "nearest", **kwargs):
        super().__init__(**kwargs)
        check_channels_last("UpSampling2D", data_format)
        if interpolation != "nearest":
            raise NotImplementedError(f"UpSampling2D(interpolation={interpolation!r}) is not built in flowstack")
        self.size = normalize_tuple(size, 2, "size")
        self.data_format, self.interpolation = data_format, interpolation

    def call(self, inputs):
        return _upsample(_upsample(inputs, 1, self.size[0]), 2, self.size[1])


class Cropping1D(Layer):
    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = normalize_tuple(cropping, 2, "cropping")

    def call(self, inputs):
        length = K.int_shape(inputs)[1]
        return inputs[:, self.cropping[0]:length - self.cropping[1], :]


class Cropping2D(Layer):
    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("Cropping2D", data_format)
        if isinstance(cropping, int):
            cropping = ((cropping, cropping), (cropping, cropping))
        elif all(isinstance(c, int) for c in cropping):
            cropping = ((cropping[0], cropping[0]), (cropping[1], cropping[1]))
        self.cropping = tuple(tuple(int(v) for v in c) for c in cropping)
        self.data_format = data_format

    def call(self, inputs):
        _, h, w, _ = K.int_shape(inputs)
        (top, bottom), (left, right) = self.cropping
        return inputs[:, top:h - bottom, left:w - right, :]




def _triples(value, name: str) -> tuple:
    """An int, three ints, or three (before, after) pairs, as ((d0, d1), (h0, h1), (w0, w1))."""
    if isinstance(value, int):
        return ((value, value),) * 3
    if all(isinstance(v, int) for v in value):
        return tuple((int(v), int(v)) for v in normalize_tuple(value, 3, name))
    return tuple(tuple(int(v) for v in pair) for pair in value)


class ZeroPadding3D(Layer):
    def __init__(self, padding=(1, 1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("ZeroPadding3D", data_format)
        self.padding, self.data_format = _triples(padding, "padding"), data_format

    def call(self, inputs):
        return K.spatial_3d_padding(inputs, self.padding)


class UpSampling3D(Layer):
    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("UpSampling3D", data_format)
        self.size, self.data_format = normalize_tuple(size, 3, "size"), data_format

    def call(self, inputs):
        for axis, factor in zip((1, 2, 3), self.size):
            inputs = _upsample(inputs, axis, factor)
        return inputs


class Cropping3D(Layer):
    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("Cropping3D", data_format)
        self.cropping, self.data_format = _triples(cropping, "cropping"), data_format

    def call(self, inputs):
        _, d, h, w, _ = K.int_shape(inputs)
        (d0, d1), (h0, h1), (w0, w1) = self.cropping
        return inputs[:, d0:d - d1, h0:h - h1, w0:w - w1, :]
