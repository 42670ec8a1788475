"""TensorFlow 1.15's N-D convolutions and pools (``tf.nn.convolution``, ``conv3d``, ``pool``, the
public conv2d gradient ops, ...), composed from ONNX's N-D ``Conv``, ``ConvTranspose``, ``MaxPool``
and ``AveragePool`` as TF's own nn_ops.py composes them from its kernels: TF's channels-last
layouts (NWC, NHWC, NDHWC) are transposed to channels first around the op, and TF filters
[k..., in, out] are read transposed to ONNX's [out, in, k...], which the exporter folds into the weights.
"""

from __future__ import annotations

import numpy as np

from trainer.graph import TRAINER_DOMAIN, Tensor, constant_value
from trainer.nn import depthwise_conv2d
from trainer.ops import cast, constant, convert_to_tensor, make_op

__all__ = ["atrous_conv2d", "atrous_conv2d_transpose", "avg_pool1d", "avg_pool3d", "conv1d_transpose", "conv2d_backprop_filter",
           "conv2d_backprop_input", "conv3d", "conv3d_transpose", "convolution", "depthwise_conv2d_native",
           "max_pool1d", "max_pool3d", "max_pool_with_argmax", "pool", "with_space_to_batch"]

# data_format -> (spatial rank, channels last)
_FORMATS = {"NWC": (1, True), "NCW": (1, False), "NHWC": (2, True), "NCHW": (2, False),
            "NDHWC": (3, True), "NCDHW": (3, False)}
_PADDINGS = {"SAME": "SAME_UPPER", "VALID": "VALID"}
_POOLS = {"MAX": "MaxPool", "AVG": "AveragePool"}


def _rank(x: Tensor, op: str) -> int:
    if x.shape is None:
        raise ValueError(f"{op}: input {x.name} needs a known rank")
    return len(x.shape)


def _layout(data_format, n: int, op: str) -> bool:
    """Whether ``data_format`` (None: channels last) is channels last, for an ``n``-D op."""
    if data_format is None:
        return True
    fmt = str(data_format).upper()
    if _FORMATS.get(fmt, (None,))[0] != n:
        names = [f for f, (k, _) in _FORMATS.items() if k == n]
        raise ValueError(f"{op}: data_format must be one of {names}, got {data_format!r}")
    return _FORMATS[fmt][1]


def _auto_pad(padding, op: str) -> str:
    if not isinstance(padding, str) or padding.upper() not in _PADDINGS:
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return _PADDINGS[padding.upper()]


def _spatial(values, n: int, last: bool, what: str, op: str) -> list[int]:
    """The ``n`` spatial entries of a TF strides/ksize/dilations value: a scalar, ``n`` entries, or
    ``n + 2`` entries whose batch and channel entries must be 1."""
    if values is None:
        return [1] * n
    v = [int(values)] * n if isinstance(values, (int, np.integer)) else [int(s) for s in values]
    if len(v) == 1:
        v = v * n
    if len(v) == n + 2:
        outer = [v[0], v[-1]] if last else v[:2]
        if outer != [1, 1]:
            raise ValueError(f"{op}: {what} {list(values)} must be 1 in the batch and channel dimensions")
        v = v[1:-1] if last else v[2:]
    if len(v) != n or min(v) < 1:
        raise ValueError(f"{op}: {what} must be {n} or {n + 2} positive entries, got {values!r}")
    return v


def _channels_first(x: Tensor, n: int, last: bool, build) -> Tensor:
    """``build`` on a channels-first tensor: a channels-last ``x`` is transposed in and the result back."""
    if not last:
        return build(x)
    y = build(make_op("Transpose", [x], {"perm": [0, n + 1, *range(1, n + 1)]}).outputs[0])
    return make_op("Transpose", [y], {"perm": [0, *range(2, n + 2), 1]}).outputs[0]


def _onnx_filter(filt: Tensor, n: int, op: str) -> Tensor:
    """TF's [k..., in, out] filter read as ONNX's [out, in, k...]."""
    if filt.shape is None or len(filt.shape) != n + 2:
        raise ValueError(f"{op}: filter must be rank {n + 2}, got shape {filt.shape}")
    return make_op("Transpose", [filt], {"perm": [n + 1, n, *range(n)]}).outputs[0]


