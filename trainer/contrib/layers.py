"""``tf.contrib.layers`` (which ``tf.contrib.slim`` re-exports): initializers, regularizers and the
layers slim-era models are written with.

Every layer takes ``arg_scope`` defaults (it is decorated with ``add_arg_scope``), puts the
variables it creates into MODEL_VARIABLES (and ``variables_collections``: a list, or a dict keyed
by the variable's short name such as ``weights``) and its output into ``outputs_collections``, as
TensorFlow's do.
"""

from __future__ import annotations

import functools
import inspect
import threading

import numpy as np

from trainer import initializers
from trainer.array_ops import reduce_sum
from trainer.contrib.arg_scope import add_arg_scope
from trainer.graph import GraphKeys, control_dependencies, get_default_graph
from trainer.initializers import variance_scaling_initializer, xavier_initializer
from trainer.ops import add_n, convert_to_tensor, identity, make_op, multiply
from trainer.variable_scopes import get_variable, variable_scope

__all__ = [
    "apply_regularization", "avg_pool2d", "batch_norm", "bias_add", "conv2d", "conv2d_transpose", "convolution2d",
    "convolution2d_transpose", "dropout", "elu", "embed_sequence", "flatten", "fully_connected", "l1_regularizer",
    "l2_regularizer", "layer_norm", "linear", "max_pool2d", "one_hot_encoding", "relu", "relu6", "repeat",
    "separable_conv2d", "separable_convolution2d", "softmax", "stack", "sum_regularizer", "unit_norm",
    "variance_scaling_initializer", "xavier_initializer", "xavier_initializer_conv2d",
]

xavier_initializer_conv2d = xavier_initializer


def make_regularizer(name: str, scale: float, penalty):
    """A regularizer: ``penalty(w)`` for a weight tensor ``w``, None where ``scale`` is 0."""
    if scale < 0:
        raise ValueError(f"{name}: scale must be >= 0, got {scale}")

    def regularize(weights):
        if scale == 0:
            return None
        return penalty(convert_to_tensor(weights))

    return regularize


def l2_regularizer(scale: float, scope=None):
    """``w -> scale * sum(w**2) / 2`` (TensorFlow's l2_loss scaled)."""
    return make_regularizer("l2_regularizer", scale, lambda w: multiply(
        reduce_sum(multiply(w, w)), np.asarray(0.5 * scale, w.dtype), name="l2_regularizer"))


def l1_regularizer(scale: float, scope=None):
    """``w -> scale * sum(|w|)``."""
    return make_regularizer("l1_regularizer", scale, lambda w: multiply(
        reduce_sum(make_op("Abs", [w]).outputs[0]), np.asarray(scale, w.dtype), name="l1_regularizer"))


def sum_regularizer(regularizer_list, scope=None):
    def regularize(weights):
        parts = [p for p in (r(weights) for r in regularizer_list) if p is not None]
        return add_n(parts) if parts else None

    return regularize


def apply_regularization(regularizer, weights_list=None):
    """The sum of ``regularizer`` over ``weights_list`` (default: all trainable variables)."""
    from trainer.variables import trainable_variables

    parts = [p for p in (regularizer(w) for w in (weights_list or trainable_variables())) if p is not None]
    if not parts:
        raise ValueError("apply_regularization: the regularizer gave no penalty for any weight")
    return add_n(parts)


def _variables_collections(short_name: str, variables_collections) -> list[str]:
    if isinstance(variables_collections, dict):
        variables_collections = variables_collections.get(short_name)
    if isinstance(variables_collections, str):
        return [variables_collections]
    return list(variables_collections or [])


_nesting = threading.local()  # layer calls open in this thread (a normalizer_fn runs inside its layer)


def _collect(graph, new_variables: list, variables_collections, output, outputs_collections) -> None:
    """File a layer call's new variables under the caller's collections and, from the outermost
    call (so in creation order), under MODEL_VARIABLES; and its output under ``outputs_collections``."""
    outermost = _nesting.depth == 0
    for var in new_variables:
        short = var.op.name.rsplit("/", 1)[-1]
        keys = ([GraphKeys.MODEL_VARIABLES] if outermost else []) + _variables_collections(short, variables_collections)
        for key in keys:
            if not any(v is var for v in graph.get_collection(key)):
                graph.add_to_collection(key, var)
    for key in [outputs_collections] if isinstance(outputs_collections, str) else (outputs_collections or []):
        graph.add_to_collection(key, output)


