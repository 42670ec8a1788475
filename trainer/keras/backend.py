"""``tf.keras.backend`` (K): the session Keras runs in, the learning phase, and thin wrappers over
trainer ops with Keras' names and argument conventions (``axis=``, ``keepdims=``).

Keras in TensorFlow 1.x is graph-mode: layers build ops on the default graph, and ``fit``/``predict``
run them in ``get_session()``, which is the default session when one is active (``with
tf.Session() as sess:``), else one Keras opens on the default graph. Variables a Keras model made
are initialized in that session the first time it is asked for, never re-initialized.
"""

from __future__ import annotations

import builtins  # the module defines Keras' any, all, max, min, sum, abs, round and pow
import collections
import weakref

import numpy as np

import trainer as tf

_FLOATX = ["float32"]
_EPSILON = [1e-7]
_IMAGE_DATA_FORMAT = ["channels_last"]
_SESSION = [None]
_MANUAL_INIT = [False]
# graph -> the learning-phase tensor (placeholder_with_default(False)); an int when fixed by set_learning_phase
_LEARNING_PHASE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_FIXED_PHASE: list = [None]
_UIDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# session -> names of variables known to hold a value in it
_INITIALIZED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def backend() -> str:
    return "tensorflow"


def floatx() -> str:
    return _FLOATX[0]


def set_floatx(value: str) -> None:
    if value not in ("float16", "float32", "float64"):
        raise ValueError(f"Unknown floatx type: {value!r}")
    _FLOATX[0] = value


def epsilon() -> float:
    return _EPSILON[0]


def set_epsilon(value: float) -> None:
    _EPSILON[0] = float(value)


def image_data_format() -> str:
    return _IMAGE_DATA_FORMAT[0]


def set_image_data_format(data_format: str) -> None:
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"Unknown data_format: {data_format!r}")
    _IMAGE_DATA_FORMAT[0] = data_format


def cast_to_floatx(x) -> np.ndarray:
    return np.asarray(x, dtype=floatx())


def get_uid(prefix: str = "") -> int:
    """1, 2, 3, ... per ``prefix`` within the default graph (layer names: dense, dense_1, ...)."""
    graph = tf.get_default_graph()
    counts = _UIDS.setdefault(graph, collections.defaultdict(int))
    counts[prefix] += 1
    return counts[prefix]


def reset_uids() -> None:
    _UIDS.pop(tf.get_default_graph(), None)


# -- learning phase --------------------------------------------------------------------------
def learning_phase() -> "tf.Tensor | int":
    """A bool tensor, False unless fed True (``fit`` feeds True): Dropout and BatchNormalization
    read it. After ``set_learning_phase(v)``, the Python int ``v``."""
    if _FIXED_PHASE[0] is not None:
        return _FIXED_PHASE[0]
    graph = tf.get_default_graph()
    if graph not in _LEARNING_PHASE:
        with graph.as_default(), graph.name_scope(None):
            _LEARNING_PHASE[graph] = tf.placeholder_with_default(tf.constant(False), shape=(),
                                                                 name="keras_learning_phase")
    return _LEARNING_PHASE[graph]


def set_learning_phase(value: int) -> None:
    if value not in (0, 1):
        raise ValueError(f"Expected learning phase to be 0 or 1, got {value!r}")
    _FIXED_PHASE[0] = value


def clear_learning_phase() -> None:
    """Undo ``set_learning_phase``: the learning phase is the fed tensor again."""
    _FIXED_PHASE[0] = None


def learning_phase_is_fed() -> bool:
    """Whether the learning phase is a tensor a run may feed (not fixed by set_learning_phase)."""
    return _FIXED_PHASE[0] is None


def in_train_phase(x, alt, training=None) -> "tf.Tensor":
    """``x`` while training, ``alt`` otherwise; ``training`` a bool, a bool tensor or None (the learning phase)."""
    if training is None:
        training = learning_phase()
    if isinstance(training, (bool, int)) and not isinstance(training, tf.Tensor):
        chosen = x if training else alt
        return chosen() if callable(chosen) else chosen
    x = x() if callable(x) else x
    alt = alt() if callable(alt) else alt
    return tf.where(training, x, alt)


def in_test_phase(x, alt, training=None) -> "tf.Tensor":
    return in_train_phase(alt, x, training)


