"""Layers: functions that create their variables and return the output tensor.

Image layers take NHWC (``data_format="channels_last"``) by default, as TensorFlow 1.x's ``tf.layers``
do, so TF1 scripts run unchanged; ``data_format="channels_first"`` (NCHW) builds the convolution or
pool directly, without the pair of transposes an NHWC layer wraps around it.

``dense``, ``conv2d`` and ``batch_normalization`` scope and share their variables as TF1's do: each
call opens the variable scope ``name`` (else ``dense``, ``dense_1``, ... made unique) and takes
its variables from ``get_variable``, so a call with ``reuse=True``, or inside a reusing
``variable_scope``, shares the first call's kernel and bias (a GAN's discriminator applied to real
and generated images), and the variables' names ignore name scopes as ``get_variable``'s do.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from trainer import init, nn, nn_conv
from trainer.graph import TRAINER_DOMAIN, GraphKeys, Tensor, get_default_graph
from trainer.array_ops import size
from trainer.ops import cast, constant, convert_to_tensor, divide, make_op, maximum, multiply, subtract, where
from trainer.variable_scopes import get_variable, variable_scope
from trainer.variables import Variable

__all__ = ["average_pooling1d", "average_pooling2d", "average_pooling3d", "batch_normalization", "conv1d", "conv2d",
           "conv2d_transpose", "conv3d", "conv3d_transpose", "dense", "dropout", "embedding", "flatten", "layer_norm",
           "max_pooling1d", "max_pooling2d", "max_pooling3d", "separable_conv2d"]

_ACTIVATIONS = {None: None, "relu": nn.relu, "tanh": nn.tanh, "sigmoid": nn.sigmoid, "softmax": nn.softmax}


def _activate(y, activation):
    fn = _ACTIVATIONS[activation] if isinstance(activation, str) or activation is None else activation
    return y if fn is None else fn(y)


@contextlib.contextmanager
def _layer_scope(graph, name: str | None, base: str, reuse):
    """The variable scope of one tf.layers call, as TF1's layers open it: ``name``, else ``base``
    made unique (with ``reuse=True``, ``base`` itself: the layer to share)."""
    with graph.as_default(), variable_scope(name if name is not None or not reuse else base,
                                            default_name=base, reuse=reuse or None):
        yield


def dense(inputs, units: int, activation=None, use_bias: bool = True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
          kernel_constraint=None, bias_constraint=None, trainable: bool = True, name: str | None = None, reuse=None):
    """``activation(x @ W + b)``; a 2-D input becomes one fused Gemm. Arguments in TF1's order;
    ``kernel_initializer`` defaults to glorot_uniform, as TF1's does. ``kernel_regularizer``'s
    penalty joins REGULARIZATION_LOSSES, as in TF1."""
    x = convert_to_tensor(inputs)
    if x.shape is None or not x.shape or x.shape[-1] is None:
        raise ValueError(f"The last dimension of the inputs to `Dense` should be defined. Found `None` "
                         f"(input {x.name}, shape {x.shape}).")
    with _layer_scope(x.graph, name, "dense", reuse):
        fan_in = x.shape[-1]
        w = _variable(kernel_initializer or init.glorot_uniform, (fan_in, units), x.dtype, "kernel", trainable,
                      regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (units,), x.dtype, "bias", trainable, regularizer=bias_regularizer,
                      constraint=bias_constraint) if use_bias else None
        if len(x.shape) == 2:
            y = make_op("Gemm", [x, w, b]).outputs[0]
        else:
            y = make_op("MatMul", [x, w]).outputs[0]
            if b is not None:
                y = y + b
        return _activity(_activate(y, activation), activity_regularizer)


def _variable(initializer, shape: tuple, dtype, name: str, trainable: bool = True, collections=None,
              regularizer=None, constraint=None) -> Variable:
    """A layer's variable from ``get_variable`` in the layer's scope (the existing one when the scope
    reuses), its value from a TF1 initializer or a ``trainer.init`` function: ``f(shape, dtype=)``;
    its ``regularizer``'s penalty joins REGULARIZATION_LOSSES and the optimizers apply its
    ``constraint`` after each update, as in TF1."""
    return get_variable(name, shape, dtype=dtype, initializer=initializer, trainable=trainable,
                        collections=collections, regularizer=regularizer, constraint=constraint)


def _activity(y: Tensor, activity_regularizer) -> Tensor:
    """``y``, its ``activity_regularizer`` penalty (divided by the batch size, as TF 1.15's layers make it
    batch-agnostic) added to REGULARIZATION_LOSSES."""
    if activity_regularizer is None:
        return y
    penalty = activity_regularizer(y)
    if penalty is not None:
        from trainer.ops import shape as shape_of

        batch = cast(make_op("Gather", [shape_of(y), constant(np.asarray(0, np.int64))]).outputs[0], penalty.dtype)
        y.graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, make_op("Div", [penalty, batch]).outputs[0])
    return y


_FORMATS = ("channels_first", "channels_last")


def _channels_first(inputs, data_format: str, build):
    """``build`` on NCHW: channels_last (TF1's NHWC) inputs are transposed in and the result back."""
    if data_format not in _FORMATS:
        raise ValueError(f"data_format must be one of {_FORMATS}, got {data_format!r}")
    x = convert_to_tensor(inputs)
    if data_format == "channels_first":
        return build(x)
    y = build(make_op("Transpose", [x], {"perm": [0, 3, 1, 2]}).outputs[0])
    return make_op("Transpose", [y], {"perm": [0, 2, 3, 1]}).outputs[0]


def _pair(v):
    return v if v is None or not isinstance(v, int) else (v, v)


def glorot_uniform_hwio(shape, dtype=np.float32):
    """Glorot-uniform values for a TF1 filter [k..., in, out] ([h, w, in, out] in 2-D; fans over the
    window, as TF1 counts them)."""
    *ks, cin, cout = shape
    n = len(ks)
    return np.ascontiguousarray(init.glorot_uniform((cout, cin, *ks), dtype=dtype).transpose(*range(2, n + 2), 1, 0))


def conv2d(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=(1, 1), activation=None, use_bias: bool = True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: str | None = None, reuse=None):
    """Convolution of NHWC ``inputs`` (TensorFlow 1.x's default; NCHW with
    ``data_format="channels_first"``) with ``filters`` kernels of ``kernel_size``; ``padding`` is
    "valid" by default, as in TF1, or "same". Arguments in TF1's order. The ``kernel`` variable is
    TF1's [h, w, in, out] (glorot_uniform by default, as in TF1) in either data format; the
    convolution reads it transposed to [out, in, h, w], which the exporter folds into the weights."""
    ks = _pair(kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)

    def build(x):
        w = _variable(kernel_initializer or glorot_uniform_hwio, ks + (x.shape[1], filters), x.dtype, "kernel",
                      trainable, regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        oihw = make_op("Transpose", [w], {"perm": [3, 2, 0, 1]}).outputs[0]
        return nn.conv2d_nchw(x, oihw, b, strides=_pair(strides), padding=padding, dilations=_pair(dilation_rate))

    x = convert_to_tensor(inputs)
    with _layer_scope(x.graph, name, "conv2d", reuse):
        return _activity(_activate(_channels_first(x, data_format, build), activation), activity_regularizer)


def conv2d_transpose(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                     data_format: str = "channels_last", activation=None, use_bias: bool = True, kernel_initializer=None,
                     bias_initializer=None, kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                     kernel_constraint=None, bias_constraint=None, trainable: bool = True, name: str | None = None,
                     reuse=None):
    """The transposed convolution (a conv2d's gradient with respect to its input): each spatial size
    becomes ``in * stride`` ("same") or ``(in - 1) * stride + kernel`` ("valid"). The ``kernel``
    variable is TF1's [h, w, filters, in]."""
    ks, st = (_pair(kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)), _pair(strides)
    auto_pad = _auto_pad(padding)

    def build(x):
        w = _variable(kernel_initializer or glorot_uniform_hwio, ks + (filters, x.shape[1]), x.dtype, "kernel",
                      trainable, regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        iohw = make_op("Transpose", [w], {"perm": [3, 2, 0, 1]}).outputs[0]
        attrs = {"strides": list(st), "kernel_shape": list(ks), "auto_pad": auto_pad}
        return make_op("ConvTranspose", [x, iohw, b], attrs).outputs[0]

    x = convert_to_tensor(inputs)
    with _layer_scope(x.graph, name, "conv2d_transpose", reuse):
        return _activity(_activate(_channels_first(x, data_format, build), activation), activity_regularizer)


def separable_conv2d(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                     data_format: str = "channels_last", dilation_rate=(1, 1), depth_multiplier: int = 1,
                     activation=None, use_bias: bool = True, depthwise_initializer=None, pointwise_initializer=None,
                     bias_initializer=None, depthwise_regularizer=None, pointwise_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None,
                     pointwise_constraint=None, bias_constraint=None, trainable: bool = True,
                     name: str | None = None, reuse=None):
    """A depthwise convolution (``depth_multiplier`` filters per input channel) then a 1x1 one
    mixing channels; variables ``depthwise_kernel`` [h, w, in, multiplier] and
    ``pointwise_kernel`` [1, 1, in * multiplier, filters], as TF1's."""
    ks = _pair(kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)

    def build(x):
        cin = x.shape[1]
        depthwise = _variable(depthwise_initializer or glorot_uniform_hwio, ks + (cin, depth_multiplier), x.dtype,
                              "depthwise_kernel", trainable, regularizer=depthwise_regularizer,
                              constraint=depthwise_constraint)
        pointwise = _variable(pointwise_initializer or glorot_uniform_hwio, (1, 1, cin * depth_multiplier, filters),
                              x.dtype, "pointwise_kernel", trainable, regularizer=pointwise_regularizer,
                              constraint=pointwise_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        grouped = make_op("Reshape", [make_op("Transpose", [depthwise], {"perm": [2, 3, 0, 1]}).outputs[0],
                                      constant(np.asarray([cin * depth_multiplier, 1, *ks], np.int64))]).outputs[0]
        y = make_op("Conv", [x, grouped], {"strides": list(_pair(strides)), "dilations": list(_pair(dilation_rate)),
                                           "kernel_shape": list(ks), "group": cin,
                                           "auto_pad": _auto_pad(padding)}).outputs[0]
        mixing = make_op("Transpose", [pointwise], {"perm": [3, 2, 0, 1]}).outputs[0]
        return make_op("Conv", [y, mixing, b], {"kernel_shape": [1, 1]}).outputs[0]

    x = convert_to_tensor(inputs)
    with _layer_scope(x.graph, name, "separable_conv2d", reuse):
        return _activity(_activate(_channels_first(x, data_format, build), activation), activity_regularizer)


_AUTO_PADS = {"same": "SAME_UPPER", "valid": "VALID"}


def _auto_pad(padding: str) -> str:
    if padding.lower() not in _AUTO_PADS:
        raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}")
    return _AUTO_PADS[padding.lower()]


def _as_2d(inputs, data_format: str, build):
    """A 1-D layer as its 2-D twin on a height-1 image: [N, W, C] (channels_last) or [N, C, W]."""
    from trainer.array_ops import expand_dims, squeeze

    axis = 1 if data_format == "channels_last" else 2
    return squeeze(build(expand_dims(convert_to_tensor(inputs), axis)), [axis])


def conv1d(inputs, filters: int, kernel_size, strides=1, padding: str = "valid", data_format: str = "channels_last",
           dilation_rate=1, activation=None, use_bias: bool = True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable: bool = True, name: str | None = None, reuse=None):
    """Convolution over the width of [N, W, C] inputs; the ``kernel`` variable is TF1's [k, in, filters]."""
    k = kernel_size if isinstance(kernel_size, int) else int(kernel_size[0])
    x = convert_to_tensor(inputs)
    cin = x.shape[-1] if data_format == "channels_last" else x.shape[1]
    with _layer_scope(x.graph, name, "conv1d", reuse):
        w = _variable(kernel_initializer or init.glorot_uniform, (k, cin, filters), x.dtype, "kernel", trainable,
                      regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        oihw = make_op("Unsqueeze", [make_op("Transpose", [w], {"perm": [2, 1, 0]}).outputs[0],
                                     constant(np.asarray([2], np.int64))]).outputs[0]
        stride = strides if isinstance(strides, int) else int(strides[0])
        dilation = dilation_rate if isinstance(dilation_rate, int) else int(dilation_rate[0])
        y = _as_2d(x, data_format, lambda x4: _channels_first(
            x4, data_format, lambda nchw: nn.conv2d_nchw(nchw, oihw, b, strides=(1, stride), padding=padding,
                                                         dilations=(1, dilation))))
        return _activity(_activate(y, activation), activity_regularizer)


def max_pooling1d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last", name=None):
    p, s = (pool_size if isinstance(pool_size, int) else pool_size[0]), (strides if isinstance(strides, int) else strides[0])
    return _as_2d(inputs, data_format, lambda x: max_pooling2d(x, (1, p), (1, s), padding, data_format, name=name))


def average_pooling1d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last",
                      name=None):
    p, s = (pool_size if isinstance(pool_size, int) else pool_size[0]), (strides if isinstance(strides, int) else strides[0])
    return _as_2d(inputs, data_format, lambda x: average_pooling2d(x, (1, p), (1, s), padding, data_format, name=name))


def max_pooling2d(inputs, pool_size, strides=None, padding: str = "valid", data_format: str = "channels_last",
                  name=None):
    """Max over ``pool_size`` windows of NHWC ``inputs`` (NCHW with ``data_format="channels_first"``);
    ``strides`` defaults to ``pool_size``."""
    ps, st = _pair(pool_size), _pair(strides)
    return _channels_first(inputs, data_format, lambda x: nn.max_pool_nchw(x, ps, st, padding, name=name))


def average_pooling2d(inputs, pool_size, strides=None, padding: str = "valid", data_format: str = "channels_last",
                      name=None):
    """Mean over ``pool_size`` windows of NHWC ``inputs`` (NCHW with ``data_format="channels_first"``);
    ``strides`` defaults to ``pool_size``."""
    ps, st = _pair(pool_size), _pair(strides)
    return _channels_first(inputs, data_format, lambda x: nn.avg_pool_nchw(x, ps, st, padding, name=name))



# -- 3-D layers: NDHWC by default (NCDHW with channels_first), on trainer.nn_conv's N-D ops -------
_FORMATS_3D = {"channels_last": "NDHWC", "channels_first": "NCDHW"}


def _format_3d(data_format: str) -> str:
    if data_format not in _FORMATS_3D:
        raise ValueError(f"data_format must be one of {_FORMATS}, got {data_format!r}")
    return _FORMATS_3D[data_format]


def _triple(v) -> tuple:
    return (int(v),) * 3 if isinstance(v, (int, np.integer)) else tuple(int(d) for d in v)


def _padding_3d(padding: str) -> str:
    _auto_pad(padding)
    return padding.upper()


def _add_bias(y: Tensor, b, fmt: str) -> Tensor:
    return y if b is None else nn.bias_add(y, b, data_format="NCHW" if fmt == "NCDHW" else None)


def conv3d(inputs, filters: int, kernel_size, strides=(1, 1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=(1, 1, 1), activation=None, use_bias: bool = True,
           kernel_initializer=None, bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: str | None = None, reuse=None):
    """TF1's ``tf.layers.conv3d``: the ``kernel`` variable is [d, h, w, in, filters]."""
    fmt, ks = _format_3d(data_format), _triple(kernel_size)
    x = convert_to_tensor(inputs)
    cin = x.shape[-1] if fmt == "NDHWC" else x.shape[1]
    with _layer_scope(x.graph, name, "conv3d", reuse):
        w = _variable(kernel_initializer or glorot_uniform_hwio, ks + (cin, filters), x.dtype, "kernel", trainable,
                      regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        y = nn_conv.conv3d(x, w, strides=[1, *_triple(strides), 1] if fmt == "NDHWC" else [1, 1, *_triple(strides)],
                           padding=_padding_3d(padding), data_format=fmt, dilations=_triple(dilation_rate))
        return _activity(_activate(_add_bias(y, b, fmt), activation), activity_regularizer)


def conv3d_transpose(inputs, filters: int, kernel_size, strides=(1, 1, 1), padding: str = "valid",
                     data_format: str = "channels_last", activation=None, use_bias: bool = True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
                     activity_regularizer=None, kernel_constraint=None, bias_constraint=None, trainable: bool = True,
                     name: str | None = None, reuse=None):
    """TF1's ``tf.layers.conv3d_transpose``: each spatial size becomes ``in * stride`` ("same") or
    ``(in - 1) * stride + kernel`` ("valid"); the ``kernel`` variable is [d, h, w, filters, in]."""
    fmt, ks, st = _format_3d(data_format), _triple(kernel_size), _triple(strides)
    pad = _padding_3d(padding)
    x = convert_to_tensor(inputs)
    last = fmt == "NDHWC"
    cin, spatial = (x.shape[-1], x.shape[1:4]) if last else (x.shape[1], x.shape[2:])
    if None in spatial:
        raise ValueError(f"conv3d_transpose: input {x.name} needs static spatial dims, got shape {x.shape}")
    out = [d * s if pad == "SAME" else (d - 1) * s + k for d, s, k in zip(spatial, st, ks)]
    batch = -1 if x.shape[0] is None else x.shape[0]
    with _layer_scope(x.graph, name, "conv3d_transpose", reuse):
        w = _variable(kernel_initializer or glorot_uniform_hwio, ks + (filters, cin), x.dtype, "kernel", trainable,
                      regularizer=kernel_regularizer, constraint=kernel_constraint)
        b = _variable(bias_initializer or init.zeros, (filters,), x.dtype, "bias", trainable,
                      regularizer=bias_regularizer, constraint=bias_constraint) if use_bias else None
        y = nn_conv.conv3d_transpose(x, w, [batch, *out, filters] if last else [batch, filters, *out], st, pad,
                                     data_format=fmt)
        return _activity(_activate(_add_bias(y, b, fmt), activation), activity_regularizer)


def max_pooling3d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last", name=None):
    """TF1's ``tf.layers.max_pooling3d`` over NDHWC ``inputs`` (NCDHW with channels_first)."""
    return nn_conv.max_pool3d(inputs, _triple(pool_size), _triple(strides), _padding_3d(padding),
                              _format_3d(data_format), name=name)


def average_pooling3d(inputs, pool_size, strides, padding: str = "valid", data_format: str = "channels_last",
                      name=None):
    """TF1's ``tf.layers.average_pooling3d`` over NDHWC ``inputs`` (padding excluded from "same" means)."""
    return nn_conv.avg_pool3d(inputs, _triple(pool_size), _triple(strides), _padding_3d(padding),
                              _format_3d(data_format), name=name)

def flatten(inputs, name=None, data_format: str = "channels_last"):
    """[batch, everything else]; channels_first inputs are put channels-last first, as TF1's layer does,
    so the features come out in the same order either way."""
    if data_format not in _FORMATS:
        raise ValueError(f"data_format must be one of {_FORMATS}, got {data_format!r}")
    x = convert_to_tensor(inputs)
    if data_format == "channels_first" and x.shape is not None and len(x.shape) > 2:
        x = make_op("Transpose", [x], {"perm": [0] + list(range(2, len(x.shape))) + [1]}).outputs[0]
    return make_op("Flatten", [x], {"axis": 1}, name=name).outputs[0]


def batch_normalization(inputs, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                        scale: bool = True, beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None, moving_variance_initializer=None, beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None, gamma_constraint=None, training=False,
                        trainable: bool = True, name: str | None = None, reuse=None, renorm: bool = False,
                        renorm_clipping=None, renorm_momentum: float = 0.99, fused=None, virtual_batch_size=None,
                        adjustment=None):
    """TF1's ``tf.layers.batch_normalization``: normalize over all axes but ``axis`` (the channels: -1,
    the last, by default; 1 for NCHW). ``training=True`` uses the batch's statistics and adds the
    moving-average updates to UPDATE_OPS; ``False`` (the default, as in TF1) uses the moving averages;
    a bool tensor (an ``is_training`` placeholder) chooses per run, the updates moving only when true.
    ``fused`` picks TensorFlow's kernel, not the result: any value gives the same one here. Batch
    renormalization, virtual batches and ``adjustment`` are refused rather than ignored."""
    unsupported = {"renorm=True": renorm, "virtual_batch_size": virtual_batch_size is not None,
                   "adjustment": adjustment is not None}
    refused = [k for k, v in unsupported.items() if v]
    if refused:
        raise ValueError(f"batch_normalization: {', '.join(refused)} is not supported (batch renormalization and "
                         "virtual batches are not built)")
    x = convert_to_tensor(inputs)
    g = x.graph
    rank = len(x.shape)
    ax = axis + rank if axis < 0 else axis
    if not 0 < ax < rank:
        raise ValueError(f"batch_normalization: axis {axis} is not a non-batch axis of a rank-{rank} input")
    perm = [0, ax] + [d for d in range(1, rank) if d != ax]
    c = x.shape[ax]
    with _layer_scope(g, name, "batch_normalization", reuse):
        gamma = _variable(gamma_initializer or init.ones, (c,), x.dtype, "gamma", trainable,
                          regularizer=gamma_regularizer, constraint=gamma_constraint) if scale else \
            constant(np.ones((c,), x.dtype))
        beta = _variable(beta_initializer or init.zeros, (c,), x.dtype, "beta", trainable,
                         regularizer=beta_regularizer, constraint=beta_constraint) if center else \
            constant(np.zeros((c,), x.dtype))
        moving = [GraphKeys.GLOBAL_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES]
        mm = _variable(moving_mean_initializer or init.zeros, (c,), x.dtype, "moving_mean", False, moving)
        mv = _variable(moving_variance_initializer or init.ones, (c,), x.dtype, "moving_variance", False, moving)
        if ax != 1:  # the ops normalize over axis 1
            x = make_op("Transpose", [x], {"perm": perm}).outputs[0]
        if isinstance(training, Tensor):  # an is_training placeholder: batch statistics and updates only when true
            decay = where(training, constant(np.asarray(1.0 - momentum, x.dtype)), constant(np.zeros((), x.dtype)))
            y = where(training, _batch_norm_training(g, x, gamma, beta, mm, mv, decay, epsilon),
                      _batch_norm_inference(x, gamma, beta, mm, mv, epsilon))
        elif training:
            y = _batch_norm_training(g, x, gamma, beta, mm, mv, 1.0 - momentum, epsilon)
        else:
            y = _batch_norm_inference(x, gamma, beta, mm, mv, epsilon)
        if ax != 1:
            y = make_op("Transpose", [y], {"perm": np.argsort(perm).tolist()}).outputs[0]
        return y


def _batch_norm_inference(x, gamma, beta, mm, mv, epsilon: float):
    return make_op("BatchNormalization", [x, gamma, beta, mm, mv], {"epsilon": epsilon}, num_outputs=1).outputs[0]


def _batch_norm_training(g, x, gamma, beta, mm, mv, decay, epsilon: float):
    """Batch statistics; the moving averages step by ``decay`` (1 - momentum; a tensor when training is fed)."""
    y, mean, var, _ = make_op("BatchNormTraining", [x, gamma, beta], {"epsilon": epsilon},
                              domain=TRAINER_DOMAIN).outputs
    c = x.shape[1]
    if None in x.shape:  # values per channel known only per run: Bessel's correction from the run's size
        n = divide(cast(size(x), x.dtype), float(c))
        unbiased = multiply(var, divide(n, maximum(subtract(n, 1.0), 1.0)))
    else:
        n = math.prod(x.shape) // max(c, 1)
        unbiased = var if n < 2 else multiply(var, n / (n - 1.0))
    upd_m = mm.assign_sub(multiply(subtract(mm, mean), decay))
    upd_v = mv.assign_sub(multiply(subtract(mv, unbiased), decay))
    g.add_to_collection(GraphKeys.UPDATE_OPS, upd_m.node)
    g.add_to_collection(GraphKeys.UPDATE_OPS, upd_v.node)
    return y


def layer_norm(x, epsilon: float = 1e-5, name="layer_norm"):
    """Normalize over the last axis, with a learned scale and shift."""
    x = convert_to_tensor(x)
    g = x.graph
    d = x.shape[-1]
    with g.as_default(), g.name_scope(name):
        gamma = Variable(np.ones((d,), x.dtype), name="gamma")
        beta = Variable(np.zeros((d,), x.dtype), name="beta")
        return make_op("LayerNormalization", [x, gamma, beta], {"axis": -1, "epsilon": epsilon},
                       num_outputs=1).outputs[0]


def dropout(inputs, rate: float = 0.5, noise_shape=None, seed=None, training=False, name=None):
    """``x`` with a fraction ``rate`` dropped while ``training`` (a bool, or a bool tensor fed per
    run as TF1 scripts do with an ``is_training`` placeholder); TF1's order and default (False)."""
    if isinstance(training, Tensor):
        return where(training, nn.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed), inputs, name=name)
    if training and rate > 0:
        return nn.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed, name=name)
    return inputs


def embedding(ids, vocab_size: int, dim: int, name: str = "embedding"):
    """Rows of a (vocab_size, dim) table at ``ids``; trains through sparse (IndexedSlices) gradients."""
    g = get_default_graph()
    with g.name_scope(name):
        table = Variable(init.uniform((vocab_size, dim)), name="embeddings")
        return nn.embedding_lookup(table, ids)


def _lstm_variables(units: int, input_dim: int, dtype):
    """``kernel`` [input_dim + units, 4 * units] (TensorFlow's gates i, j, f, o) and ``bias`` in the
    current name scope, shared by the LSTM layers so their weights and checkpoints are interchangeable.
    (Checkpoints written by flowstack before this layout hold the gates as i, f, j, o.)"""
    kernel = Variable(init.glorot_uniform((input_dim + units, 4 * units), dtype=dtype), name="kernel")
    bias = np.zeros((4 * units,), dtype)
    bias[2 * units:3 * units] = 1.0  # forget-gate bias 1: remember by default
    return kernel, Variable(bias, name="bias")


class LSTMCell:
    """An LSTM cell: ``cell(x, (h, c)) -> (h, (h, c))``.

    ``fused=True`` (default) runs each step as one LSTMBlockCell op with a fused gradient (a loop
    body of 1 op instead of 11, which the LSTM benchmark shows pays); ``fused=False`` builds it
    from ONNX ops (Gemm, Split, Sigmoid, Tanh, Mul, Add).
    """

    def __init__(self, units: int, input_dim: int, name: str = "lstm_cell", dtype=np.float32, fused: bool = True):
        self.units = units
        self.fused = fused
        with get_default_graph().name_scope(name):
            self.kernel, self.bias = _lstm_variables(units, input_dim, dtype)

    def zero_state(self, batch: int, dtype=np.float32):
        from trainer.ops import constant

        z = np.zeros((batch, self.units), dtype)
        return (constant(z), constant(z))

    def __call__(self, x, state):
        from trainer.ops import concat

        h, c = state
        if self.fused:
            h, c = make_op("LSTMBlockCell", [x, h, c, self.kernel, self.bias], domain=TRAINER_DOMAIN).outputs[:2]
            return h, (h, c)
        z = make_op("Gemm", [concat([x, h], axis=1), self.kernel, self.bias]).outputs[0]
        i, j, f, o = make_op("Split", [z], {"axis": 1, "num_outputs": 4}, num_outputs=4).outputs
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * nn.tanh(j)
        h = nn.sigmoid(o) * nn.tanh(c)
        return h, (h, c)


class LSTMBlockFusedCell:
    """An LSTM over a whole time-major sequence as one op, as TensorFlow 1.x's ``LSTMBlockFusedCell``
    (and PyTorch's ``nn.LSTM``): ``cell(inputs [T, B, input_dim], (h, c)) -> (outputs [T, B, units],
    (h, c))``, the final state last.

    One LSTMBlockFused op with its own gradient op replaces the per-step loop of ``dynamic_rnn``
    over an ``LSTMCell``: the input projection and the weight gradients become a few large GEMMs
    over all steps. Its variables are ``LSTMCell``'s (``name/kernel``, ``name/bias``, same gate
    layout), so either layer restores the other's checkpoint.

    >>> import trainer as T
    >>> g = T.Graph()
    >>> with g.as_default():
    ...     cell = T.layers.LSTMBlockFusedCell(8, 3)
    ...     outputs, (h, c) = cell(T.placeholder(np.float32, (5, 2, 3)), cell.zero_state(2))
    >>> outputs.shape, h.shape
    ((5, 2, 8), (2, 8))
    """

    def __init__(self, units: int, input_dim: int, name: str = "lstm_fused_cell", dtype=np.float32):
        self.units = units
        with get_default_graph().name_scope(name) as scope:
            self.kernel, self.bias = _lstm_variables(units, input_dim, dtype)
        self._scope = scope

    zero_state = LSTMCell.zero_state  # the same (h, c)

    def __call__(self, inputs, initial_state):
        h0, c0 = initial_state
        with self.kernel.graph.name_scope(self._scope):
            y, h, c = make_op("LSTMBlockFused", [inputs, h0, c0, self.kernel, self.bias],
                              domain=TRAINER_DOMAIN).outputs[:3]
        return y, (h, c)


class GRUCell:
    """A GRU cell: ``cell(x, h) -> (h, h)``."""

    def __init__(self, units: int, input_dim: int, name: str = "gru_cell", dtype=np.float32):
        g = get_default_graph()
        self.units = units
        with g.name_scope(name):
            self.gates = Variable(init.glorot_uniform((input_dim + units, 2 * units), dtype=dtype), name="gates")
            self.gates_bias = Variable(np.ones((2 * units,), dtype), name="gates_bias")
            self.candidate = Variable(init.glorot_uniform((input_dim + units, units), dtype=dtype), name="candidate")
            self.candidate_bias = Variable(np.zeros((units,), dtype), name="candidate_bias")

    def zero_state(self, batch: int, dtype=np.float32):
        from trainer.ops import constant

        return constant(np.zeros((batch, self.units), dtype))

    def __call__(self, x, h):
        from trainer.ops import concat

        zr = nn.sigmoid(make_op("Gemm", [concat([x, h], axis=1), self.gates, self.gates_bias]).outputs[0])
        z, r = make_op("Split", [zr], {"axis": 1, "num_outputs": 2}, num_outputs=2).outputs
        cand = nn.tanh(make_op("Gemm", [concat([x, r * h], axis=1), self.candidate, self.candidate_bias]).outputs[0])
        h = z * h + (1.0 - z) * cand
        return h, h


class MultiRNNCell:
    """Cells stacked so each step runs every layer (state is a tuple of the layers' states)."""

    def __init__(self, cells):
        self.cells = list(cells)

    def zero_state(self, batch: int, dtype=np.float32):
        return tuple(c.zero_state(batch, dtype) for c in self.cells)

    def __call__(self, x, state):
        new = []
        for cell, s in zip(self.cells, state):
            x, s = cell(x, s)
            new.append(s)
        return x, tuple(new)


def _flat(state):
    if isinstance(state, (list, tuple)):
        return [t for s in state for t in _flat(s)]
    return [state]


def _unflat(like, flat):
    if isinstance(like, (list, tuple)):
        out = []
        for s in like:
            part = _unflat(s, flat)
            out.append(part)
        return tuple(out)
    return flat.pop(0)


def dynamic_rnn(cell, inputs, initial_state):
    """Run ``cell`` over time-major ``inputs`` (T, B, D) with a while_loop; returns (last output, final state)."""
    from trainer.control_flow import while_loop
    from trainer.ops import constant, gather, less

    inputs = convert_to_tensor(inputs)
    steps = inputs.shape[0]
    n_time = constant(np.asarray(steps, np.int64)) if steps is not None else make_op("Shape", [inputs]).outputs[0][0]
    flat0 = _flat(initial_state)

    def cond_fn(t, out, *flat):
        return less(t, n_time)

    def body_fn(t, out, *flat):
        x = gather(inputs, t, axis=0)
        y, new_state = cell(x, _unflat(initial_state, list(flat)))
        return [t + np.asarray(1, np.int64), y] + _flat(new_state)

    t0 = constant(np.asarray(0, np.int64))
    first = flat0[0]
    results = while_loop(cond_fn, body_fn, [t0, first] + flat0, name="rnn")
    return results[1], _unflat(initial_state, list(results[2:]))


# TF1's layer objects (trainer/layer_classes.py builds them on the functions here).
LAZY_ATTRIBUTES = {name: ("trainer.layer_classes", name) for name in (
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization", "Conv1D", "Conv2D",
    "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Dense", "Dropout", "Flatten", "Layer", "MaxPooling1D",
    "MaxPooling2D", "MaxPooling3D", "SeparableConv1D", "SeparableConv2D")}
LAZY_ATTRIBUTES["separable_conv1d"] = ("trainer.separable_conv1d", "separable_conv1d")


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    raise missing_symbol("tf.layers", name, globals())
