"""Neural-network ops as functions over tensors (NCHW layouts, ONNX semantics)."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import reduce_sum
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.embedding import embedding_lookup
from trainer.ops import constant, convert_to_tensor, make_op, multiply, subtract
from trainer.random_ops import get_seed
from trainer.space_batch import space_to_batch  # noqa: F401 - tf.nn.space_to_batch (TF 1.x's 4-D form)

__all__ = [
    "avg_pool_nchw", "conv2d_nchw", "dropout", "max_pool_nchw", "embedding_lookup", "l2_loss", "log_softmax", "relu",
    "sigmoid", "softmax", "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits", "tanh",
]


def relu(x, name=None) -> Tensor:
    return make_op("Relu", [x], name=name).outputs[0]


def sigmoid(x, name=None) -> Tensor:
    return make_op("Sigmoid", [x], name=name).outputs[0]


def tanh(x, name=None) -> Tensor:
    return make_op("Tanh", [x], name=name).outputs[0]


def softmax(logits, axis=None, name=None, dim=None) -> Tensor:
    axis = -1 if axis is None and dim is None else (dim if axis is None else axis)
    return make_op("Softmax", [logits], {"axis": axis}, name=name).outputs[0]


def log_softmax(logits, axis=None, name=None, dim=None) -> Tensor:
    axis = -1 if axis is None and dim is None else (dim if axis is None else axis)
    return make_op("LogSoftmax", [logits], {"axis": axis}, name=name).outputs[0]


def _pads(padding: str, kernel):
    if padding.upper() == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    if padding.upper() == "VALID":
        return {"auto_pad": "VALID"}
    raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def conv2d_nchw(x, filters, bias=None, strides=(1, 1), padding: str = "SAME", dilations=(1, 1), name=None) -> Tensor:
    """2-D convolution of NCHW ``x`` with (out, in, kh, kw) ``filters``."""
    w = convert_to_tensor(filters)
    attrs = {"strides": list(strides), "dilations": list(dilations), "kernel_shape": list(w.shape[2:]),
             **_pads(padding, w.shape[2:])}
    return make_op("Conv", [x, w, bias], attrs, name=name).outputs[0]


def max_pool_nchw(x, ksize, strides=None, padding: str = "VALID", name=None) -> Tensor:
    """Max pooling of NCHW ``x`` over a (kh, kw) window."""
    ksize = list(ksize)
    attrs = {"kernel_shape": ksize, "strides": list(strides or ksize), **_pads(padding, ksize)}
    return make_op("MaxPool", [x], attrs, name=name, num_outputs=1).outputs[0]


def avg_pool_nchw(x, ksize, strides=None, padding: str = "VALID", name=None) -> Tensor:
    """Average pooling of NCHW ``x`` over a (kh, kw) window."""
    ksize = list(ksize)
    attrs = {"kernel_shape": ksize, "strides": list(strides or ksize), **_pads(padding, ksize)}
    return make_op("AveragePool", [x], attrs, name=name).outputs[0]


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None) -> Tensor:
    """``x`` with a fraction ``rate`` (or ``1 - keep_prob``; either may be a tensor) zeroed and the
    rest scaled by 1/(1-rate), fresh each step: TensorFlow 1.x's signature."""
    x = convert_to_tensor(x)
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout: give exactly one of keep_prob and rate")
    if noise_shape is not None:
        raise ValueError("dropout: noise_shape is not supported; the mask is drawn per element")
    with x.graph.as_default():
        if rate is None:
            r = subtract(np.asarray(1, x.dtype), keep_prob) if hasattr(keep_prob, "as_tensor") or isinstance(
                keep_prob, Tensor) else constant(np.asarray(1 - keep_prob, x.dtype))
        else:
            r = rate if isinstance(rate, Tensor) else constant(np.asarray(rate, x.dtype))
        seed1, seed2 = get_seed(seed, x.graph)  # TF1's graph- and op-level seeds, as the random ops take them
    node = make_op("DropoutMask", [x, r], {"seed": seed1, "seed2": seed2}, domain=TRAINER_DOMAIN)
    node.attrs["stream"] = node.name
    return multiply(x, node.outputs[0], name=name)