def contrib_layer(func):
    """A contrib layer: arg_scope-able, filing its variables and output as ``_collect`` says."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def collecting(*args, **kwargs):
        graph = get_default_graph()
        before = len(graph.get_collection(GraphKeys.GLOBAL_VARIABLES))
        _nesting.depth = getattr(_nesting, "depth", 0) + 1
        try:
            output = func(*args, **kwargs)
        finally:
            _nesting.depth -= 1
        arguments = signature.bind(*args, **kwargs).arguments
        _collect(graph, graph.get_collection(GraphKeys.GLOBAL_VARIABLES)[before:],
                 arguments.get("variables_collections"), output, arguments.get("outputs_collections"))
        return output

    return add_arg_scope(collecting)


@contrib_layer
def flatten(inputs, outputs_collections=None, scope=None):
    """[batch, ...] to [batch, everything else]."""
    return make_op("Flatten", [inputs], {"axis": 1}).outputs[0]


RELU_DEFAULT = object()  # TensorFlow's default activation_fn is relu; None means linear


@contrib_layer
def fully_connected(inputs, num_outputs: int, activation_fn=RELU_DEFAULT, normalizer_fn=None, normalizer_params=None,
                    weights_initializer=None, weights_regularizer=None, biases_initializer=initializers.Zeros,
                    biases_regularizer=None, reuse=None, variables_collections=None, outputs_collections=None,
                    trainable: bool = True, scope=None):
    """``activation_fn(inputs @ weights + biases)``; TensorFlow's default activation is relu."""
    x = convert_to_tensor(inputs)
    with variable_scope(scope, default_name="fully_connected", reuse=reuse):
        w = get_variable("weights", [x.shape[-1], num_outputs], dtype=x.dtype,
                         initializer=weights_initializer or initializers.GlorotUniform(),
                         regularizer=weights_regularizer, trainable=trainable)
        y = make_op("MatMul", [x, w]).outputs[0]
        return activate(normalized_or_biased(y, num_outputs, normalizer_fn, normalizer_params, biases_initializer,
                                               biases_regularizer, trainable), activation_fn)


def _fully_connected_with(activation_name: str | None):
    """``fully_connected`` with another default activation (TensorFlow's ``linear``, ``relu``, ...)."""
    from trainer import nn

    activation = None if activation_name is None else getattr(nn, activation_name)
    return functools.partial(fully_connected, activation_fn=activation)


linear = _fully_connected_with(None)
relu = _fully_connected_with("relu")
relu6 = _fully_connected_with("relu6")
elu = _fully_connected_with("elu")


@contrib_layer
def bias_add(inputs, activation_fn=None, initializer=initializers.Zeros, regularizer=None, reuse=None,
             variables_collections=None, outputs_collections=None, trainable: bool = True, data_format: str = "NHWC",
             scope=None):
    """``inputs`` plus ``BiasAdd/biases`` over the last axis (NHWC), then ``activation_fn``."""
    from trainer.nn import bias_add as nn_bias_add

    if data_format != "NHWC":
        raise ValueError(f"contrib.layers.bias_add: only data_format='NHWC' is supported, got {data_format!r}")
    x = convert_to_tensor(inputs)
    with variable_scope(scope, default_name="BiasAdd", reuse=reuse):
        b = get_variable("biases", [x.shape[-1]], dtype=x.dtype, initializer=initializer, regularizer=regularizer,
                         trainable=trainable)
        y = nn_bias_add(x, b)
    return y if activation_fn is None else activation_fn(y)


@contrib_layer
def softmax(logits, scope=None):
    """Softmax over the last axis."""
    from trainer.nn import softmax as nn_softmax

    return nn_softmax(logits, axis=-1)