def _static_sizes(sizes, what: str, op: str) -> list[int]:
    """A shape argument (a list, an array or a constant tensor) as ints; -1 for an unknown entry."""
    if isinstance(sizes, Tensor):
        value = constant_value(sizes)
        if value is None:
            raise ValueError(f"{op}: {what} must be known when the graph is built (a list or a constant), got "
                             f"tensor {sizes.name}")
        sizes = value
    return [-1 if d is None else int(d) for d in sizes]


def _check_input(x: Tensor, n: int, op: str) -> Tensor:
    if _rank(x, op) != n + 2:
        raise ValueError(f"{op}: input must be rank {n + 2}, got shape {x.shape}")
    return x


def _conv(op: str, x, filt, strides, padding, dilations, data_format, name) -> Tensor:
    x, filt = convert_to_tensor(x), convert_to_tensor(filt)
    n = _rank(x, op) - 2
    last = _layout(data_format, n, op)
    st, dil = _spatial(strides, n, last, "strides", op), _spatial(dilations, n, last, "dilations", op)
    w = _onnx_filter(filt, n, op)
    attrs = {"strides": st, "dilations": dil, "kernel_shape": list(filt.shape[:n]), "auto_pad": _auto_pad(padding, op)}
    return _channels_first(x, n, last, lambda xc: make_op("Conv", [xc, w], attrs, name=name).outputs[0])


def convolution(input, filter=None, padding=None, strides=None, dilation_rate=None, name=None,  # noqa: A002
                data_format=None, filters=None, dilations=None) -> Tensor:
    """TF1's ``tf.nn.convolution``: an N-D (1 to 3 spatial dims) convolution, ``filter``
    [k..., in, out]; ``strides`` and ``dilation_rate`` have one entry per spatial dim."""
    x = convert_to_tensor(input)
    n = _rank(x, "convolution") - 2
    st = _spatial(strides, n, True, "strides", "convolution")
    dil = _spatial(dilation_rate if dilation_rate is not None else dilations, n, True, "dilation_rate", "convolution")
    if max(st) > 1 and max(dil) > 1:
        raise ValueError(f"convolution: strides {st} > 1 not supported in conjunction with dilation_rate {dil} > 1")
    return _conv("convolution", x, filter if filter is not None else filters, st, padding, dil, data_format, name)


def conv3d(input, filter=None, strides=None, padding=None, data_format="NDHWC",  # noqa: A002
           dilations=(1, 1, 1, 1, 1), name=None, filters=None) -> Tensor:
    """TF1's ``tf.nn.conv3d``: NDHWC ``input``, ``filter`` [d, h, w, in, out], ``strides`` [1, sd, sh, sw, 1]."""
    x = _check_input(convert_to_tensor(input), 3, "conv3d")
    if strides is None or padding is None:
        raise ValueError("conv3d: needs strides and padding")
    return _conv("conv3d", x, filter if filter is not None else filters, strides, padding, dilations, data_format,
                 name)


def atrous_conv2d(value, filters, rate: int, padding, name=None) -> Tensor:
    """TF1's ``tf.nn.atrous_conv2d``: an NHWC conv2d whose filter taps are ``rate`` apart."""
    if int(rate) < 1:
        raise ValueError(f"atrous_conv2d: rate must be >= 1, got {rate}")
    return _conv("atrous_conv2d", value, filters, 1, padding, [int(rate)] * 2, "NHWC", name)


def atrous_conv2d_transpose(value, filters, output_shape, rate: int, padding, name=None) -> Tensor:
    """TF1's ``tf.nn.atrous_conv2d_transpose``: the transpose (gradient) of ``atrous_conv2d``,
    ``filters`` [h, w, out_channels, in_channels], ``output_shape`` the static NHWC result shape."""
    if int(rate) < 1:
        raise ValueError(f"atrous_conv2d_transpose: rate must be >= 1, got {rate}")
    return _conv_transpose("atrous_conv2d_transpose", 2, value, filters, output_shape, 1, padding, [int(rate)] * 2,
                           "NHWC", name)