# -- sessions --------------------------------------------------------------------------------
def get_session() -> "tf.Session":
    """The session Keras runs in, its Keras-made variables initialized (see the module docstring)."""
    graph = tf.get_default_graph()
    default = tf.get_default_session()
    if default is not None and default.graph is graph:
        session = default
    else:
        session = _SESSION[0]
        if session is None or session.graph is not graph or getattr(session, "_closed", False):
            session = tf.Session(graph=graph)
            _SESSION[0] = session
    if not _MANUAL_INIT[0]:
        initialize_variables(session)
    return session


def set_session(session) -> None:
    _SESSION[0] = session


def clear_session() -> None:
    """A fresh default graph and session, as Keras' ``clear_session``."""
    if _SESSION[0] is not None:
        _SESSION[0].close()
    _SESSION[0] = None
    _FIXED_PHASE[0] = None
    tf.reset_default_graph()


def manual_variable_initialization(value: bool) -> None:
    _MANUAL_INIT[0] = bool(value)


def initialize_variables(session) -> None:
    """Run the initializers of the graph's variables that hold no value yet in ``session``."""
    known = _INITIALIZED.setdefault(session, set())
    graph = session.graph
    candidates = [v for v in tf.global_variables(graph=graph) + graph.get_collection(tf.GraphKeys.LOCAL_VARIABLES)
                  if v.op.name not in known]
    if not candidates:
        return
    with session.graph.as_default():
        checks = [tf.is_variable_initialized(v) for v in candidates]
    done = session.run(checks)
    fresh = [v for v, ok in zip(candidates, done) if not ok]
    if fresh:
        session.run([v.initializer for v in fresh])
    known.update(v.op.name for v in candidates)


# -- variables and values --------------------------------------------------------------------
def variable(value, dtype=None, name=None, constraint=None) -> "tf.Variable":
    v = tf.Variable(np.asarray(value, dtype=dtype or floatx()), name=name, constraint=constraint)
    return v


def constant(value, dtype=None, shape=None, name=None) -> "tf.Tensor":
    value = np.asarray(value, dtype=dtype or floatx())
    if shape is not None:
        value = np.broadcast_to(value, shape).copy()
    return tf.constant(value, name=name)


def placeholder(shape=None, ndim=None, dtype=None, sparse: bool = False, name=None) -> "tf.Tensor":
    if sparse:
        raise NotImplementedError("K.placeholder(sparse=True) is not built in flowstack")
    if shape is None and ndim is not None:
        shape = (None,) * ndim
    return tf.placeholder(dtype or floatx(), shape, name=name)


def is_placeholder(x) -> bool:
    return isinstance(x, tf.Tensor) and x.node.op_type == "Placeholder"


def zeros(shape, dtype=None, name=None) -> "tf.Variable":
    return variable(np.zeros(shape), dtype, name)


def ones(shape, dtype=None, name=None) -> "tf.Variable":
    return variable(np.ones(shape), dtype, name)


def eye(size, dtype=None, name=None) -> "tf.Variable":
    return variable(np.eye(size), dtype, name)


def zeros_like(x, dtype=None, name=None) -> "tf.Tensor":
    return tf.zeros_like(x, dtype=dtype, name=name)


def ones_like(x, dtype=None, name=None) -> "tf.Tensor":
    return tf.ones_like(x, dtype=dtype, name=name)


def random_uniform_variable(shape, low, high, dtype=None, name=None, seed=None) -> "tf.Variable":
    return tf.Variable(tf.random_uniform(shape, low, high, dtype=dtype or floatx(), seed=seed), name=name)


def random_normal_variable(shape, mean, scale, dtype=None, name=None, seed=None) -> "tf.Variable":
    return tf.Variable(tf.random_normal(shape, mean, scale, dtype=dtype or floatx(), seed=seed), name=name)


def count_params(x) -> int:
    return int(np.prod(int_shape(x)))


def get_value(x) -> np.ndarray:
    return get_session().run(x.tensor if isinstance(x, tf.Variable) else x)


def batch_get_value(tensors) -> list:
    if not tensors:
        return []
    return get_session().run([t.tensor if isinstance(t, tf.Variable) else t for t in tensors])


def set_value(x, value) -> None:
    batch_set_value([(x, value)])