def normalized_or_biased(y, num_outputs: int, normalizer_fn, normalizer_params, biases_initializer,
                          biases_regularizer, trainable: bool):
    """A layer's product normalized by ``normalizer_fn``, else plus its ``biases`` (in the open scope)."""
    if normalizer_fn is not None:
        return normalizer_fn(y, **(normalizer_params or {}))
    if biases_initializer is None:
        return y
    b = get_variable("biases", [num_outputs], dtype=y.dtype, initializer=biases_initializer,
                     regularizer=biases_regularizer, trainable=trainable)
    return make_op("Add", [y, b]).outputs[0]


def activate(y, activation_fn):
    from trainer.nn import relu

    act = relu if activation_fn is RELU_DEFAULT else activation_fn
    return y if act is None else act(y)


def _pair(v) -> list:
    return [int(v), int(v)] if isinstance(v, (int, np.integer)) else [int(d) for d in v]


@contrib_layer
def conv2d(inputs, num_outputs: int, kernel_size, stride=1, padding: str = "SAME", data_format=None, rate=1,
           activation_fn=RELU_DEFAULT, normalizer_fn=None, normalizer_params=None, weights_initializer=None,
           weights_regularizer=None, biases_initializer=initializers.Zeros, biases_regularizer=None, reuse=None,
           variables_collections=None, outputs_collections=None, trainable: bool = True, scope=None):
    """NHWC convolution with ``Conv/weights`` [h, w, in, out] (and ``Conv/biases``, or the
    normalizer instead); "SAME" padding and relu by default, as TensorFlow's."""
    from trainer.nn import conv2d as nn_conv2d

    if data_format not in (None, "NHWC"):
        raise ValueError(f"contrib.layers.conv2d: only data_format='NHWC' is supported, got {data_format!r}")
    x = convert_to_tensor(inputs)
    (kh, kw), (sh, sw), (dh, dw) = _pair(kernel_size), _pair(stride), _pair(rate)
    with variable_scope(scope, default_name="Conv", reuse=reuse):
        w = get_variable("weights", [kh, kw, x.shape[-1], num_outputs], dtype=x.dtype,
                         initializer=weights_initializer or initializers.GlorotUniform(),
                         regularizer=weights_regularizer, trainable=trainable)
        y = nn_conv2d(x, w, strides=[1, sh, sw, 1], padding=padding.upper(), dilations=[1, dh, dw, 1])
        return activate(normalized_or_biased(y, num_outputs, normalizer_fn, normalizer_params, biases_initializer,
                                               biases_regularizer, trainable), activation_fn)


convolution2d = conv2d

# A transposed convolution's output size from (input size, kernel, stride), per padding.
_TRANSPOSED_SIZES = {"SAME": lambda n, k, s: n * s, "VALID": lambda n, k, s: (n - 1) * s + k}


@contrib_layer
def conv2d_transpose(inputs, num_outputs: int, kernel_size, stride=1, padding: str = "SAME",
                     data_format: str = "NHWC", activation_fn=RELU_DEFAULT, normalizer_fn=None,
                     normalizer_params=None, weights_initializer=None, weights_regularizer=None,
                     biases_initializer=initializers.Zeros, biases_regularizer=None, reuse=None,
                     variables_collections=None, outputs_collections=None, trainable: bool = True, scope=None):
    """The transposed NHWC convolution with ``Conv2d_transpose/weights`` [h, w, out, in]: each
    spatial size becomes ``in * stride`` ("SAME") or ``(in - 1) * stride + kernel`` ("VALID")."""
    from trainer.nn import conv2d_transpose as nn_conv2d_transpose

    if data_format != "NHWC":
        raise ValueError(f"contrib.layers.conv2d_transpose: only data_format='NHWC' is supported, got {data_format!r}")
    x = convert_to_tensor(inputs)
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(stride)
    _, height, width, _ = x.shape
    if height is None or width is None:
        raise ValueError(f"contrib.layers.conv2d_transpose: input {x.name} needs a known height and width, "
                         f"got shape {x.shape}")
    if padding.upper() not in _TRANSPOSED_SIZES:
        raise ValueError(f"contrib.layers.conv2d_transpose: padding must be 'SAME' or 'VALID', got {padding!r}")
    grow = _TRANSPOSED_SIZES[padding.upper()]
    with variable_scope(scope, default_name="Conv2d_transpose", reuse=reuse):
        w = get_variable("weights", [kh, kw, num_outputs, x.shape[-1]], dtype=x.dtype,
                         initializer=weights_initializer or initializers.GlorotUniform(),
                         regularizer=weights_regularizer, trainable=trainable)
        y = nn_conv2d_transpose(x, w, [-1, grow(height, kh, sh), grow(width, kw, sw), num_outputs],
                                [1, sh, sw, 1], padding=padding.upper())
        return activate(normalized_or_biased(y, num_outputs, normalizer_fn, normalizer_params, biases_initializer,
                                               biases_regularizer, trainable), activation_fn)