def with_space_to_batch(input, dilation_rate, padding, op, filter_shape=None, spatial_dims=None,  # noqa: A002
                        data_format=None) -> Tensor:
    """TF1's ``tf.nn.with_space_to_batch``: ``op(converted, num_spatial_dims, "VALID")`` run on
    ``input`` rearranged by ``space_to_batch_nd`` with block ``dilation_rate`` (so a VALID op acts
    as its dilated version), and the result rearranged back; SAME padding first pads by the dilated
    ``filter_shape`` as conv2d would. ``op(input, num_spatial_dims, padding)`` directly when every
    rate is 1. The spatial dimensions are 1..n (channels last) or 2..n+1 (``data_format`` "NC...")."""
    from trainer.space_batch import batch_to_space_nd, space_to_batch_nd

    where = "with_space_to_batch"
    rates = [int(r) for r in np.asarray(_static_sizes(dilation_rate, "dilation_rate", where)).reshape(-1)]
    n = len(rates)
    if n == 0 or min(rates) < 1:
        raise ValueError(f"{where}: dilation_rate must be a non-empty list of positive ints, got {rates}")
    padding = str(padding).upper()
    if padding not in _PADDINGS:
        raise ValueError(f"{where}: padding must be 'SAME' or 'VALID', got {padding!r}")
    first = 2 if data_format is not None and str(data_format).startswith("NC") else 1
    dims = list(range(first, first + n)) if spatial_dims is None else [int(d) for d in spatial_dims]
    if dims != list(range(first, first + n)):
        raise ValueError(f"{where}: spatial_dims must be the {n} consecutive dimensions from {first}, got {dims}")
    if all(r == 1 for r in rates):
        return op(input, n, padding)
    x = convert_to_tensor(input)
    if x.shape is None or any(x.shape[d] is None for d in dims):
        raise ValueError(f"{where}: the spatial dimensions of input must be static, got shape {x.shape}")
    base = np.zeros((n, 2), np.int64)
    if padding == "SAME":
        if filter_shape is None:
            raise ValueError(f"{where}: filter_shape must be specified for SAME padding")
        kernel = np.asarray(_static_sizes(filter_shape, "filter_shape", where)[:n])
        extra = kernel + (kernel - 1) * (np.asarray(rates) - 1) - 1
        base[:, 0], base[:, 1] = extra // 2, extra - extra // 2
    sizes = np.asarray([int(x.shape[d]) for d in dims]) + base.sum(axis=1)
    pad_end_extra = (np.asarray(rates) - sizes % rates) % rates
    paddings = [[int(base[i, 0]), int(base[i, 1] + pad_end_extra[i])] for i in range(n)]
    crops = [[0, int(pad_end_extra[i])] for i in range(n)]
    if first == 2:  # the channels dimension sits between batch and space: a block of 1 over it
        rates, paddings, crops = [1] + rates, [[0, 0]] + paddings, [[0, 0]] + crops
    converted = space_to_batch_nd(x, rates, paddings)
    return batch_to_space_nd(op(converted, n, "VALID"), rates, crops)


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC",  # noqa: A002
                            dilations=(1, 1, 1, 1), name=None) -> Tensor:
    """TF1's ``tf.nn.depthwise_conv2d_native``: the op under ``depthwise_conv2d``, with 4-entry strides."""
    if len(list(strides)) != 4:
        raise ValueError(f"depthwise_conv2d_native: strides must have 4 entries, got {strides!r}")
    _auto_pad(padding, "depthwise_conv2d_native")
    return depthwise_conv2d(input, filter, strides, padding, name=name, data_format=data_format, dilations=dilations)