def batch_set_value(tuples) -> None:
    """Set variables by running their initializers on fed values: no op is added to the graph."""
    tuples = list(tuples)
    if not tuples:
        return
    session = get_session()
    feed = {}
    for var, value in tuples:
        value = np.asarray(value, dtype=var.dtype)
        if tuple(value.shape) != tuple(var.shape):
            raise ValueError(f"set_value: variable {var.op.name} has shape {tuple(var.shape)}, "
                             f"the value has shape {value.shape}")
        feed[var.initial_value] = value
    session.run([var.initializer for var, _ in tuples], feed)


def eval(x):  # noqa: A001 - Keras' name
    return get_value(x)


def dtype(x) -> str:
    return np.dtype(x.dtype).name


def int_shape(x) -> tuple | None:
    shape = x.shape
    return None if shape is None else tuple(None if d is None else int(d) for d in shape)


def ndim(x) -> int | None:
    shape = int_shape(x)
    return None if shape is None else len(shape)


def shape(x) -> "tf.Tensor":
    return tf.shape(x)


def is_sparse(tensor) -> bool:
    return isinstance(tensor, tf.SparseTensor)


def is_keras_tensor(x) -> bool:
    from trainer.keras.engine.base_layer import keras_history

    return keras_history(x) is not None


class Function:
    """``K.function``: run ``outputs`` (and ``updates``) with ``inputs`` fed from a list of values."""

    def __init__(self, inputs, outputs, updates=None, name=None):
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        updates = [u if not isinstance(u, tuple) else tf.assign(u[0], u[1]) for u in (updates or [])]
        self.updates_op = tf.group(*updates) if updates else None

    def __call__(self, inputs):
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ValueError(f"K.function expects {len(self.inputs)} input values, got {len(inputs)}")
        # values as the tensors' dtypes (a learning phase fed 1 or 0 becomes a bool)
        feed = {t: np.asarray(v, dtype=np.dtype(t.dtype)) for t, v in zip(self.inputs, inputs)
                if not isinstance(t, int)}
        fetches = self.outputs + ([self.updates_op] if self.updates_op is not None else [])
        values = get_session().run(fetches, feed)
        return values[:len(self.outputs)]


def function(inputs, outputs, updates=None, **kwargs) -> Function:
    return Function(inputs, outputs, updates, **kwargs)


def gradients(loss, variables) -> list:
    return tf.gradients(loss, variables)


def stop_gradient(variables) -> object:
    return [tf.stop_gradient(v) for v in variables] if isinstance(variables, (list, tuple)) else \
        tf.stop_gradient(variables)


def update(x, new_x) -> "tf.Tensor":
    return tf.assign(x, new_x)


def update_add(x, increment) -> "tf.Tensor":
    return tf.assign_add(x, increment)


def update_sub(x, decrement) -> "tf.Tensor":
    return tf.assign_sub(x, decrement)


def moving_average_update(x, value, momentum) -> "tf.Tensor":
    return tf.assign_sub(x, (x - value) * (1.0 - momentum))


# -- math ------------------------------------------------------------------------------------
def dot(x, y) -> "tf.Tensor":
    if ndim(x) == 2 and ndim(y) == 2:
        return tf.matmul(x, y)
    return tf.tensordot(x, y, [[ndim(x) - 1], [ndim(y) - 2 if ndim(y) > 1 else 0]])


def batch_dot(x, y, axes=None) -> "tf.Tensor":
    if axes is None:
        axes = [ndim(x) - 1, ndim(y) - 2]
    if isinstance(axes, int):
        axes = [axes, axes]
    if ndim(x) == 2 and ndim(y) == 2:
        return tf.reduce_sum(x * y, axis=axes[0], keepdims=True)
    if list(axes) == [ndim(x) - 1, ndim(y) - 2]:
        return tf.matmul(x, y)
    if list(axes) == [ndim(x) - 1, ndim(y) - 1]:
        return tf.matmul(x, y, transpose_b=True)
    raise NotImplementedError(f"K.batch_dot with axes={axes} on ranks {ndim(x)}, {ndim(y)} is not built")


def transpose(x) -> "tf.Tensor":
    return tf.transpose(x)


def gather(reference, indices) -> "tf.Tensor":
    return tf.gather(reference, indices)


def _reduce(fn):
    def reduce(x, axis=None, keepdims: bool = False):
        return fn(x, axis=axis, keepdims=keepdims)
    reduce.__name__ = fn.__name__
    return reduce