convolution2d_transpose = conv2d_transpose


@contrib_layer
def separable_conv2d(inputs, num_outputs, kernel_size, depth_multiplier: int = 1, stride=1, padding: str = "SAME",
                     data_format: str = "NHWC", rate=1, activation_fn=RELU_DEFAULT, normalizer_fn=None,
                     normalizer_params=None, weights_initializer=None, pointwise_initializer=None,
                     weights_regularizer=None, biases_initializer=initializers.Zeros, biases_regularizer=None,
                     reuse=None, variables_collections=None, outputs_collections=None, trainable: bool = True,
                     scope=None):
    """A depthwise convolution (``SeparableConv2d/depthwise_weights`` [h, w, in, depth_multiplier])
    then, unless ``num_outputs`` is None, a 1x1 one mixing channels (``pointwise_weights``)."""
    from trainer.nn import conv2d as nn_conv2d, depthwise_conv2d

    if data_format != "NHWC":
        raise ValueError(f"contrib.layers.separable_conv2d: only data_format='NHWC' is supported, got {data_format!r}")
    x = convert_to_tensor(inputs)
    (kh, kw), (sh, sw), (dh, dw) = _pair(kernel_size), _pair(stride), _pair(rate)
    cin = x.shape[-1]
    with variable_scope(scope, default_name="SeparableConv2d", reuse=reuse):
        depthwise = get_variable("depthwise_weights", [kh, kw, cin, depth_multiplier], dtype=x.dtype,
                                 initializer=weights_initializer or initializers.GlorotUniform(),
                                 regularizer=weights_regularizer, trainable=trainable)
        y = depthwise_conv2d(x, depthwise, [1, sh, sw, 1], padding.upper(), dilations=[dh, dw])
        channels = cin * depth_multiplier
        if num_outputs is not None:
            pointwise = get_variable("pointwise_weights", [1, 1, channels, num_outputs], dtype=x.dtype,
                                     initializer=pointwise_initializer or weights_initializer or
                                     initializers.GlorotUniform(), regularizer=weights_regularizer,
                                     trainable=trainable)
            y = nn_conv2d(y, pointwise, strides=[1, 1, 1, 1], padding="VALID")
            channels = num_outputs
        return activate(normalized_or_biased(y, channels, normalizer_fn, normalizer_params, biases_initializer,
                                               biases_regularizer, trainable), activation_fn)


separable_convolution2d = separable_conv2d


def _pool(kind, inputs, kernel_size, stride, padding: str, data_format: str):
    from trainer import nn

    if data_format != "NHWC":
        raise ValueError(f"contrib.layers pools: only data_format='NHWC' is supported, got {data_format!r}")
    (kh, kw), (sh, sw) = _pair(kernel_size), _pair(stride)
    return getattr(nn, kind)(convert_to_tensor(inputs), [1, kh, kw, 1], [1, sh, sw, 1], padding.upper())


@contrib_layer
def max_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID", data_format: str = "NHWC",
               outputs_collections=None, scope=None):
    return _pool("max_pool", inputs, kernel_size, stride, padding, data_format)


@contrib_layer
def avg_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID", data_format: str = "NHWC",
               outputs_collections=None, scope=None):
    return _pool("avg_pool", inputs, kernel_size, stride, padding, data_format)


