"""More of ``tf.contrib.layers`` (and so of ``tf.contrib.slim``): convolutions and pools of any
rank, group and instance normalization, maxout, dense_to_sparse, the combined L1/L2 regularizer
and the activation summaries.

They follow ``trainer.contrib.layers``' conventions: layers are arg_scope-able and file their
variables and outputs in the collections the caller names; variable names and default scopes are
TensorFlow's (``Conv/weights``, ``GroupNorm/gamma``, ``InstanceNorm/beta``), so checkpoints of
slim-era models restore by name.
"""

from __future__ import annotations

import numpy as np

from trainer import initializers, summary
from trainer.array_ops import reduce_sum
from trainer.contrib.layers import RELU_DEFAULT, activate, contrib_layer, make_regularizer, normalized_or_biased
from trainer.graph import GraphKeys, get_default_graph
from trainer.ops import add_n, convert_to_tensor, make_op, multiply
from trainer.variable_scopes import get_variable, variable_scope

__all__ = [
    "avg_pool3d", "conv1d", "conv3d", "convolution", "convolution1d", "convolution3d", "dense_to_sparse",
    "group_norm", "instance_norm", "l1_l2_regularizer", "max_pool3d", "maxout", "pool", "summarize_activation",
    "summarize_activations", "summarize_collection", "summarize_tensor", "summarize_tensors",
]


def _per_axis(value, rank: int, what: str) -> list[int]:
    """An int or a list of ``rank`` ints as that list."""
    if isinstance(value, (int, np.integer)):
        return [int(value)] * rank
    values = [int(v) for v in value]
    if len(values) != rank:
        raise ValueError(f"{what} must be an int or {rank} ints for a {rank}-D convolution, got {list(value)}")
    return values


def _channels_last(data_format, rank: int, what: str) -> None:
    allowed = (None, "NWC", "NHWC", "NDHWC")
    if data_format not in allowed or (data_format is not None and len(data_format) != rank + 2):
        raise ValueError(f"contrib.layers.{what}: only channels-last data (N, spatial..., C) is supported, "
                         f"got data_format={data_format!r} for a {rank}-D input")


def _convolution(inputs, num_outputs: int, kernel_size, stride, padding: str, data_format, rate, activation_fn,
                 normalizer_fn, normalizer_params, weights_initializer, weights_regularizer, biases_initializer,
                 biases_regularizer, reuse, trainable: bool, scope, conv_dims: int | None, what: str):
    from trainer.nn import convolution as nn_convolution

    x = convert_to_tensor(inputs)
    if x.shape is None:
        raise ValueError(f"contrib.layers.{what}: the input's rank must be known")
    rank = len(x.shape) - 2
    if rank not in (1, 2, 3) or (conv_dims is not None and rank != conv_dims):
        want = f"{conv_dims + 2}-D" if conv_dims is not None else "3-D to 5-D"
        raise ValueError(f"contrib.layers.{what}: the input must be {want} (batch, spatial..., channels), "
                         f"got shape {tuple(x.shape)}")
    _channels_last(data_format, rank, what)
    kernel = _per_axis(kernel_size, rank, "kernel_size")
    strides, rates = _per_axis(stride, rank, "stride"), _per_axis(rate, rank, "rate")
    with variable_scope(scope, default_name="Conv", reuse=reuse):
        w = get_variable("weights", kernel + [x.shape[-1], num_outputs], dtype=x.dtype,
                         initializer=weights_initializer or initializers.GlorotUniform(),
                         regularizer=weights_regularizer, trainable=trainable)
        y = nn_convolution(x, w, padding=padding.upper(), strides=strides, dilation_rate=rates)
        return activate(normalized_or_biased(y, num_outputs, normalizer_fn, normalizer_params, biases_initializer,
                                               biases_regularizer, trainable), activation_fn)