max = _reduce(tf.reduce_max)  # noqa: A001 - Keras' names
min = _reduce(tf.reduce_min)  # noqa: A001
sum = _reduce(tf.reduce_sum)  # noqa: A001
prod = _reduce(tf.reduce_prod)
mean = _reduce(tf.reduce_mean)
any = _reduce(tf.reduce_any)  # noqa: A001
all = _reduce(tf.reduce_all)  # noqa: A001


def var(x, axis=None, keepdims: bool = False) -> "tf.Tensor":
    m = tf.reduce_mean(x, axis=axis, keepdims=True)
    return tf.reduce_mean(tf.square(x - m), axis=axis, keepdims=keepdims)


def std(x, axis=None, keepdims: bool = False) -> "tf.Tensor":
    return tf.sqrt(var(x, axis, keepdims))


def argmax(x, axis=-1) -> "tf.Tensor":
    return tf.argmax(x, axis)


def argmin(x, axis=-1) -> "tf.Tensor":
    return tf.argmin(x, axis)


def square(x) -> "tf.Tensor":
    return tf.square(x)


def abs(x):  # noqa: A001
    return tf.abs(x)


def sqrt(x) -> "tf.Tensor":
    return tf.sqrt(tf.maximum(x, 0.0))


def exp(x) -> "tf.Tensor":
    return tf.exp(x)


def log(x) -> "tf.Tensor":
    return tf.log(x)


def round(x):  # noqa: A001
    return tf.round(x)


def sign(x) -> "tf.Tensor":
    return tf.sign(x)


def pow(x, a):  # noqa: A001
    return tf.pow(x, a)


def clip(x, min_value, max_value) -> "tf.Tensor":
    if max_value is not None and min_value is not None and max_value < min_value:
        max_value = min_value
    return tf.clip_by_value(x, min_value, max_value)


def equal(x, y) -> "tf.Tensor":
    return tf.equal(x, y)


def not_equal(x, y) -> "tf.Tensor":
    return tf.not_equal(x, y)


def greater(x, y) -> "tf.Tensor":
    return tf.greater(x, y)


def greater_equal(x, y) -> "tf.Tensor":
    return tf.greater_equal(x, y)


def less(x, y) -> "tf.Tensor":
    return tf.less(x, y)


def less_equal(x, y) -> "tf.Tensor":
    return tf.less_equal(x, y)


def maximum(x, y) -> "tf.Tensor":
    return tf.maximum(x, y)


def minimum(x, y) -> "tf.Tensor":
    return tf.minimum(x, y)


def sin(x) -> "tf.Tensor":
    return tf.sin(x)


def cos(x) -> "tf.Tensor":
    return tf.cos(x)


def cast(x, dtype) -> "tf.Tensor":
    return tf.cast(x, dtype)


def l2_normalize(x, axis=None) -> "tf.Tensor":
    return tf.nn.l2_normalize(x, axis=axis)


def in_top_k(predictions, targets, k) -> "tf.Tensor":
    return tf.nn.in_top_k(predictions, targets, k)


# -- shapes ----------------------------------------------------------------------------------
def concatenate(tensors, axis=-1) -> "tf.Tensor":
    if axis < 0:
        axis = axis % ndim(tensors[0])
    return tf.concat(list(tensors), axis)


def reshape(x, shape) -> "tf.Tensor":
    return tf.reshape(x, shape)


def permute_dimensions(x, pattern) -> "tf.Tensor":
    return tf.transpose(x, list(pattern))


def repeat(x, n) -> "tf.Tensor":
    """[batch, dim] -> [batch, n, dim]."""
    return tf.tile(tf.expand_dims(x, 1), [1, n, 1])


def repeat_elements(x, rep, axis) -> "tf.Tensor":
    """Each slice along ``axis`` repeated ``rep`` times (static sizes)."""
    shape_x = int_shape(x)
    if shape_x[axis] is None:
        raise ValueError("K.repeat_elements needs a known size along the repeated axis")
    splits = tf.split(x, shape_x[axis], axis=axis)
    return tf.concat([s for s in splits for _ in range(rep)], axis)


def arange(start, stop=None, step=1, dtype="int32") -> "tf.Tensor":
    if stop is None:
        start, stop = 0, start
    return tf.range(start, stop, step, dtype=dtype)


def tile(x, n) -> "tf.Tensor":
    return tf.tile(x, n)


def flatten(x) -> "tf.Tensor":
    return tf.reshape(x, [-1])


