"""``tf.contrib.framework``: the variable, checkpoint, arg_scope and tensor-checking helpers that
slim-era fine-tuning scripts import from it (``get_variables_to_restore(exclude=...)``,
``assign_from_checkpoint_fn``, ``arg_scope``, ...). Most are the ones ``tf.contrib.slim`` already
has; the rest are here."""

from __future__ import annotations

import functools
import re
from typing import Any, Callable

import numpy as np

from trainer import tf_logging
from trainer.array_ops import assign, reduce_sum, sort, zeros_like
from trainer.checkpoint_utils import init_from_checkpoint, list_variables, load_variable
from trainer.checkpoint_utils import load_checkpoint_reader as load_checkpoint
from trainer.contrib.arg_scope import add_arg_scope, arg_scope, arg_scoped_arguments, current_arg_scope, has_arg_scope
from trainer.contrib.model_variables import (add_model_variable, assign_from_checkpoint_fn, get_local_variables,
                                             get_model_variables, get_trainable_variables, get_unique_variable,
                                             get_variable_full_name, get_variables, get_variables_by_name,
                                             get_variables_by_suffix, get_variables_to_restore, global_variable,
                                             local_variable, model_variable, variable)
from trainer.graph import Graph, Tensor, get_default_graph
from trainer.graph_extras import is_numeric_tensor
from trainer.ops import add_n, convert_to_tensor, group, placeholder
from trainer.sparse_tensor import SparseTensor, SparseTensorValue
from trainer.special_math import is_non_decreasing, is_strictly_increasing
from trainer.train import assert_global_step, get_global_step, get_or_create_global_step
from trainer.variables import global_variables

__all__ = [
    "VariableDeviceChooser", "add_arg_scope", "add_model_variable", "arg_scope", "arg_scoped_arguments",
    "assert_global_step", "assert_or_get_global_step", "assert_same_float_dtype", "assert_scalar",
    "assert_scalar_int", "assign_from_checkpoint", "assign_from_checkpoint_fn", "assign_from_values",
    "assign_from_values_fn", "convert_to_tensor_or_sparse_tensor", "create_global_step", "current_arg_scope",
    "deprecated", "deprecated_arg_values", "deprecated_args", "filter_variables", "get_global_step",
    "get_graph_from_inputs", "get_local_variables", "get_model_variables", "get_name_scope",
    "get_or_create_global_step", "get_trainable_variables", "get_unique_variable", "get_variable_full_name",
    "get_variables", "get_variables_by_name", "get_variables_by_suffix", "get_variables_to_restore",
    "global_variable", "has_arg_scope", "init_from_checkpoint", "is_non_decreasing", "is_numeric_tensor",
    "is_strictly_increasing", "is_tensor",
    "list_variables", "load_checkpoint", "load_variable", "local_variable", "model_variable", "nest",
    "prepend_name_scope", "reduce_sum_n", "remove_squeezable_dimensions", "sort", "strip_name_scope",
    "variable", "with_same_shape", "with_shape", "zero_initializer",
]


def _nest():
    import trainer

    return trainer.nest


def __getattr__(name: str):
    if name == "nest":
        return _nest()
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.framework", name, globals())


# -- global step -------------------------------------------------------------------------------------
def create_global_step(graph: Graph | None = None):
    """A new global step; a ValueError if the graph has one already (get_or_create_global_step reuses it)."""
    if get_global_step(graph) is not None:
        raise ValueError("global_step already exists.")
    return get_or_create_global_step(graph)


def assert_or_get_global_step(graph: Graph | None = None, global_step_tensor=None):
    """``global_step_tensor`` checked to be a global step, or the graph's own (None if it has none)."""
    if global_step_tensor is None:
        return get_global_step(graph)
    assert_global_step(global_step_tensor)
    return global_step_tensor


# -- tensor checks -----------------------------------------------------------------------------------
def is_tensor(x) -> bool:
    """Whether ``x`` is a graph value: a Tensor, a variable (anything reading as one) or a SparseTensor."""
    return isinstance(x, (Tensor, SparseTensor)) or hasattr(x, "as_tensor")