def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None) -> Tensor:
    """Per-example cross-entropy for integer ``labels`` (fused with its gradient)."""
    if _sentinel is not None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits: pass labels= and logits= by keyword")
    node = make_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels], domain=TRAINER_DOMAIN, name=name)
    return node.outputs[0]


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1, name=None,
                                      axis=None) -> Tensor:
    """Per-example cross-entropy for probability (one-hot) ``labels`` over the last axis."""
    if _sentinel is not None:
        raise ValueError("softmax_cross_entropy_with_logits: pass labels= and logits= by keyword")
    axis = dim if axis is None else axis
    if axis not in (-1, None) and axis != len(convert_to_tensor(logits).shape) - 1:
        raise ValueError(f"softmax_cross_entropy_with_logits: only the last axis is supported, got {axis}")
    node = make_op("SoftmaxCrossEntropyWithLogits", [logits, labels], domain=TRAINER_DOMAIN, name=name)
    return node.outputs[0]


def l2_loss(x, name=None) -> Tensor:
    return multiply(reduce_sum(multiply(x, x)), 0.5, name=name)


# -- TensorFlow 1.x's tf.nn: NHWC images, [h, w, in, out] filters, statistics and sampled losses ---
_NHWC_TO_NCHW, _NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _spatial(values, data_format: str, what: str) -> list[int]:
    """The two spatial entries of a TF 4-vector (strides, ksize) or a 1/2-vector."""
    v = [int(values)] * 2 if isinstance(values, (int, np.integer)) else [int(s) for s in values]
    if len(v) == 4:
        return v[1:3] if data_format == "NHWC" else v[2:4]
    if len(v) == 2:
        return v
    if len(v) == 1:
        return v * 2
    raise ValueError(f"{what} must have 1, 2 or 4 entries, got {values!r}")


def _check_format(data_format: str) -> str:
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    return data_format


def _in_nchw(x, data_format, build):
    x = convert_to_tensor(x)
    if data_format == "NCHW":
        return build(x)
    y = build(make_op("Transpose", [x], {"perm": _NHWC_TO_NCHW}).outputs[0])
    return make_op("Transpose", [y], {"perm": _NCHW_TO_NHWC}).outputs[0]


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True, data_format="NHWC",  # noqa: A002
           dilations=(1, 1, 1, 1), name=None, filters=None) -> Tensor:
    """TensorFlow 1.x's ``tf.nn.conv2d``: ``filter`` [h, w, in, out], ``strides`` [1, sh, sw, 1]."""
    filt = convert_to_tensor(filter if filter is not None else filters)
    if strides is None or padding is None:
        raise ValueError("conv2d needs strides and padding")
    fmt = _check_format(data_format)
    st, dil = _spatial(strides, fmt, "strides"), _spatial(dilations, fmt, "dilations")
    w = make_op("Transpose", [filt], {"perm": [3, 2, 0, 1]}).outputs[0]
    return _in_nchw(input, fmt, lambda x: conv2d_nchw(x, w, None, st, padding, dil, name=name))


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None) -> Tensor:  # noqa: A002
    """TensorFlow 1.x's ``tf.nn.max_pool``: ``ksize`` and ``strides`` as [1, kh, kw, 1]."""
    fmt = _check_format(data_format)
    k, st = _spatial(ksize, fmt, "ksize"), _spatial(strides, fmt, "strides")
    return _in_nchw(value if value is not None else input, fmt, lambda x: max_pool_nchw(x, k, st, padding, name=name))


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None) -> Tensor:  # noqa: A002
    """TensorFlow 1.x's ``tf.nn.avg_pool``: ``ksize`` and ``strides`` as [1, kh, kw, 1]."""
    fmt = _check_format(data_format)
    k, st = _spatial(ksize, fmt, "ksize"), _spatial(strides, fmt, "strides")
    return _in_nchw(value if value is not None else input, fmt, lambda x: avg_pool_nchw(x, k, st, padding, name=name))