def batch_flatten(x) -> "tf.Tensor":
    inner = int_shape(x)[1:]
    if None in inner:
        return tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
    return tf.reshape(x, [-1, int(np.prod(inner))])


def expand_dims(x, axis=-1) -> "tf.Tensor":
    return tf.expand_dims(x, axis)


def squeeze(x, axis) -> "tf.Tensor":
    return tf.squeeze(x, [axis])


def stack(x, axis=0) -> "tf.Tensor":
    return tf.stack(x, axis=axis)


def one_hot(indices, num_classes) -> "tf.Tensor":
    return tf.one_hot(indices, num_classes)


def reverse(x, axes) -> "tf.Tensor":
    axes = [axes] if isinstance(axes, int) else list(axes)
    return tf.reverse(x, axes)


def temporal_padding(x, padding=(1, 1)) -> "tf.Tensor":
    return tf.pad(x, [[0, 0], list(padding), [0, 0]])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None) -> "tf.Tensor":
    if (data_format or image_data_format()) == "channels_first":
        return tf.pad(x, [[0, 0], [0, 0], list(padding[0]), list(padding[1])])
    return tf.pad(x, [[0, 0], list(padding[0]), list(padding[1]), [0, 0]])


def switch(condition, then_expression, else_expression) -> "tf.Tensor":
    then_expression = then_expression() if callable(then_expression) else then_expression
    else_expression = else_expression() if callable(else_expression) else else_expression
    return tf.where(condition, then_expression, else_expression)


def print_tensor(x, message: str = "") -> "tf.Tensor":
    return tf.Print(x, [x], message)


def map_fn(fn, elems, name=None, dtype=None) -> "tf.Tensor":
    return tf.map_fn(fn, elems, name=name, dtype=dtype)


def foldl(fn, elems, initializer=None, name=None) -> "tf.Tensor":
    return tf.foldl(fn, elems, initializer=initializer, name=name)


def foldr(fn, elems, initializer=None, name=None) -> "tf.Tensor":
    return tf.foldr(fn, elems, initializer=initializer, name=name)


def to_dense(tensor) -> "tf.Tensor":
    return tf.sparse.to_dense(tensor) if is_sparse(tensor) else tensor


# -- nn --------------------------------------------------------------------------------------
def relu(x, alpha: float = 0.0, max_value=None, threshold: float = 0) -> "tf.Tensor":
    if alpha != 0.0 or threshold != 0:
        negative = tf.nn.relu(-x + threshold)
        x = tf.where(tf.greater(x, threshold), x, tf.zeros_like(x)) if threshold != 0 else tf.nn.relu(x)
        if alpha != 0.0:
            x = x - alpha * negative
    else:
        x = tf.nn.relu(x)
    if max_value is not None:
        x = tf.minimum(x, float(max_value))
    return x


def elu(x, alpha: float = 1.0) -> "tf.Tensor":
    y = tf.nn.elu(x)
    return y if alpha == 1 else tf.where(tf.greater(x, 0.0), y, alpha * y)


def softmax(x, axis: int = -1) -> "tf.Tensor":
    return tf.nn.softmax(x, axis=axis)


def softplus(x) -> "tf.Tensor":
    return tf.nn.softplus(x)


def softsign(x) -> "tf.Tensor":
    return tf.nn.softsign(x)


def sigmoid(x) -> "tf.Tensor":
    return tf.sigmoid(x)


def hard_sigmoid(x) -> "tf.Tensor":
    return tf.clip_by_value(0.2 * x + 0.5, 0.0, 1.0)


def tanh(x) -> "tf.Tensor":
    return tf.tanh(x)


def dropout(x, level, noise_shape=None, seed=None) -> "tf.Tensor":
    """``x`` with a fraction ``level`` zeroed and the rest scaled by 1 / (1 - level); with ``noise_shape``,
    one draw per entry of that shape, broadcast (SpatialDropout drops whole channels)."""
    if noise_shape is None:
        return tf.nn.dropout(x, rate=level, seed=seed)
    keep = 1.0 - level
    mask = tf.floor(keep + tf.random_uniform(shape_value(noise_shape), 0.0, 1.0, dtype=x.dtype, seed=seed))
    return x * mask / keep


def bias_add(x, bias, data_format=None) -> "tf.Tensor":
    return tf.nn.bias_add(x, bias)