@contrib_layer
def batch_norm(inputs, decay: float = 0.999, center: bool = True, scale: bool = False, epsilon: float = 0.001,
               activation_fn=None, param_initializers=None, param_regularizers=None, updates_collections="update_ops",
               is_training=True, reuse=None, variables_collections=None, outputs_collections=None,
               trainable: bool = True, batch_weights=None, fused=None, data_format: str = "NHWC",
               zero_debias_moving_mean: bool = False, scope=None, renorm: bool = False, renorm_clipping=None,
               renorm_decay: float = 0.99, adjustment=None):
    """Batch normalization over the last axis with ``BatchNorm/beta`` (``gamma`` only with
    ``scale=True``) and moving statistics updated while ``is_training``: by the ops put in
    ``updates_collections`` (UPDATE_OPS), or, with ``updates_collections=None``, before the output."""
    from trainer.layers import batch_normalization

    if data_format != "NHWC" or batch_weights is not None or renorm:
        raise NotImplementedError("contrib.layers.batch_norm: NHWC only, without batch_weights or renorm")
    if param_regularizers:
        raise NotImplementedError("contrib.layers.batch_norm: param_regularizers is not supported")
    inits = param_initializers or {}
    graph = get_default_graph()
    update_ops = graph.get_collection_ref(GraphKeys.UPDATE_OPS)
    before = len(update_ops)
    with variable_scope(scope, default_name="BatchNorm", reuse=reuse) as opened:  # BatchNorm, BatchNorm_1, ...
        y = batch_normalization(inputs, axis=-1, momentum=decay, epsilon=epsilon, center=center, scale=scale,
                                beta_initializer=inits.get("beta"), gamma_initializer=inits.get("gamma"),
                                moving_mean_initializer=inits.get("moving_mean"),
                                moving_variance_initializer=inits.get("moving_variance"), training=is_training,
                                trainable=trainable, name=opened, reuse=reuse)
    if updates_collections != GraphKeys.UPDATE_OPS:
        moved = update_ops[before:]
        del update_ops[before:]
        if updates_collections is None:  # TensorFlow's in-place updates: the output waits for them
            with control_dependencies(moved):
                y = identity(y)
        else:
            for op in moved:
                graph.add_to_collection(updates_collections, op)
    return y if activation_fn is None else activation_fn(y)


@contrib_layer
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True, outputs_collections=None, scope=None, seed=None):
    """Inputs with a fraction ``1 - keep_prob`` zeroed (and the rest scaled) while ``is_training``."""
    from trainer.layers import dropout as layers_dropout

    return layers_dropout(inputs, rate=1 - keep_prob, noise_shape=noise_shape, seed=seed, training=is_training)


def _layer_calls(inputs, layer, calls: list, scope, default_name: str, kwargs: dict):
    """``layer`` applied once per argument list in ``calls``, as slim's repeat and stack do: inside
    the variable scope ``scope`` (else ``default_name``), the calls scoped ``<scope>_1``, ``_2``, ...
    where ``scope`` defaults to the layer's name."""
    prefix = scope if scope is not None else getattr(layer, "__name__", default_name.lower())
    with variable_scope(scope, default_name=default_name):
        outputs = convert_to_tensor(inputs)
        for i, args in enumerate(calls):
            outputs = layer(outputs, *args, **{**kwargs, "scope": f"{prefix}_{i + 1}"})
        return outputs


def repeat(inputs, repetitions: int, layer, *args, **kwargs):
    """``layer(inputs, *args, **kwargs)`` applied ``repetitions`` times in a row."""
    scope = kwargs.pop("scope", None)
    return _layer_calls(inputs, layer, [args] * repetitions, scope, "Repeat", kwargs)


def stack(inputs, layer, stack_args, **kwargs):
    """``layer`` applied once per entry of ``stack_args`` (a tuple is spread as its arguments)."""
    scope = kwargs.pop("scope", None)
    if not isinstance(stack_args, (list, tuple)):
        raise ValueError(f"stack: stack_args must be a list or tuple, got {type(stack_args).__name__}")
    calls = [entry if isinstance(entry, (list, tuple)) else [entry] for entry in stack_args]
    return _layer_calls(inputs, layer, calls, scope, "Stack", kwargs)