def bias_add(value, bias, data_format=None, name=None) -> Tensor:
    """``value + bias`` along the channel axis (the last, or axis 1 for NCHW)."""
    x = convert_to_tensor(value)
    if data_format == "NCHW" and len(x.shape) > 2:
        b = convert_to_tensor(bias)
        with x.graph.as_default():
            b = make_op("Reshape", [b, constant(np.asarray([-1] + [1] * (len(x.shape) - 2), np.int64))]).outputs[0]
        return make_op("Add", [x, b], name=name or "BiasAdd").outputs[0]
    return make_op("Add", [x, bias], name=name or "BiasAdd").outputs[0]


def xw_plus_b(x, weights, biases, name=None) -> Tensor:
    return make_op("Gemm", [x, weights, biases], name=name or "xw_plus_b").outputs[0]


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) of ``x`` over ``axes`` (the population variance, as TensorFlow)."""
    from trainer.array_ops import reduce_mean, squared_difference

    keep = bool(keepdims if keepdims is not None else keep_dims)
    mean = reduce_mean(x, axes, keepdims=True)
    variance = reduce_mean(squared_difference(x, stop_gradient_of(mean)), axes, keepdims=keep)
    return (mean if keep else reduce_mean(x, axes, keepdims=False, name=name)), variance


def stop_gradient_of(t) -> Tensor:
    """``t`` itself: the variance's gradient through the mean is zero (it is the minimiser), so
    TensorFlow stops it there; we keep the graph exact and let the gradient flow."""
    return t


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None) -> Tensor:
    """``scale * (x - mean) / sqrt(variance + eps) + offset``; None offset/scale are left out."""
    inv = make_op("Reciprocal", [make_op("Sqrt", [variance + variance_epsilon]).outputs[0]]).outputs[0]
    if scale is not None:
        inv = multiply(inv, scale)
    y = multiply(subtract(x, mean), inv)
    return y if offset is None else make_op("Add", [y, offset], name=name).outputs[0]


def l2_normalize(x, axis=None, epsilon: float = 1e-12, name=None, dim=None) -> Tensor:
    """``x / sqrt(max(sum(x**2, axis), epsilon))``."""
    from trainer.array_ops import reduce_sum as reduce_sum_tf

    axis = dim if axis is None else axis
    x = convert_to_tensor(x)
    sq = reduce_sum_tf(multiply(x, x), axis, keepdims=True)
    with x.graph.as_default():
        eps = constant(np.asarray(epsilon, x.dtype))
    inv = make_op("Reciprocal", [make_op("Sqrt", [make_op("Max", [sq, eps]).outputs[0]]).outputs[0]]).outputs[0]
    return multiply(x, inv, name=name)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, axis=None, name=None,
                                         dim=None) -> Tensor:
    """As ``softmax_cross_entropy_with_logits``, with gradients into ``labels`` too."""
    return softmax_cross_entropy_with_logits(_sentinel, labels, logits, -1 if axis is None and dim is None
                                             else (dim if axis is None else axis), name)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None) -> Tensor:
    """Elementwise ``max(x, 0) - x * z + log(1 + exp(-|x|))`` (stable for any logit)."""
    if _sentinel is not None:
        raise ValueError("sigmoid_cross_entropy_with_logits: pass labels= and logits= by keyword")
    x = convert_to_tensor(logits)
    z = convert_to_tensor(labels, dtype=x.dtype, graph=x.graph)
    relu_x = make_op("Relu", [x]).outputs[0]
    softplus = make_op("Softplus", [make_op("Neg", [make_op("Abs", [x]).outputs[0]]).outputs[0]]).outputs[0]
    return make_op("Add", [subtract(relu_x, multiply(x, z)), softplus], name=name).outputs[0]


def relu6(features, name=None) -> Tensor:
    x = convert_to_tensor(features)
    with x.graph.as_default():
        lo, hi = constant(np.asarray(0, x.dtype)), constant(np.asarray(6, x.dtype))
    return make_op("Clip", [x, lo, hi], name=name).outputs[0]


def elu(features, name=None) -> Tensor:
    return make_op("Elu", [features], name=name).outputs[0]


def selu(features, name=None) -> Tensor:
    return make_op("Selu", [features], name=name).outputs[0]


def leaky_relu(features, alpha: float = 0.2, name=None) -> Tensor:
    return make_op("LeakyRelu", [features], {"alpha": alpha}, name=name).outputs[0]


def softplus(features, name=None) -> Tensor:
    return make_op("Softplus", [features], name=name).outputs[0]


def softsign(features, name=None) -> Tensor:
    return make_op("Softsign", [features], name=name).outputs[0]


def top_k(input, k: int = 1, sorted: bool = True, name=None):  # noqa: A002 - TF's names
    """(values, int32 indices) of the ``k`` largest entries along the last axis."""
    x = convert_to_tensor(input)
    with x.graph.as_default():
        kk = constant(np.asarray([k], np.int64))
    values, indices = make_op("TopK", [x, kk], {"largest": 1, "sorted": int(sorted)}, num_outputs=2,
                              name=name).outputs
    return values, make_op("Cast", [indices], {"to": 6}).outputs[0]


def in_top_k(predictions, targets, k: int, name=None) -> Tensor:
    """Whether each target's prediction is among its row's ``k`` largest (ties count as in)."""
    from trainer.array_ops import expand_dims, one_hot, reduce_sum as reduce_sum_tf

    p = convert_to_tensor(predictions)
    target_score = reduce_sum_tf(multiply(p, one_hot(targets, p.shape[-1], dtype=p.dtype)), axis=1)
    greater = make_op("Greater", [p, expand_dims(target_score, 1)]).outputs[0]
    n_greater = reduce_sum_tf(make_op("Cast", [greater], {"to": 6}).outputs[0], axis=1)
    return make_op("Less", [n_greater, np.asarray(k, np.int32)], name=name).outputs[0]


# -- sampled losses (the paper's sampled softmax) -----------------------------------------------
def _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true, sampled_values,
                    remove_accidental_hits, seed):
    """(logits [B, num_true + num_sampled], targets) for sampled softmax and NCE: the true classes'
    and ``num_sampled`` sampled classes' logits, each less the log of its expected count."""
    from trainer import array_ops as A
    from trainer.ops import cast, equal, reshape
    from trainer.random_ops import log_uniform_candidate_sampler

    inputs = convert_to_tensor(inputs)
    labels = cast(convert_to_tensor(labels), np.int64)
    if sampled_values is None:
        sampled_values = log_uniform_candidate_sampler(labels, num_true, num_sampled, True, num_classes, seed=seed)
    sampled, true_expected, sampled_expected = sampled_values
    flat_labels = reshape(labels, [-1])
    dim = inputs.shape[-1]
    true_w = reshape(embedding_lookup(weights, flat_labels), [-1, num_true, dim])
    true_b = reshape(embedding_lookup(biases, flat_labels), [-1, num_true])
    sampled_w, sampled_b = embedding_lookup(weights, sampled), embedding_lookup(biases, sampled)
    true_logits = A.reduce_sum(multiply(A.expand_dims(inputs, 1), true_w), axis=2) + true_b
    true_logits = subtract(true_logits, make_op("Log", [true_expected]).outputs[0])
    sampled_logits = A.matmul(inputs, sampled_w, transpose_b=True) + sampled_b
    sampled_logits = subtract(sampled_logits, make_op("Log", [sampled_expected]).outputs[0])
    if remove_accidental_hits:
        hits = A.reduce_any(equal(A.expand_dims(labels, 2), reshape(sampled, [1, 1, -1])), axis=1)
        sampled_logits = sampled_logits + multiply(cast(hits, inputs.dtype), np.asarray(-1e9, inputs.dtype))
    logits = make_op("Concat", [true_logits, sampled_logits], {"axis": 1}).outputs[0]
    targets = make_op("Concat", [A.ones_like(true_logits) * np.asarray(1.0 / num_true, inputs.dtype),
                                 A.zeros_like(sampled_logits)], {"axis": 1}).outputs[0]
    return logits, targets


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int, num_true: int = 1,
                         sampled_values=None, remove_accidental_hits: bool = True, partition_strategy="mod",
                         name="sampled_softmax_loss", seed=None) -> Tensor:
    """Per-example softmax cross-entropy over the true classes and ``num_sampled`` classes drawn
    from a log-uniform (Zipf) distribution: training cost grows with ``num_sampled``, not ``num_classes``.
    ``weights`` [num_classes, dim], ``labels`` [batch, num_true]."""
    logits, targets = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                      sampled_values, remove_accidental_hits, seed)
    return softmax_cross_entropy_with_logits(labels=targets, logits=logits, name=name)


