"""``tf.layers.separable_conv1d``: TF 1.15's depthwise-then-pointwise 1-D convolution layer, run as
the 2-D one on a height-1 image. Its variables are TF's: ``depthwise_kernel`` [k, in, multiplier],
``pointwise_kernel`` [1, in * multiplier, filters] and ``bias`` [filters], in the layer's scope
(``separable_conv1d``, ``separable_conv1d_1``, ... or ``name``)."""

from __future__ import annotations

from trainer import initializers
from trainer.array_ops import expand_dims, squeeze
from trainer.layers import glorot_uniform_hwio
from trainer.nn import bias_add, separable_conv2d
from trainer.ops import convert_to_tensor, transpose
from trainer.variable_scopes import get_variable, variable_scope

__all__ = ["separable_conv1d"]


def _single(value, what: str) -> int:
    values = [value] if isinstance(value, int) else list(value)
    if len(values) != 1 or int(values[0]) < 1:
        raise ValueError(f"separable_conv1d: {what} must be one positive integer, got {value!r}")
    return int(values[0])


def separable_conv1d(inputs, filters: int, kernel_size, strides=1, padding: str = "valid",
                     data_format: str = "channels_last", dilation_rate=1, depth_multiplier: int = 1, activation=None,
                     use_bias: bool = True, depthwise_initializer=None, pointwise_initializer=None,
                     bias_initializer=None, depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                     pointwise_constraint=None, bias_constraint=None, trainable: bool = True, name=None, reuse=None):
    """[batch, width, channels] (``channels_last``) or [batch, channels, width] -> the same layout
    with ``filters`` channels."""
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"separable_conv1d: data_format must be 'channels_last' or 'channels_first', got "
                         f"{data_format!r}")
    if str(padding).lower() not in ("same", "valid"):
        raise ValueError(f"separable_conv1d: padding must be 'same' or 'valid', got {padding!r}")
    k, stride, rate = _single(kernel_size, "kernel_size"), _single(strides, "strides"), _single(dilation_rate,
                                                                                               "dilation_rate")
    if stride > 1 and rate > 1:
        raise ValueError("separable_conv1d: strides > 1 and dilation_rate > 1 cannot be combined")
    x = convert_to_tensor(inputs)
    if x.shape is None or len(x.shape) != 3:
        raise ValueError(f"separable_conv1d: inputs must be 3-D, got shape {x.shape}")
    if data_format == "channels_first":
        x = transpose(x, [0, 2, 1])
    channels = x.shape[-1]
    if channels is None:
        raise ValueError("separable_conv1d: the channel dimension of the inputs should be defined. Found `None`.")
    with x.graph.as_default(), variable_scope(name if name is not None or not reuse else "separable_conv1d",
                                              default_name="separable_conv1d", reuse=reuse or None):
        depthwise = get_variable("depthwise_kernel", [k, channels, depth_multiplier], dtype=x.dtype,
                                 initializer=depthwise_initializer or glorot_uniform_hwio,
                                 regularizer=depthwise_regularizer, trainable=trainable)
        pointwise = get_variable("pointwise_kernel", [1, channels * depth_multiplier, filters], dtype=x.dtype,
                                 initializer=pointwise_initializer or glorot_uniform_hwio,
                                 regularizer=pointwise_regularizer, trainable=trainable)
        y = separable_conv2d(expand_dims(x, 1), expand_dims(depthwise, 0), expand_dims(pointwise, 0),
                             [1, 1, stride, 1], str(padding).upper(), rate=[1, rate])
        if use_bias:
            bias = get_variable("bias", [filters], dtype=x.dtype, initializer=bias_initializer or initializers.Zeros(),
                                regularizer=bias_regularizer, trainable=trainable)
            y = bias_add(y, bias)
        y = squeeze(y, [1])
        if activation is not None:
            y = activation(y)
    return transpose(y, [0, 2, 1]) if data_format == "channels_first" else y