@contrib_layer
def one_hot_encoding(labels, num_classes: int, on_value: float = 1.0, off_value: float = 0.0,
                     outputs_collections=None, scope=None):
    """Float one-hot rows of ``num_classes`` for integer ``labels``."""
    from trainer.array_ops import one_hot

    return one_hot(labels, num_classes, on_value=on_value, off_value=off_value)


@contrib_layer
def unit_norm(inputs, dim: int, epsilon: float = 1e-7, scope=None):
    """``inputs`` divided by their L2 norm along ``dim``."""
    from trainer.nn import l2_normalize

    return l2_normalize(inputs, axis=dim, epsilon=epsilon)


def embed_sequence(ids, vocab_size=None, embed_dim=None, unique: bool = False, initializer=None, regularizer=None,
                   trainable: bool = True, scope=None, reuse=None):
    """[batch, time] ids to [batch, time, embed_dim] rows of ``EmbedSequence/embeddings``."""
    from trainer.nn import embedding_lookup

    with variable_scope(scope, default_name="EmbedSequence", reuse=reuse):
        table = get_variable("embeddings", [int(vocab_size), int(embed_dim)], initializer=initializer or
                             initializers.RandomUniform(-1.0, 1.0), regularizer=regularizer, trainable=trainable)
        return embedding_lookup(table, ids)


@contrib_layer
def layer_norm(inputs, center: bool = True, scale: bool = True, activation_fn=None, reuse=None,
               variables_collections=None, outputs_collections=None, trainable: bool = True,
               begin_norm_axis: int = 1, begin_params_axis: int = -1, scope=None):
    """Normalized over the axes from ``begin_norm_axis`` on, with ``LayerNorm/beta`` and ``gamma``
    over the axes from ``begin_params_axis`` on."""
    from trainer.nn import batch_normalization, moments

    x = convert_to_tensor(inputs)
    rank = len(x.shape)
    norm_axes = list(range(begin_norm_axis % rank, rank))
    params_shape = list(x.shape[begin_params_axis % rank:])
    with variable_scope(scope, default_name="LayerNorm", reuse=reuse):
        beta = get_variable("beta", params_shape, dtype=x.dtype, initializer=initializers.Zeros,
                            trainable=trainable) if center else None
        gamma = get_variable("gamma", params_shape, dtype=x.dtype, initializer=initializers.Ones,
                             trainable=trainable) if scale else None
        mean, variance = moments(x, norm_axes, keep_dims=True)
        y = batch_normalization(x, mean, variance, beta, gamma, 1e-12)
    return y if activation_fn is None else activation_fn(y)


# The rest of the namespace lives in modules of its own, built on the helpers above (so imported last).
from trainer.contrib.layers_extra import (avg_pool3d, conv1d, conv3d, convolution, convolution1d,  # noqa: E402
                                          convolution3d, dense_to_sparse, group_norm, instance_norm,
                                          l1_l2_regularizer, max_pool3d, maxout, pool, summarize_activation,
                                          summarize_activations, summarize_collection, summarize_tensor,
                                          summarize_tensors)
from trainer.contrib.optimize_loss import OPTIMIZER_CLS_NAMES, OPTIMIZER_SUMMARIES, optimize_loss  # noqa: E402
from trainer.nn import safe_embedding_lookup_sparse  # noqa: E402

__all__ += [
    "OPTIMIZER_CLS_NAMES", "OPTIMIZER_SUMMARIES", "avg_pool3d", "conv1d", "conv3d", "convolution", "convolution1d",
    "convolution3d", "dense_to_sparse", "group_norm", "instance_norm", "l1_l2_regularizer", "max_pool3d", "maxout",
    "optimize_loss", "pool", "safe_embedding_lookup_sparse", "summarize_activation", "summarize_activations",
    "summarize_collection", "summarize_tensor", "summarize_tensors",
]

def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.layers", name, globals())