def nce_loss(weights, biases, labels, inputs, num_sampled: int, num_classes: int, num_true: int = 1,
             sampled_values=None, remove_accidental_hits: bool = False, partition_strategy="mod", name="nce_loss",
             seed=None) -> Tensor:
    """Per-example noise-contrastive estimation loss: logistic regression of true against sampled classes."""
    from trainer.array_ops import reduce_sum as reduce_sum_tf

    logits, targets = _sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes, num_true,
                                      sampled_values, remove_accidental_hits, seed)
    targets = targets * np.asarray(num_true, targets.dtype)  # NCE's targets are 1, not 1/num_true
    return reduce_sum_tf(sigmoid_cross_entropy_with_logits(labels=targets, logits=logits), axis=1, name=name)


# -- more of tf.nn --------------------------------------------------------------------------------
max_pool2d = max_pool
avg_pool2d = avg_pool


def swish(features, name=None) -> Tensor:
    """``x * sigmoid(x)``."""
    return multiply(features, sigmoid(features), name=name)


def crelu(features, name=None, axis: int = -1) -> Tensor:
    """``concat([relu(x), relu(-x)], axis)``."""
    x = convert_to_tensor(features)
    return make_op("Concat", [relu(x), relu(make_op("Neg", [x]).outputs[0])], {"axis": axis}, name=name).outputs[0]