def _convolution_layer(conv_dims: int | None, what: str):
    @contrib_layer
    def layer(inputs, num_outputs: int, kernel_size, stride=1, padding: str = "SAME", data_format=None, rate=1,
              activation_fn=RELU_DEFAULT, normalizer_fn=None, normalizer_params=None, weights_initializer=None,
              weights_regularizer=None, biases_initializer=initializers.Zeros, biases_regularizer=None, reuse=None,
              variables_collections=None, outputs_collections=None, trainable: bool = True, scope=None):
        return _convolution(inputs, num_outputs, kernel_size, stride, padding, data_format, rate, activation_fn,
                            normalizer_fn, normalizer_params, weights_initializer, weights_regularizer,
                            biases_initializer, biases_regularizer, reuse, trainable, scope, conv_dims, what)

    layer.__name__ = layer.__qualname__ = what
    layer.__doc__ = (f"A {'N' if conv_dims is None else conv_dims}-D channels-last convolution with ``Conv/weights`` "
                     "[kernel..., in, out] (and ``Conv/biases``, or the normalizer instead); 'SAME' padding and relu "
                     "by default, as TensorFlow's.")
    return layer


convolution = _convolution_layer(None, "convolution")
convolution1d = conv1d = _convolution_layer(1, "convolution1d")
convolution3d = conv3d = _convolution_layer(3, "convolution3d")


@contrib_layer
def pool(inputs, kernel_size, pooling_type: str, padding: str = "VALID", data_format=None, dilation_rate=1, stride=1,
         outputs_collections=None, scope=None):
    """An N-D channels-last max or average pool ("MAX" / "AVG") over windows of ``kernel_size``."""
    from trainer.nn import pool as nn_pool

    x = convert_to_tensor(inputs)
    rank = len(x.shape) - 2
    _channels_last(data_format, rank, "pool")
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"contrib.layers.pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}")
    return nn_pool(x, _per_axis(kernel_size, rank, "kernel_size"), pooling_type, padding.upper(),
                   dilation_rate=_per_axis(dilation_rate, rank, "dilation_rate"),
                   strides=_per_axis(stride, rank, "stride"))


def _pool3d(kind: str):
    @contrib_layer
    def layer(inputs, kernel_size, stride=2, padding: str = "VALID", data_format: str = "NDHWC",
              outputs_collections=None, scope=None):
        from trainer import nn

        if data_format != "NDHWC":
            raise ValueError(f"contrib.layers.{kind}3d: only data_format='NDHWC' is supported, got {data_format!r}")
        kernel, strides = _per_axis(kernel_size, 3, "kernel_size"), _per_axis(stride, 3, "stride")
        return getattr(nn, f"{kind}3d")(convert_to_tensor(inputs), [1, *kernel, 1], [1, *strides, 1], padding.upper())

    layer.__name__ = layer.__qualname__ = f"{kind}3d"
    return layer


max_pool3d = _pool3d("max_pool")
avg_pool3d = _pool3d("avg_pool")


def _scale_and_shift(x, axis: int, center: bool, scale: bool, param_initializers, trainable: bool):
    """``beta`` and ``gamma`` over the channel axis, shaped to broadcast against ``x``."""
    from trainer.ops import reshape

    channels = x.shape[axis]
    inits = param_initializers or {}
    shape = [1] * len(x.shape)
    shape[axis] = channels
    beta = gamma = None
    if center:
        beta = reshape(get_variable("beta", [channels], dtype=x.dtype, trainable=trainable,
                                    initializer=inits.get("beta", initializers.Zeros)), shape)
    if scale:
        gamma = reshape(get_variable("gamma", [channels], dtype=x.dtype, trainable=trainable,
                                     initializer=inits.get("gamma", initializers.Ones)), shape)
    return beta, gamma