def categorical_crossentropy(target, output, from_logits: bool = False, axis: int = -1) -> "tf.Tensor":
    """Keras' form: probabilities are renormalized and clipped to [eps, 1 - eps] before the log."""
    if from_logits:
        return tf.nn.softmax_cross_entropy_with_logits_v2(labels=target, logits=output)
    output = output / tf.reduce_sum(output, axis, keepdims=True)
    output = tf.clip_by_value(output, epsilon(), 1.0 - epsilon())
    return -tf.reduce_sum(target * tf.log(output), axis)


def sparse_categorical_crossentropy(target, output, from_logits: bool = False, axis: int = -1) -> "tf.Tensor":
    """Integer ``target`` of rank one less than ``output``; probabilities clipped as Keras clips them."""
    logits = output if from_logits else tf.log(tf.clip_by_value(output, epsilon(), 1.0 - epsilon()))
    labels = tf.cast(target, tf.int64)
    out_shape = int_shape(output)
    if len(out_shape) == 2:
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.reshape(labels, [-1]), logits=logits)
    flat = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.reshape(labels, [-1]),
                                                          logits=tf.reshape(logits, [-1, out_shape[-1]]))
    return tf.reshape(flat, tf.shape(labels))


def binary_crossentropy(target, output, from_logits: bool = False) -> "tf.Tensor":
    if not from_logits:
        output = tf.clip_by_value(output, epsilon(), 1.0 - epsilon())
        output = tf.log(output / (1.0 - output))
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=output)


def conv1d(x, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1) -> "tf.Tensor":
    return tf.nn.conv1d(x, kernel, stride=strides, padding=padding.upper())


def conv2d(x, kernel, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1)) -> "tf.Tensor":
    return tf.nn.conv2d(x, kernel, strides=[1, *strides, 1], padding=padding.upper(),
                        dilations=[1, *dilation_rate, 1])


def pool2d(x, pool_size, strides=(1, 1), padding="valid", data_format=None, pool_mode="max") -> "tf.Tensor":
    pools = {"max": tf.nn.max_pool, "avg": tf.nn.avg_pool}
    if pool_mode not in pools:
        raise ValueError(f"Invalid pool_mode: {pool_mode!r} (expected 'max' or 'avg')")
    return pools[pool_mode](x, [1, *pool_size, 1], [1, *strides, 1], padding.upper())


def shape_value(shape) -> object:
    """``shape`` as random ops take it: a list of ints as is, one mixing ints and scalar tensors
    (``(K.shape(x)[0], 4)``, a VAE's sampling) stacked into one int64 tensor."""
    if isinstance(shape, tf.Tensor) or not builtins.any(isinstance(d, tf.Tensor) for d in shape):
        return shape
    return tf.stack([tf.cast(d, tf.int64) if isinstance(d, tf.Tensor) else tf.constant(np.int64(d)) for d in shape])


def random_normal(shape, mean: float = 0.0, stddev: float = 1.0, dtype=None, seed=None) -> "tf.Tensor":
    return tf.random_normal(shape_value(shape), mean, stddev, dtype=dtype or floatx(), seed=seed)


def random_uniform(shape, minval: float = 0.0, maxval: float = 1.0, dtype=None, seed=None) -> "tf.Tensor":
    return tf.random_uniform(shape_value(shape), minval, maxval, dtype=dtype or floatx(), seed=seed)


def truncated_normal(shape, mean: float = 0.0, stddev: float = 1.0, dtype=None, seed=None) -> "tf.Tensor":
    return tf.truncated_normal(shape_value(shape), mean, stddev, dtype=dtype or floatx(), seed=seed)


def random_binomial(shape, p: float = 0.0, dtype=None, seed=None) -> "tf.Tensor":
    dtype = dtype or floatx()
    return tf.cast(tf.less(tf.random_uniform(shape_value(shape), 0.0, 1.0, seed=seed), p), dtype)


def batch_normalization(x, mean, var, beta, gamma, axis: int = -1, epsilon: float = 1e-3) -> "tf.Tensor":
    return tf.nn.batch_normalization(x, mean, var, beta, gamma, epsilon)


def normalize_batch_in_training(x, gamma, beta, reduction_axes, epsilon: float = 1e-3) -> tuple:
    """(normalized x, batch mean, batch variance) over ``reduction_axes``."""
    mean, variance = tf.nn.moments(x, list(reduction_axes))
    return tf.nn.batch_normalization(x, mean, variance, beta, gamma, epsilon), mean, variance


