"""flowstack trainer: the TensorFlow 1.x programming model on NumPy.

Build a graph of ops (placeholders, variables, math), differentiate it, add optimizer updates as
ops, and run parts of it with a Session::

    import numpy as np, trainer
    x = trainer.placeholder(np.float32, (None, 4)); y = trainer.placeholder(np.int64, (None,))
    logits = trainer.layers.dense(x, 3)
    loss = trainer.losses.sparse_softmax_cross_entropy(y, logits)
    train = trainer.train.AdamOptimizer(1e-2).minimize(loss)
    with trainer.Session() as sess:
        sess.run(trainer.global_variables_initializer())
        sess.run(train, {x: xs, y: ys})
"""

from trainer.graph import (
    Graph,
    GraphError,
    GraphKeys,
    Node,
    Tensor,
    control_dependencies,
    device,
    get_default_graph,
    name_scope,
    reset_default_graph,
)
from trainer.ops import (
    abs,
    add,
    add_n,
    argmax,
    cast,
    concat,
    constant,
    divide,
    equal,
    exp,
    gather,
    greater,
    group,
    identity,
    less,
    log,
    make_op,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    no_op,
    ones_like,
    placeholder,
    pow,
    reshape,
    shape,
    sigmoid,
    sqrt,
    square,
    squeeze,
    stop_gradient,
    subtract,
    tanh,
    transpose,
    where,
    zeros_like,
)
from trainer.session import Session
from trainer.errors import FailedPreconditionError, OutOfRangeError
from trainer.variables import (
    Variable,
    global_variables,
    global_variables_initializer,
    local_variables,
    local_variables_initializer,
    trainable_variables,
    variables_initializer,
)
from trainer.gradients import IndexedSlices, gradients
from trainer import inputs, nn, layers, losses, metrics, train, init  # noqa: E402
from trainer.control_flow import cond, while_loop
from trainer.queues import Coordinator, FIFOQueue, QueueRunner, RandomShuffleQueue, start_queue_runners
from trainer.saver import Saver, export_graph, import_graph, latest_checkpoint
from trainer import summary
from trainer.monitored import MonitoredTrainingSession
from trainer import data, errors, estimator, feature_column, saved_model  # noqa: E402  (tf.data, tf.errors, ...)
from trainer.errors import DeadlineExceededError
from trainer.partitioned_variables import (PartitionedVariable, fixed_size_partitioner, min_max_variable_partitioner,
                                           variable_axis_size_partitioner)
from trainer.sync_replicas import ConditionalAccumulator, SparseConditionalAccumulator

__all__ = [
    "ConditionalAccumulator", "DeadlineExceededError", "PartitionedVariable", "SparseConditionalAccumulator",
    "fixed_size_partitioner", "min_max_variable_partitioner", "variable_axis_size_partitioner",
    "Coordinator", "FIFOQueue", "FailedPreconditionError", "MonitoredTrainingSession", "Graph", "GraphError", "GraphKeys", "IndexedSlices", "Node",
    "OutOfRangeError", "QueueRunner", "RandomShuffleQueue", "Saver", "Session", "Tensor", "Variable",
    "abs", "add", "add_n", "argmax", "cast", "concat", "cond", "constant", "control_dependencies", "data", "device",
    "divide", "equal", "errors", "estimator", "saved_model", "exp", "feature_column", "export_graph", "gather", "get_default_graph", "global_variables",
    "global_variables_initializer", "gradients", "greater", "group", "identity", "import_graph", "init", "inputs",
    "latest_checkpoint", "layers", "local_variables", "local_variables_initializer", "less", "log", "losses", "make_op", "matmul", "maximum", "metrics",
    "minimum", "multiply", "name_scope", "negative", "nn", "no_op", "ones_like", "placeholder", "pow",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_sum", "reset_default_graph", "reshape", "shape",
    "sigmoid", "sqrt", "square", "squeeze", "start_queue_runners", "stop_gradient", "subtract", "summary",
    "tanh", "train", "trainable_variables", "transpose", "variables_initializer", "where", "while_loop",
    "zeros_like",
]

# TensorFlow 1.15's spellings and the names TF1 scripts add (trainer/tf1.py); a missing name
# raises an AttributeError naming the TF1 symbol and the nearest supported ones (trainer/compat.py).
from trainer import tf1  # noqa: E402
from trainer.tf1 import *  # noqa: E402,F401,F403

__all__ = sorted(set(__all__) | set(tf1.__all__))


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in tf1.LAZY_ATTRIBUTES:
        return resolve_lazy(name, tf1.LAZY_ATTRIBUTES)
    raise missing_symbol("tf", name, globals())