def assert_scalar(tensor, name=None):
    """``tensor`` as a tensor, checked to be a scalar where its rank is known."""
    t = convert_to_tensor(tensor)
    if t.shape is not None and len(t.shape) != 0:
        raise ValueError(f"Expected scalar shape for {t.name}, saw shape: {tuple(t.shape)}.")
    return t


def assert_scalar_int(tensor, name=None):
    """``tensor`` checked to be an integer scalar."""
    t = assert_scalar(tensor, name)
    if np.dtype(t.dtype).kind not in "iu":
        raise ValueError(f"Expected integer type for {t.name}, saw {np.dtype(t.dtype).name}.")
    return t


def assert_same_float_dtype(tensors=None, dtype=None):
    """The one float dtype of ``tensors`` (and ``dtype``), float32 when none is given; ValueError if
    they disagree or it is not a float."""
    dtypes = {np.dtype(t.dtype) for t in tensors or () if t is not None}
    if dtype is not None:
        dtypes.add(np.dtype(dtype.as_numpy_dtype if hasattr(dtype, "as_numpy_dtype") else dtype))
    if len(dtypes) > 1:
        raise ValueError(f"Expected one float dtype, got {sorted(d.name for d in dtypes)}.")
    found = dtypes.pop() if dtypes else np.dtype(np.float32)
    if found.kind != "f":
        raise ValueError(f"Expected floating point type, got {found.name}.")
    return found


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """A SparseTensor (or SparseTensorValue) as a SparseTensor, anything else as a Tensor."""
    if isinstance(value, SparseTensorValue):
        value = SparseTensor(value.indices, value.values, value.dense_shape)
    if isinstance(value, SparseTensor):
        if dtype is not None and np.dtype(value.dtype) != np.dtype(dtype):
            raise ValueError(f"Sparse dtype: requested = {np.dtype(dtype).name}, actual = {np.dtype(value.dtype).name}")
        return value
    return convert_to_tensor(value, dtype=dtype)


def get_graph_from_inputs(op_input_list, graph: Graph | None = None) -> Graph:
    """The one graph every tensor of ``op_input_list`` (and ``graph``) belongs to; the default graph
    when they name none."""
    graphs = {id(g): g for g in ([graph] if graph is not None else [])}
    for item in op_input_list or ():
        g = getattr(item, "graph", None)
        if g is not None:
            graphs[id(g)] = g
    if len(graphs) > 1:
        raise ValueError(f"{list(op_input_list)} must be from the same graph.")
    return next(iter(graphs.values()), None) or get_default_graph()


def reduce_sum_n(tensors, name=None):
    """The sum of every element of every tensor in ``tensors``."""
    if not tensors:
        raise ValueError("No tensors provided.")
    sums = [reduce_sum(convert_to_tensor(t)) for t in tensors]
    return sums[0] if len(sums) == 1 else add_n(sums, name=name)


def remove_squeezable_dimensions(predictions, labels, name=None):
    """``predictions`` and ``labels`` with a trailing size-1 axis squeezed from whichever has one
    more axis than the other (static ranks)."""
    from trainer.array_ops import squeeze

    predictions, labels = convert_to_tensor(predictions), convert_to_tensor(labels)
    if predictions.shape is None or labels.shape is None:
        return predictions, labels
    rank_p, rank_l = len(predictions.shape), len(labels.shape)
    if rank_p == rank_l + 1 and predictions.shape[-1] in (1, None):
        predictions = squeeze(predictions, [-1])
    elif rank_l == rank_p + 1 and labels.shape[-1] in (1, None):
        labels = squeeze(labels, [-1])
    return predictions, labels


def _compatible(expected, actual) -> bool:
    return len(expected) == len(actual) and all(e is None or a is None or int(e) == int(a)
                                                for e, a in zip(expected, actual))