@contrib_layer
def group_norm(inputs, groups: int = 32, channels_axis: int = -1, reduction_axes=(-3, -2), center: bool = True,
               scale: bool = True, epsilon: float = 1e-6, activation_fn=None, param_initializers=None, reuse=None,
               variables_collections=None, outputs_collections=None, trainable: bool = True, scope=None,
               mean_close_to_zero: bool = False):
    """Group normalization (Wu and He, 2018): the channels split into ``groups``, each group normalized
    over itself and ``reduction_axes``; ``GroupNorm/beta`` and ``gamma`` per channel."""
    from trainer.nn import batch_normalization, moments
    from trainer.ops import reshape, shape

    x = convert_to_tensor(inputs)
    if x.shape is None or None in x.shape[1:]:
        raise ValueError("contrib.layers.group_norm: the input's shape past the batch axis must be known")
    rank = len(x.shape)
    axis = channels_axis % rank
    reduce = sorted(a % rank for a in reduction_axes)
    if axis in reduce or 0 in reduce or axis == 0:
        raise ValueError(f"contrib.layers.group_norm: channels_axis {channels_axis} and reduction_axes "
                         f"{list(reduction_axes)} must be distinct axes past the batch axis")
    channels = x.shape[axis]
    if groups > channels or channels % groups:
        raise ValueError(f"contrib.layers.group_norm: {channels} channels do not split into {groups} groups")
    # (..., C, ...) as (..., groups, C / groups, ...): each group's statistics over its channels and the
    # reduction axes, the other axes (the batch's included) kept apart
    split = [-1] + [x.shape[a] for a in range(1, axis)] + [groups, channels // groups] + \
            [x.shape[a] for a in range(axis + 1, rank)]
    grouped = reshape(x, split)
    stats_axes = [axis + 1] + [a + 1 if a > axis else a for a in reduce]
    with variable_scope(scope, default_name="GroupNorm", reuse=reuse):
        mean, variance = moments(grouped, stats_axes, keep_dims=True)
        y = reshape(batch_normalization(grouped, mean, variance, None, None, epsilon), shape(x))
        beta, gamma = _scale_and_shift(x, axis, center, scale, param_initializers, trainable)
        if gamma is not None:
            y = multiply(y, gamma)
        if beta is not None:
            y = make_op("Add", [y, beta]).outputs[0]
    return y if activation_fn is None else activation_fn(y)


@contrib_layer
def instance_norm(inputs, center: bool = True, scale: bool = True, epsilon: float = 1e-6, activation_fn=None,
                  param_initializers=None, reuse=None, variables_collections=None, outputs_collections=None,
                  trainable: bool = True, data_format: str = "NHWC", scope=None):
    """Instance normalization (Ulyanov et al., 2016): each example's channels normalized over their
    spatial axes; ``InstanceNorm/beta`` and ``gamma`` per channel. ``data_format`` "NC..." puts the
    channels at axis 1, anything else last."""
    from trainer.nn import batch_normalization, moments

    x = convert_to_tensor(inputs)
    if x.shape is None or len(x.shape) < 3:
        raise ValueError(f"contrib.layers.instance_norm: the input must have a batch, spatial and channel axes, "
                         f"got shape {None if x.shape is None else tuple(x.shape)}")
    rank = len(x.shape)
    axis = 1 if data_format.startswith("NC") else rank - 1
    if x.shape[axis] is None:
        raise ValueError("contrib.layers.instance_norm: the number of channels must be known")
    spatial = [a for a in range(1, rank) if a != axis]
    with variable_scope(scope, default_name="InstanceNorm", reuse=reuse):
        mean, variance = moments(x, spatial, keep_dims=True)
        beta, gamma = _scale_and_shift(x, axis, center, scale, param_initializers, trainable)
        y = batch_normalization(x, mean, variance, beta, gamma, epsilon)
    return y if activation_fn is None else activation_fn(y)


def maxout(inputs, num_units: int, axis: int = -1, scope=None):
    """Maxout (Goodfellow et al., 2013): the ``axis`` features in ``num_units`` groups of consecutive
    ones, each unit the maximum of its group."""
    from trainer.array_ops import reduce_max
    from trainer.array_ops import stack, unstack
    from trainer.ops import reshape, shape

    x = convert_to_tensor(inputs)
    rank = len(x.shape)
    axis %= rank
    features = x.shape[axis]
    if features is None or features % num_units:
        raise ValueError(f"contrib.layers.maxout: {features} features along axis {axis} are not a multiple of "
                         f"num_units={num_units}")
    with variable_scope(scope, default_name="MaxOut"):
        dims = unstack(shape(x))
        dims = dims[:axis] + [num_units, features // num_units] + dims[axis + 1:]
        return reduce_max(reshape(x, stack(dims)), axis + 1)


def dense_to_sparse(tensor, eos_token=0, outputs_collections=None, scope=None):
    """The entries of ``tensor`` that differ from ``eos_token``, as a SparseTensor of its shape."""
    from trainer.array_ops import not_equal, where
    from trainer.array_ops import gather_nd
    from trainer.ops import cast, shape
    from trainer.sparse_tensor import SparseTensor

    x = convert_to_tensor(tensor)
    with variable_scope(scope, default_name="dense_to_sparse"):
        indices = where(not_equal(x, np.asarray(eos_token, x.dtype)))
        result = SparseTensor(indices, gather_nd(x, indices), cast(shape(x), np.int64))
    graph = get_default_graph()
    for key in [outputs_collections] if isinstance(outputs_collections, str) else (outputs_collections or []):
        graph.add_to_collection(key, result)
    return result


def l1_l2_regularizer(scale_l1: float = 1.0, scale_l2: float = 1.0, scope=None):
    """``w -> scale_l1 * sum(|w|) + scale_l2 * sum(w**2) / 2``; None where both scales are 0."""
    if scale_l1 < 0 or scale_l2 < 0:
        raise ValueError(f"l1_l2_regularizer: scales must be >= 0, got scale_l1={scale_l1}, scale_l2={scale_l2}")

    def penalty(w):
        terms = []
        if scale_l1:
            terms.append(multiply(reduce_sum(make_op("Abs", [w]).outputs[0]), np.asarray(scale_l1, w.dtype)))
        if scale_l2:
            terms.append(multiply(reduce_sum(multiply(w, w)), np.asarray(0.5 * scale_l2, w.dtype)))
        return terms[0] if len(terms) == 1 else add_n(terms, name="l1_l2_regularizer")

    return make_regularizer("l1_l2_regularizer", 1.0 if (scale_l1 or scale_l2) else 0.0, penalty)


def summarize_tensor(tensor, tag=None):
    """A scalar summary of a scalar tensor, a histogram of any other, tagged with its name."""
    t = convert_to_tensor(tensor)
    tag = tag or t.op.name
    if t.shape is not None and len(t.shape) == 0:
        return summary.scalar(tag, t)
    return summary.histogram(tag, t)


def summarize_tensors(tensors, summarizer=summarize_tensor) -> list:
    return [summarizer(t) for t in tensors]


def summarize_activation(op):
    """A histogram of an activation and, for relu/relu6, a scalar of its fraction of zeros."""
    from trainer.nn import zero_fraction

    t = convert_to_tensor(op)
    written = [summary.histogram(f"{t.op.name}/activation", t)]
    if t.op.type in ("Relu", "Clip"):
        written.append(summary.scalar(f"{t.op.name}/zeros", zero_fraction(t)))
    return written


def summarize_collection(collection: str, name_filter=None, summarizer=summarize_tensor) -> list:
    import re

    tensors = get_default_graph().get_collection(collection)
    if name_filter is not None:
        tensors = [t for t in tensors if re.match(name_filter, t.op.name)]
    return summarize_tensors(tensors, summarizer)


def summarize_activations(name_filter=None, summarizer=summarize_activation) -> list:
    return summarize_collection(GraphKeys.ACTIVATIONS, name_filter, summarizer)