def separable_conv2d(x, depthwise_kernel, pointwise_kernel, strides=(1, 1), padding="valid", data_format=None,
                     dilation_rate=(1, 1)):
    return tf.nn.separable_conv2d(x, depthwise_kernel, pointwise_kernel, [1, *strides, 1], padding.upper())


def conv2d_transpose(x, kernel, output_shape, strides=(1, 1), padding="valid", data_format=None,
                     dilation_rate=(1, 1)):
    return tf.nn.conv2d_transpose(x, kernel, output_shape, [1, *strides, 1], padding.upper())


def conv3d(x, kernel, strides=(1, 1, 1), padding="valid", data_format=None, dilation_rate=(1, 1, 1)) -> "tf.Tensor":
    return tf.nn.conv3d(x, kernel, [1, *strides, 1], padding.upper())


def pool3d(x, pool_size, strides=(1, 1, 1), padding="valid", data_format=None, pool_mode="max") -> "tf.Tensor":
    pools = {"max": tf.nn.max_pool3d, "avg": tf.nn.avg_pool3d}
    if pool_mode not in pools:
        raise ValueError(f"Invalid pool_mode: {pool_mode!r} (expected 'max' or 'avg')")
    return pools[pool_mode](x, [1, *pool_size, 1], [1, *strides, 1], padding.upper())


def resize_images(x, height_factor: int, width_factor: int, data_format=None,
                  interpolation: str = "nearest") -> "tf.Tensor":
    """Nearest-neighbour upsampling of NHWC ``x`` by integer factors."""
    if (data_format or image_data_format()) != "channels_last":
        raise NotImplementedError("K.resize_images(data_format='channels_first') is not built in flowstack")
    if interpolation != "nearest":
        raise NotImplementedError(f"K.resize_images(interpolation={interpolation!r}) is not built in flowstack")
    return repeat_elements(repeat_elements(x, height_factor, 1), width_factor, 2)


def resize_volumes(x, depth_factor: int, height_factor: int, width_factor: int, data_format=None) -> "tf.Tensor":
    """Nearest-neighbour upsampling of NDHWC ``x`` by integer factors."""
    if (data_format or image_data_format()) != "channels_last":
        raise NotImplementedError("K.resize_volumes(data_format='channels_first') is not built in flowstack")
    for axis, factor in zip((1, 2, 3), (depth_factor, height_factor, width_factor)):
        x = repeat_elements(x, factor, axis)
    return x


def spatial_3d_padding(x, padding=((1, 1), (1, 1), (1, 1)), data_format=None) -> "tf.Tensor":
    return tf.pad(x, [[0, 0], *[list(p) for p in padding], [0, 0]])


def _masked(mask_t, out, new_states: list, previous, states: list, zero_output: bool):
    """A step's output and states where ``mask_t`` [batch] is 0: the previous output (or zeros) and
    the states kept, as Keras holds them over masked timesteps."""
    keep = tf.reshape(tf.cast(mask_t, out.dtype), [-1] + [1] * (len(int_shape(out)) - 1))
    held = tf.zeros_like(out) if zero_output else previous
    return keep * out + (1.0 - keep) * held, [keep * n + (1.0 - keep) * s for n, s in zip(new_states, states)]


def rnn(step_function, inputs, initial_states, go_backwards: bool = False, mask=None, constants=None,
        unroll: bool = False, input_length=None, time_major: bool = False, zero_output_for_mask: bool = False):
    """Keras' ``K.rnn`` over [batch, time, ...] ``inputs``: ``step_function(x_t, states) -> (output,
    new_states)``; returns (last output, outputs [batch, time, ...], last states). Unrolled when the
    number of timesteps is known, a ``while_loop`` over TensorArrays when it is not (variable-length
    inputs such as ``Input(shape=(None, features))``)."""
    if time_major:
        raise NotImplementedError("K.rnn(time_major=True) is not built in flowstack")
    if int_shape(inputs)[1] is None:
        return _rnn_loop(step_function, inputs, list(initial_states), go_backwards, mask, list(constants or []),
                         zero_output_for_mask)
    steps = int_shape(inputs)[1]
    states, outputs, output = list(initial_states), [], None
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    for t in order:
        out, new_states = step_function(inputs[:, t], states + list(constants or []))
        new_states = list(new_states) if isinstance(new_states, (list, tuple)) else [new_states]
        if mask is not None:
            previous = output if output is not None else tf.zeros_like(out)
            out, new_states = _masked(mask[:, t], out, new_states, previous, states, zero_output_for_mask)
        output, states = out, list(new_states)
        outputs.append(out)
    return output, tf.stack(outputs, axis=1), states