def relu_layer(x, weights, biases, name=None) -> Tensor:
    return relu(xw_plus_b(x, weights, biases), name=name)


def weighted_cross_entropy_with_logits(targets=None, logits=None, pos_weight=1.0, name=None, labels=None) -> Tensor:
    """Sigmoid cross-entropy with the positive term weighted: ``(1 - z) x + (1 + (q - 1) z) log(1 + exp(-x))``
    computed stably."""
    z = convert_to_tensor(labels if labels is not None else targets)
    x = convert_to_tensor(logits)
    q = pos_weight
    log_weight = (z * (q - 1.0)) + 1.0
    softplus_neg_abs = softplus(make_op("Neg", [make_op("Abs", [x]).outputs[0]]).outputs[0])
    relu_neg = relu(make_op("Neg", [x]).outputs[0])
    return make_op("Add", [multiply(subtract(1.0, z), x), multiply(log_weight, softplus_neg_abs + relu_neg)],
                   name=name).outputs[0]


def zero_fraction(value, name=None) -> Tensor:
    """The fraction of entries of ``value`` that are zero."""
    from trainer.array_ops import reduce_mean as reduce_mean_tf

    x = convert_to_tensor(value)
    with x.graph.as_default():
        zero = constant(np.zeros((), x.dtype))
    return reduce_mean_tf(make_op("Cast", [make_op("Equal", [x, zero]).outputs[0]], {"to": 1}).outputs[0], name=name)


def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None, keepdims=None):
    """(count, sum, sum of squares, shift) of ``x`` over ``axes``."""
    from trainer.array_ops import reduce_sum as reduce_sum_tf

    x = convert_to_tensor(x)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    axes = [axes] if isinstance(axes, int) else list(axes)
    count = float(np.prod([x.shape[a] for a in axes]))
    with x.graph.as_default():
        n = constant(np.asarray(count, x.dtype))
    return n, reduce_sum_tf(x, axes, keep), reduce_sum_tf(multiply(x, x), axes, keep), shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """(mean, variance) from sufficient statistics."""
    divisor = make_op("Reciprocal", [counts]).outputs[0]
    mean = multiply(mean_ss, divisor)
    variance = subtract(multiply(variance_ss, divisor), multiply(mean, mean))
    return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) of ``x`` over ``axes`` with each entry weighted."""
    from trainer.array_ops import reduce_sum as reduce_sum_tf

    keep = bool(keepdims if keepdims is not None else keep_dims)
    x = convert_to_tensor(x)
    w = convert_to_tensor(frequency_weights, dtype=x.dtype, graph=x.graph)
    total = reduce_sum_tf(multiply(w, make_op("OnesLike", [x], domain=TRAINER_DOMAIN).outputs[0]), axes, True)
    mean = make_op("Div", [reduce_sum_tf(multiply(w, x), axes, True), total]).outputs[0]
    dev = subtract(x, mean)
    variance = make_op("Div", [reduce_sum_tf(multiply(w, multiply(dev, dev)), axes, True), total]).outputs[0]
    if not keep:
        from trainer.array_ops import squeeze as squeeze_tf

        axes = [axes] if isinstance(axes, int) else list(axes)
        mean, variance = squeeze_tf(mean, axes), squeeze_tf(variance, axes)
    return mean, variance


def local_response_normalization(input, depth_radius: int = 5, bias: float = 1.0, alpha: float = 1.0,  # noqa: A002
                                 beta: float = 0.5, name=None) -> Tensor:
    """TensorFlow's LRN over the last (channel) axis of NHWC ``input``: ``x / (bias + alpha * sqr_sum) ** beta``."""
    size = 2 * depth_radius + 1
    # ONNX LRN divides alpha by the window size and works on axis 1 (NCHW).
    return _in_nchw(input, "NHWC", lambda x: make_op("LRN", [x], {"size": size, "alpha": alpha * size,
                                                                   "beta": beta, "bias": bias}, name=name).outputs[0])