def with_shape(expected_shape, tensor):
    """``tensor``, checked against ``expected_shape`` where both are known; where the tensor's shape is
    not known when the graph is built, the check runs with the step."""
    from trainer.debugging import assert_equal
    from trainer.graph import control_dependencies
    from trainer.ops import identity, shape

    t = convert_to_tensor(tensor)
    expected = [None if d is None or int(d) < 0 else int(d) for d in np.asarray(expected_shape).reshape(-1)]
    if t.shape is not None and None not in t.shape:
        if not _compatible(expected, t.shape):
            raise ValueError(f"Invalid shape for tensor {t.name}, expected {expected}, got {list(t.shape)}.")
        return t
    if None in expected:
        raise ValueError(f"with_shape: the expected shape {expected} of {t.name} must be fully known when the "
                         "tensor's is not")
    with control_dependencies([assert_equal(shape(t), np.asarray(expected, np.int64),
                                            message=f"Wrong shape for {t.name}")]):
        return identity(t)


def with_same_shape(expected_tensor, tensor):
    """``tensor``, checked to have ``expected_tensor``'s (static) shape."""
    expected = convert_to_tensor(expected_tensor)
    if expected.shape is None:
        raise ValueError(f"with_same_shape: the shape of {expected.name} is not known")
    return with_shape([-1 if d is None else d for d in expected.shape], tensor)