def _conv_transpose(op: str, n: int, x, filt, output_shape, strides, padding, dilations, data_format, name) -> Tensor:
    """The gradient of an ``n``-D conv with respect to its input, ``filt`` [k..., out, in] where
    ``in`` is ``x``'s channels, ``output_shape`` the (static) full shape of the result."""
    x, filt = _check_input(convert_to_tensor(x), n, op), convert_to_tensor(filt)
    last = _layout(data_format, n, op)
    shape = _static_sizes(output_shape, "output_shape", op)  # the batch entry may be unknown (-1)
    if len(shape) != n + 2:
        raise ValueError(f"{op}: output_shape must have {n + 2} entries, got {shape}")
    w = _onnx_filter(filt, n, op)  # [out, in, k...] is ConvTranspose's [C_in, C_out, k...]
    channels = shape[-1] if last else shape[1]
    if filt.shape[n] is not None and filt.shape[n] != channels:
        raise ValueError(f"{op}: output_shape has {channels} channels but filter {filt.shape} makes {filt.shape[n]}")
    c_in = x.shape[-1] if last else x.shape[1]
    if c_in is not None and filt.shape[n + 1] is not None and c_in != filt.shape[n + 1]:
        raise ValueError(f"{op}: input has {c_in} channels but filter {filt.shape} expects {filt.shape[n + 1]}")
    attrs = {"strides": _spatial(strides, n, last, "strides", op), "dilations": _spatial(dilations, n, last,
             "dilations", op), "kernel_shape": list(filt.shape[:n]),
             "output_shape": shape[1:-1] if last else shape[2:]}
    if _auto_pad(padding, op) != "VALID":
        attrs["auto_pad"] = "SAME_UPPER"
    return _channels_first(x, n, last, lambda xc: make_op("ConvTranspose", [xc, w], attrs, name=name).outputs[0])


def conv3d_transpose(value, filter=None, output_shape=None, strides=None, padding="SAME",  # noqa: A002
                     data_format="NDHWC", name=None, input=None, filters=None, dilations=None) -> Tensor:
    """TF1's ``tf.nn.conv3d_transpose``: ``filter`` [d, h, w, out_channels, in_channels]."""
    return _conv_transpose("conv3d_transpose", 3, value if value is not None else input,
                           filter if filter is not None else filters, output_shape, strides, padding, dilations,
                           data_format, name)


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",  # noqa: A002
                     dilations=None, name=None) -> Tensor:
    """TF1's ``tf.nn.conv1d_transpose``: ``filters`` [w, out_channels, in_channels]."""
    return _conv_transpose("conv1d_transpose", 1, input, filters, output_shape, strides, padding, dilations,
                           data_format, name)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None, padding=None,  # noqa: A002
                          use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1), name=None,
                          filters=None) -> Tensor:
    """TF1's ``tf.nn.conv2d_backprop_input``: the gradient of conv2d with respect to an input of
    (static) shape ``input_sizes``, ``filter`` [h, w, in, out]."""
    op = "conv2d_backprop_input"
    sizes = _static_sizes(input_sizes, "input_sizes", op)
    return _conv_transpose(op, 2, out_backprop, filter if filter is not None else filters, sizes, strides, padding,
                           dilations, data_format, name)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                           use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1), name=None) -> Tensor:
    """TF1's ``tf.nn.conv2d_backprop_filter``: the gradient of conv2d with respect to a filter of
    (static) shape ``filter_sizes`` [h, w, in, out]."""
    op = "conv2d_backprop_filter"
    x, dy = _check_input(convert_to_tensor(input), 2, op), _check_input(convert_to_tensor(out_backprop), 2, op)
    last = _layout(data_format, 2, op)
    kh, kw, cin, cout = _static_sizes(filter_sizes, "filter_sizes", op)
    # ConvBackpropFilter reads only the shape of its W input.
    w_like = constant(np.zeros((cout, cin, kh, kw), x.dtype))
    attrs = {"strides": _spatial(strides, 2, last, "strides", op), "dilations": _spatial(dilations, 2, last,
             "dilations", op), "kernel_shape": [kh, kw], "auto_pad": _auto_pad(padding, op)}
    if last:
        x, dy = (make_op("Transpose", [t], {"perm": [0, 3, 1, 2]}).outputs[0] for t in (x, dy))
    dw = make_op("ConvBackpropFilter", [dy, x, w_like], attrs, domain=TRAINER_DOMAIN).outputs[0]
    return make_op("Transpose", [dw], {"perm": [2, 3, 1, 0]}, name=name).outputs[0]


def _pool(op: str, n: int | None, x, window, pooling_type: str, padding, strides, dilations, data_format,
          name) -> Tensor:
    x = convert_to_tensor(x)
    n = _rank(x, op) - 2 if n is None else n
    _check_input(x, n, op)
    if n < 1:
        raise ValueError(f"{op}: input must have at least one spatial dimension, got shape {x.shape}")
    last = _layout(data_format, n, op)
    kind = str(pooling_type).upper()
    if kind not in _POOLS:
        raise ValueError(f"{op}: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}")
    attrs = {"kernel_shape": _spatial(window, n, last, "ksize", op), "strides": _spatial(strides, n, last, "strides",
             op), "auto_pad": _auto_pad(padding, op)}
    dil = _spatial(dilations, n, last, "dilation_rate", op)
    if max(dil) > 1:
        attrs["dilations"] = dil
    return _channels_first(x, n, last, lambda xc: make_op(_POOLS[kind], [xc], attrs, name=name).outputs[0])