lrn = local_response_normalization


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None, data_format="NHWC",  # noqa: A002
                     dilations=None) -> Tensor:
    """Each input channel convolved with its own ``channel_multiplier`` filters: ``filter`` is
    [h, w, in_channels, channel_multiplier]."""
    filt = convert_to_tensor(filter)
    kh, kw, cin, mult = filt.shape
    fmt = _check_format(data_format)
    st = _spatial(strides, fmt, "strides")
    dil = _spatial(dilations if dilations is not None else (rate or [1, 1]), fmt, "dilations")
    # [h, w, in, mult] -> [in * mult, 1, h, w], grouped by input channel
    w = make_op("Reshape", [make_op("Transpose", [filt], {"perm": [2, 3, 0, 1]}).outputs[0],
                            constant(np.asarray([cin * mult, 1, kh, kw], np.int64))]).outputs[0]
    attrs = {"strides": st, "dilations": dil, "kernel_shape": [kh, kw], "group": cin, **_pads(padding, [kh, kw])}
    return _in_nchw(input, fmt, lambda x: make_op("Conv", [x, w], attrs, name=name).outputs[0])


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None, name=None,  # noqa: A002
                     data_format="NHWC", dilations=None) -> Tensor:
    """A depthwise convolution followed by a 1x1 convolution mixing channels."""
    depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding, rate, None, data_format, dilations)
    return conv2d(depthwise, pointwise_filter, strides=[1, 1, 1, 1], padding="VALID", data_format=data_format,
                  name=name)


def conv2d_transpose(value, filter, output_shape, strides, padding="SAME", data_format="NHWC", name=None,  # noqa: A002
                     input=None, filters=None, dilations=None) -> Tensor:
    """The gradient of conv2d with respect to its input: ``filter`` [h, w, out_channels, in_channels]."""
    filt = convert_to_tensor(filter if filter is not None else filters)
    fmt = _check_format(data_format)
    st = _spatial(strides, fmt, "strides")
    shape = [int(d) for d in output_shape]
    spatial_out = shape[1:3] if fmt == "NHWC" else shape[2:4]
    kh, kw = filt.shape[0], filt.shape[1]
    w = make_op("Transpose", [filt], {"perm": [3, 2, 0, 1]}).outputs[0]  # -> [in, out, h, w] (ONNX)
    attrs = {"strides": st, "kernel_shape": [kh, kw], "output_shape": spatial_out}
    if padding.upper() == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif padding.upper() != "VALID":
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return _in_nchw(value if value is not None else input, fmt,
                    lambda x: make_op("ConvTranspose", [x, w], attrs, name=name).outputs[0])


def conv1d(value=None, filters=None, stride=1, padding="SAME", use_cudnn_on_gpu=None, data_format="NWC", name=None,
           input=None, dilations=None) -> Tensor:  # noqa: A002
    """1-D convolution of [batch, width, in] with ``filters`` [k, in, out], as a conv2d of height 1."""
    from trainer.array_ops import expand_dims, squeeze as squeeze_tf

    if data_format != "NWC":
        raise ValueError("conv1d: only data_format='NWC' is supported")
    x = expand_dims(value if value is not None else input, 1)
    f = expand_dims(filters, 0)
    s = stride if isinstance(stride, int) else stride[1] if len(stride) == 3 else stride[0]
    return squeeze_tf(conv2d(x, f, strides=[1, 1, s, 1], padding=padding), [1], name=name)