# -- deprecation decorators ----------------------------------------------------------------------------
def deprecated(date, instructions, warn_once: bool = True):
    """A decorator logging, at the function's first call (or every call), that it is deprecated."""
    def decorate(func: Callable) -> Callable:
        warned = [False]

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not (warn_once and warned[0]):
                warned[0] = True
                when = "in a future version" if date is None else f"after {date}"
                tf_logging.warning("%s (from %s) is deprecated and will be removed %s.\nInstructions for updating:\n%s",
                                   func.__name__, func.__module__, when, instructions)
            return func(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_args(date, instructions, *deprecated_arg_names_or_tuples, **kwargs):
    """A decorator logging when any of the named arguments is passed (a (name, value) pair: when it
    is passed with that value)."""
    watched = [item if isinstance(item, tuple) else (item, None) for item in deprecated_arg_names_or_tuples]
    if not watched:
        raise ValueError("Specify which argument is deprecated.")
    warn_once = kwargs.get("warn_once", True)

    def decorate(func: Callable) -> Callable:
        import inspect

        signature = inspect.signature(func)
        warned: set = set()

        @functools.wraps(func)
        def wrapper(*args, **kw):
            bound = signature.bind_partial(*args, **kw).arguments
            for name, value in watched:
                if name in bound and (value is None or bound[name] == value):
                    if not (warn_once and name in warned):
                        warned.add(name)
                        tf_logging.warning("Calling %s (from %s) with %s is deprecated and will be removed %s.\n"
                                           "Instructions for updating:\n%s", func.__name__, func.__module__, name,
                                           "in a future version" if date is None else f"after {date}", instructions)
            return func(*args, **kw)

        return wrapper

    return decorate


def deprecated_arg_values(date, instructions, warn_once: bool = True, **deprecated_kwargs):
    """A decorator logging when an argument is passed with the value ``deprecated_kwargs`` names."""
    if not deprecated_kwargs:
        raise ValueError("Specify which argument values are deprecated.")
    return deprecated_args(date, instructions, *deprecated_kwargs.items(), warn_once=warn_once)


# -- names ------------------------------------------------------------------------------------------------
def get_name_scope() -> str:
    """The default graph's current name scope, without the trailing slash."""
    return get_default_graph().get_name_scope()


def strip_name_scope(name: str, export_scope: str | None) -> str:
    """``name`` without the leading ``export_scope/`` (control inputs ``^`` and colocations ``loc:@`` kept)."""
    if not export_scope:
        return name
    return re.sub(r"([\^]|loc:@|^)" + re.escape(export_scope) + r"[\/]+(.*)", r"\1\2", name, count=1)


def prepend_name_scope(name: str, import_scope: str | None) -> str:
    """``name`` under ``import_scope/`` (control inputs ``^`` and colocations ``loc:@`` kept)."""
    if not import_scope:
        return name
    return re.sub(r"([\^]|loc:@|^)(.*)", lambda m: m.group(1) + import_scope + "/" + m.group(2), name, count=1)


# -- variables ------------------------------------------------------------------------------------------
def filter_variables(var_list, include_patterns=None, exclude_patterns=None, reg_search: bool = True):
    """The variables of ``var_list`` whose op names match one of ``include_patterns`` (all, if None)
    and none of ``exclude_patterns`` (regular expressions: searched anywhere, or matched at the start
    with ``reg_search=False``)."""
    find = re.search if reg_search else re.match

    def matches(patterns, name):
        return any(find(p, name) for p in patterns)

    kept = []
    for v in var_list:
        name = v.op.name
        if include_patterns is not None and not matches(include_patterns, name):
            continue
        if exclude_patterns is not None and matches(exclude_patterns, name):
            continue
        kept.append(v)
    return kept


def zero_initializer(ref, use_locking: bool = True, name: str = "zero_initializer"):
    """An op setting the variable ``ref`` to zeros."""
    return assign(ref, zeros_like(ref), name=name)


def _named(var_list) -> dict[str, Any]:
    if isinstance(var_list, dict):
        return dict(var_list)
    return {v.op.name: v for v in var_list}


def assign_from_values(var_names_to_values: dict):
    """(assign_op, feed_dict) setting each variable named (op name, as in global_variables()) to its
    value when the op runs with the feed: values go in by feed, not as constants in the graph."""
    by_name = {v.op.name: v for v in global_variables()}
    unknown = sorted(set(var_names_to_values) - set(by_name))
    if unknown:
        raise ValueError(f"Variables {unknown} were not found.")
    return _assign_by_feed({by_name[name]: value for name, value in var_names_to_values.items()})


def assign_from_values_fn(var_names_to_values: dict) -> Callable:
    """``fn(session)`` running ``assign_from_values``' op with its feed."""
    op, feed = assign_from_values(var_names_to_values)
    return lambda session: session.run(op, feed)


def assign_from_checkpoint(model_path: str, var_list, ignore_missing_vars: bool = False):
    """(assign_op, feed_dict) setting the variables of ``var_list`` (a list, or {name in the
    checkpoint: variable}) to the checkpoint's values."""
    reader = load_checkpoint(model_path)
    stored = dict(reader.get_variable_to_shape_map())
    values = {}
    for name, var in _named(var_list).items():
        if name not in stored:
            if ignore_missing_vars:
                tf_logging.warning("Variable %s missing in checkpoint %s", name, model_path)
                continue
            raise ValueError(f"Tensor {name} is not found in {model_path} checkpoint")
        values[var] = reader.get_tensor(name)
    return _assign_by_feed(values)


def _assign_by_feed(values: dict):
    ops, feed = [], {}
    for var, value in values.items():
        value = np.asarray(value, dtype=np.dtype(var.dtype))
        if tuple(var.shape) != value.shape:
            raise ValueError(f"Variable {var.op.name} has shape {tuple(var.shape)}, its value {value.shape}")
        holder = placeholder(np.dtype(var.dtype), value.shape, name=f"{var.op.name}_placeholder")
        ops.append(assign(var, holder))
        feed[holder] = value
    return group(*ops), feed


class VariableDeviceChooser:
    """A device function placing variables round-robin over ``num_tasks`` tasks of ``job_name`` (on
    the local device when 0) and leaving other ops where they are."""

    def __init__(self, num_tasks: int = 0, job_name: str = "ps", device_type: str = "CPU", device_index: int = 0,
                 replica=None):
        self._job_name, self._device_type, self._device_index = job_name, device_type, device_index
        self._num_tasks, self._replica, self._next_task = num_tasks, replica, 0

    def __call__(self, op) -> str:
        if getattr(op, "type", getattr(op, "op_type", None)) not in ("Variable", "VariableV2", "VarHandleOp"):
            return getattr(op, "device", "") or ""
        parts = []
        if self._num_tasks > 0:
            task = self._next_task
            self._next_task = (self._next_task + 1) % self._num_tasks
            parts += [f"/job:{self._job_name}"] + ([f"/replica:{self._replica}"] if self._replica is not None else []) \
                + [f"/task:{task}"]
        parts.append(f"/device:{self._device_type}:{self._device_index}")
        return "".join(parts)