def _time_major(tensor, go_backwards: bool):
    rank = len(int_shape(tensor))
    major = tf.transpose(tensor, [1, 0] + list(range(2, rank)))
    return tf.reverse(major, [0]) if go_backwards else major


def _rnn_loop(step_function, inputs, states: list, go_backwards: bool, mask, constants: list, zero_output: bool):
    steps = tf.shape(inputs)[1]
    xs = tf.TensorArray(inputs.dtype, size=steps).unstack(_time_major(inputs, go_backwards))
    masks = None if mask is None else tf.TensorArray(tf.bool, size=steps).unstack(
        _time_major(tf.cast(mask, tf.bool), go_backwards))
    # the first step's output, traced once more, gives the output's shape for the loop's first "previous"
    first, _ = step_function(xs.read(0), states + constants)
    outputs = tf.TensorArray(first.dtype, size=steps)

    def body(t, outputs, previous, *states):
        states = list(states)
        out, new_states = step_function(xs.read(t), states + constants)
        new_states = list(new_states) if isinstance(new_states, (list, tuple)) else [new_states]
        if masks is not None:
            out, new_states = _masked(masks.read(t), out, new_states, previous, states, zero_output)
        return (t + 1, outputs.write(t, out), out, *new_states)

    final = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), outputs, tf.zeros_like(first), *states))
    stacked = final[1].stack()
    rank = len(int_shape(first)) + 1
    return final[2], tf.transpose(stacked, [1, 0] + list(range(2, rank))), list(final[3:])


def ctc_label_dense_to_sparse(labels, label_lengths) -> "tf.SparseTensor":
    """Dense [batch, max_length] labels, each row ``label_lengths`` long, as a SparseTensor."""
    labels = tf.convert_to_tensor(labels)
    mask = tf.sequence_mask(label_lengths, tf.shape(labels)[1])
    indices = tf.where(mask)
    return tf.SparseTensor(indices, tf.cast(tf.gather_nd(labels, indices), tf.int32),
                           tf.cast(tf.shape(labels), tf.int64))


def ctc_batch_cost(y_true, y_pred, input_length, label_length) -> "tf.Tensor":
    """[batch, 1] CTC losses of softmax outputs ``y_pred`` [batch, time, classes] (the blank class last)
    for dense labels ``y_true``; lengths are [batch, 1], as Keras' OCR examples build them."""
    label_length = tf.cast(tf.reshape(label_length, [-1]), tf.int32)
    input_length = tf.cast(tf.reshape(input_length, [-1]), tf.int32)
    sparse_labels = ctc_label_dense_to_sparse(tf.cast(y_true, tf.int32), label_length)
    log_probabilities = tf.log(tf.transpose(y_pred, [1, 0, 2]) + epsilon())
    return tf.expand_dims(tf.nn.ctc_loss(sparse_labels, log_probabilities, input_length), 1)


def ctc_decode(y_pred, input_length, greedy: bool = True, beam_width: int = 100, top_paths: int = 1) -> tuple:
    """(a list of [batch, length] decodings padded with -1, their log probabilities), greedy or by beam search."""
    log_probabilities = tf.log(tf.transpose(y_pred, [1, 0, 2]) + epsilon())
    input_length = tf.cast(tf.reshape(input_length, [-1]), tf.int32)
    if greedy:
        decoded, log_prob = tf.nn.ctc_greedy_decoder(log_probabilities, input_length)
    else:
        decoded, log_prob = tf.nn.ctc_beam_search_decoder(log_probabilities, input_length, beam_width=beam_width,
                                                          top_paths=top_paths)
    dense = [tf.sparse.to_dense(st, default_value=-1) for st in decoded]
    return dense, log_prob


class name_scope:  # noqa: N801 - Keras' name
    """``K.name_scope(name)``: the default graph's name scope."""

    def __init__(self, name):
        self.name = name
        self._scope = None

    def __enter__(self):
        self._scope = tf.name_scope(self.name)
        return self._scope.__enter__()

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.backend", name, globals())