def depth_to_space(input, block_size: int, name=None, data_format="NHWC") -> Tensor:  # noqa: A002
    return _in_nchw(input, _check_format(data_format), lambda x: make_op(
        "DepthToSpace", [x], {"blocksize": block_size, "mode": "DCR"}, name=name).outputs[0])


def space_to_depth(input, block_size: int, name=None, data_format="NHWC") -> Tensor:  # noqa: A002
    return _in_nchw(input, _check_format(data_format), lambda x: make_op(
        "SpaceToDepth", [x], {"blocksize": block_size}, name=name).outputs[0])


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon: float = 0.001, data_format="NHWC",
                     is_training: bool = True, name=None):
    """(y, batch_mean, batch_variance): normalization with batch statistics when training, else with
    the given ``mean``/``variance``."""
    fmt = _check_format(data_format)
    axes = [0, 1, 2] if fmt == "NHWC" else [0, 2, 3]
    x = convert_to_tensor(x)
    if is_training:
        mean, variance = moments(x, axes)
    if fmt == "NCHW":
        from trainer.array_ops import reshape as reshape_tf

        shape = [1, -1, 1, 1]
        y = batch_normalization(x, reshape_tf(mean, shape), reshape_tf(variance, shape), reshape_tf(offset, shape),
                                reshape_tf(scale, shape), epsilon, name=name)
    else:
        y = batch_normalization(x, mean, variance, offset, scale, epsilon, name=name)
    return y, mean, variance


def log_poisson_loss(targets, log_input, compute_full_loss: bool = False, name=None) -> Tensor:
    """``exp(log_input) - targets * log_input`` (plus Stirling's term when ``compute_full_loss``)."""
    z = convert_to_tensor(targets)
    c = convert_to_tensor(log_input)
    loss = subtract(make_op("Exp", [c]).outputs[0], multiply(z, c))
    if compute_full_loss:
        safe = make_op("Max", [z, np.asarray(1, z.dtype)]).outputs[0]
        stirling = (multiply(safe, make_op("Log", [safe]).outputs[0]) - safe
                    + multiply(make_op("Log", [multiply(safe, 2.0 * np.pi)]).outputs[0], 0.5))
        keep = make_op("Cast", [make_op("Greater", [z, np.asarray(1, z.dtype)]).outputs[0]],
                       {"to": 1 if z.dtype == np.float32 else 11}).outputs[0]
        loss = loss + multiply(stirling, keep)
    return make_op("Identity", [loss], name=name).outputs[0]


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None, gamma=None, variance_epsilon=None,
                                         scale_after_normalization=None, name=None, input=None,  # noqa: A002
                                         mean=None, variance=None) -> Tensor:
    """TF1's deprecated batch norm: ``(t - m) / sqrt(v + epsilon) * gamma + beta``, gamma used only
    with ``scale_after_normalization``; ``input``/``mean``/``variance`` are the v2 names of t/m/v."""
    t = t if t is not None else input
    m = m if m is not None else mean
    v = v if v is not None else variance
    missing = [what for what, value in (("t", t), ("m", m), ("v", v), ("beta", beta), ("gamma", gamma),
                                        ("variance_epsilon", variance_epsilon),
                                        ("scale_after_normalization", scale_after_normalization)) if value is None]
    if missing:
        raise ValueError(f"batch_norm_with_global_normalization: missing {', '.join(missing)}")
    return batch_normalization(t, m, v, beta, gamma if scale_after_normalization else None, variance_epsilon,
                               name=name)


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None) -> Tensor:
    """sum(per_example_loss * sample_weight) / global_batch_size (default: the batch size, one
    replica), in the loss's dtype (TF's ``tf.nn.compute_average_loss``)."""
    from trainer.ops import cast

    loss = convert_to_tensor(per_example_loss)
    if loss.shape is not None and len(loss.shape) == 0:
        raise ValueError("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank 1, "
                         f"received: {loss}")
    if sample_weight is not None:
        weight = convert_to_tensor(sample_weight)
        loss = multiply(loss, weight if weight.dtype == loss.dtype else cast(weight, loss.dtype))
    if global_batch_size is None:
        global_batch_size = make_op("Gather", [make_op("Shape", [loss]).outputs[0],
                                               constant(np.int64(0))]).outputs[0]
    elif isinstance(global_batch_size, (int, float)) and global_batch_size <= 0:
        raise ValueError(f"compute_average_loss: global_batch_size must be positive, got {global_batch_size}")
    size = convert_to_tensor(global_batch_size)
    return make_op("Div", [reduce_sum(loss), size if size.dtype == loss.dtype else cast(size, loss.dtype)]).outputs[0]