def pool(input, window_shape, pooling_type, padding, dilation_rate=None, strides=None, name=None,  # noqa: A002
         data_format=None, dilations=None) -> Tensor:
    """TF1's ``tf.nn.pool``: 'MAX' or 'AVG' pooling over 1 to 3 spatial dims (padding excluded from
    SAME averages, as TF does)."""
    dil = dilation_rate if dilation_rate is not None else dilations
    x = convert_to_tensor(input)
    n = _rank(x, "pool") - 2
    if max(_spatial(strides, n, True, "strides", "pool")) > 1 and max(_spatial(dil, n, True, "dilation_rate",
                                                                               "pool")) > 1:
        raise ValueError("pool: strides > 1 not supported in conjunction with dilation_rate > 1")
    return _pool("pool", None, x, window_shape, pooling_type, padding, strides, dil, data_format, name)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    return _pool("max_pool3d", 3, input, ksize, "MAX", padding, strides, None, data_format, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None) -> Tensor:  # noqa: A002
    return _pool("avg_pool3d", 3, input, ksize, "AVG", padding, strides, None, data_format, name)


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:  # noqa: A002
    return _pool("max_pool1d", 1, input, ksize, "MAX", padding, strides, None, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:  # noqa: A002
    return _pool("avg_pool1d", 1, input, ksize, "AVG", padding, strides, None, data_format, name)


def max_pool_with_argmax(input, ksize, strides, padding, data_format="NHWC", Targmax=None,  # noqa: A002, N803
                         name=None, output_dtype=None, include_batch_in_index: bool = False):
    """TF1's ``tf.nn.max_pool_with_argmax``: the NHWC max pool and, per output, the flat index of its
    maximum as TF flattens it, ``(y * width + x) * channels + c`` (plus ``b * height * width *
    channels`` with ``include_batch_in_index``)."""
    op = "max_pool_with_argmax"
    x = _check_input(convert_to_tensor(input), 2, op)
    if _layout(data_format, 2, op) is not True:
        raise ValueError(f"{op}: only data_format='NHWC' is supported, as in TF, got {data_format!r}")
    _, h, w, c = x.shape
    if None in (h, w, c):
        raise ValueError(f"{op}: input {x.name} needs static height, width and channels, got shape {x.shape}")
    dtype = output_dtype if output_dtype is not None else Targmax if Targmax is not None else np.int64
    attrs = {"kernel_shape": _spatial(ksize, 2, True, "ksize", op), "strides": _spatial(strides, 2, True, "strides",
             op), "auto_pad": _auto_pad(padding, op)}
    pooled = make_op("MaxPool", [make_op("Transpose", [x], {"perm": [0, 3, 1, 2]}).outputs[0]], attrs, num_outputs=2)
    onnx_index = pooled.outputs[1]  # ((b * channels + c) * height + y) * width + x
    plane = constant(np.asarray(h * w, np.int64))
    position, image_channel = (make_op(kind, [onnx_index, plane]).outputs[0] for kind in ("Mod", "Div"))
    channel = make_op("Mod", [image_channel, constant(np.asarray(c, np.int64))]).outputs[0]
    index = make_op("Add", [make_op("Mul", [position, constant(np.asarray(c, np.int64))]).outputs[0],
                            channel]).outputs[0]
    if include_batch_in_index:
        batch = make_op("Div", [image_channel, constant(np.asarray(c, np.int64))]).outputs[0]
        index = make_op("Add", [index, make_op("Mul", [batch, constant(np.asarray(h * w * c, np.int64))]).outputs[0]
                                ]).outputs[0]
    back = {"perm": [0, 2, 3, 1]}
    output = make_op("Transpose", [pooled.outputs[0]], back, name=name).outputs[0]
    argmax = cast(make_op("Transpose", [index], back).outputs[0], dtype)
    return output, argmax