def all_candidate_sampler(true_classes, num_true: int, num_sampled: int, unique: bool, seed=None, name=None):
    """TF1's sampler that "samples" every class: ``(range(num_sampled) as int64, ones like
    true_classes, ones [num_sampled])``, the expected counts all 1 (for testing samplers' users)."""
    true = convert_to_tensor(true_classes)
    if true.shape is not None and (len(true.shape) != 2 or true.shape[1] not in (None, num_true)):
        raise ValueError(f"all_candidate_sampler: true_classes must be [batch_size, num_true={num_true}], "
                         f"got shape {true.shape}")
    if num_sampled < 1:
        raise ValueError(f"all_candidate_sampler: num_sampled must be >= 1, got {num_sampled}")
    sampled = constant(np.arange(num_sampled, dtype=np.int64), name=name)
    true_expected = make_op("ConstantOfShape", [make_op("Shape", [true]).outputs[0]],
                            {"value": np.ones(1, np.float32)}).outputs[0]
    return sampled, true_expected, constant(np.ones(num_sampled, np.float32))


# The recurrent API lives in trainer.rnn / trainer.rnn_cell, N-D convolutions and pools in
# trainer.nn_conv, CTC in trainer.ctc (all build on this module), reached as tf.nn.<name> on first use.
LAZY_ATTRIBUTES = {
    "rnn_cell": ("trainer.rnn_cell", None),
    "dynamic_rnn": ("trainer.rnn", "dynamic_rnn"),
    "static_rnn": ("trainer.rnn", "static_rnn"),
    "bidirectional_dynamic_rnn": ("trainer.rnn", "bidirectional_dynamic_rnn"),
    "static_bidirectional_rnn": ("trainer.rnn", "static_bidirectional_rnn"),
    "raw_rnn": ("trainer.raw_rnn", "raw_rnn"),
    **{name: ("trainer.random_ops", name) for name in (
        "compute_accidental_hits", "fixed_unigram_candidate_sampler", "log_uniform_candidate_sampler",
        "uniform_candidate_sampler")},
    "embedding_lookup_sparse": ("trainer.sparse_tensor", "embedding_lookup_sparse"),
    "safe_embedding_lookup_sparse": ("trainer.sparse_tensor", "safe_embedding_lookup_sparse"),
    **{name: ("trainer.nn_conv", name) for name in (
        "atrous_conv2d", "atrous_conv2d_transpose", "avg_pool1d", "avg_pool3d", "conv1d_transpose", "conv2d_backprop_filter",
        "conv2d_backprop_input", "conv3d", "conv3d_transpose", "convolution", "depthwise_conv2d_native",
        "max_pool1d", "max_pool3d", "max_pool_with_argmax", "pool", "with_space_to_batch")},
    **{name: ("trainer.morphology", name) for name in ("dilation2d", "erosion2d")},
    **{name: ("trainer.fractional_pool", name) for name in ("fractional_avg_pool", "fractional_max_pool")},
    "ctc_loss": ("trainer.ctc", "ctc_loss"),
    "ctc_greedy_decoder": ("trainer.ctc", "ctc_greedy_decoder"),
    "ctc_beam_search_decoder": ("trainer.ctc", "ctc_beam_search_decoder"),
    "collapse_repeated": ("trainer.ctc", "collapse_repeated"),
}


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    raise missing_symbol("tf.nn", name, globals())
