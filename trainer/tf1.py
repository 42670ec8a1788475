"""The top-level names TensorFlow 1.15 scripts use that ``trainer`` adds for them (issue 21).

``trainer/__init__.py`` re-exports ``__all__`` from here after its own names, so the TF1 spellings
(reductions with ``reduction_indices``, ``argmax`` with ``dimension``, ``matmul`` with
``transpose_b``) are the ones ``import trainer as tf`` sees.
"""

from __future__ import annotations

from trainer import app, contrib, flags, gfile, graph_util, initializers, python_io
from trainer.contrib.framework import is_tensor
from trainer import tf_image as image
from trainer import tf_linalg as linalg
from trainer import tf_lite as lite
from trainer import tf_math as math
from trainer import tf_random as random
from trainer import tf_sparse as sparse
from trainer import tf_strings as strings
from trainer import tf_lookup as lookup
from trainer import tf_manip as manip
from trainer import tf_bitwise as bitwise
from trainer import tf_sets as sets
from trainer import tf_signal as signal
from trainer import tf_spectral as spectral
from trainer import tf_test as test
from trainer import tf_queue as queue
from trainer.tf_signal import fft, fft2d, fft3d, ifft, ifft2d, ifft3d
from trainer import tf_io as io
from trainer import tf_logging as logging
from trainer.array_ops import *  # noqa: F403 - the core ops as TensorFlow 1.15 spells them
from trainer.array_ops import __all__ as _ARRAY_OPS
from trainer.debugging import *  # noqa: F403 - tf.Print, tf.Assert, tf.assert_*
from trainer.debugging import __all__ as _DEBUGGING
from trainer.dtypes import *  # noqa: F403 - tf.float32 & co.
from trainer.dtypes import __all__ as _DTYPES
from trainer.segment_ops import *  # noqa: F403 - tf.segment_max & co.
from trainer.segment_ops import __all__ as _SEGMENT_OPS
from trainer.special_math import *  # noqa: F403 - tf.lgamma, tf.atan2 & co.
from trainer.special_math import __all__ as _SPECIAL_MATH
from trainer.linalg_ops import *  # noqa: F403 - tf.cholesky, tf.svd & co.
from trainer.linalg_ops import __all__ as _LINALG_OPS
from trainer.space_batch import batch_to_space, batch_to_space_nd, space_to_batch, space_to_batch_nd
from trainer.nn import depth_to_space, space_to_depth
from trainer.tf_image import extract_image_patches
from trainer.state_ops import *  # noqa: F403 - tf.scatter_update & co.
from trainer.state_ops import __all__ as _STATE_OPS
from trainer.functional_ops import foldl, foldr, map_fn, scan
from trainer.graph import GraphKeys, Tensor, get_default_graph
from trainer.graph import Node as Operation
from trainer.device_spec import DeviceSpec
from trainer.errors import OpError
from trainer.initialization_checks import is_variable_initialized, report_uninitialized_variables
from trainer.gradient_overrides import NoGradient, NotDifferentiable, RegisterGradient, custom_gradient, no_gradient
from trainer.tf1_gradients import AggregationMethod, UnconnectedGradients, gradients, hessians
from trainer.graph_def import GraphDef, NodeDef, import_graph_def
from trainer.initializers import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    orthogonal_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from trainer.interactive import InteractiveSession, get_default_session
from trainer.io_ops import decode_csv, matching_files, read_file, write_file
from trainer.ops import convert_to_tensor
from trainer.parsing import FixedLenFeature, FixedLenSequenceFeature, VarLenFeature, parse_example, parse_single_example
from trainer.lookup_ops import tables_initializer
from trainer.py_func import numpy_function, py_func
from trainer.string_ops import as_string, string_join, string_split, string_to_number
from trainer.string_ops import TF_LEVEL_NAMES as _STRING_OPS
from trainer.tensor_proto import make_ndarray, make_tensor_proto  # noqa: F401
from trainer.queues import PaddingFIFOQueue, PriorityQueue, QueueBase
from trainer.sparse_ops import TF_LEVEL_NAMES as _SPARSE_OPS
from trainer.sparse_ops import fill_empty_rows as sparse_fill_empty_rows  # noqa: F401 - TF 1.15's tf.sparse_* names
from trainer.sparse_ops import mask as sparse_mask  # noqa: F401
from trainer.sparse_ops import reduce_max_sparse as sparse_reduce_max_sparse  # noqa: F401
from trainer.sparse_ops import reduce_sum_sparse as sparse_reduce_sum_sparse  # noqa: F401
from trainer.sparse_ops import reorder as sparse_reorder  # noqa: F401
from trainer.sparse_ops import reset_shape as sparse_reset_shape  # noqa: F401
from trainer.sparse_ops import retain as sparse_retain  # noqa: F401
from trainer.sparse_ops import segment_mean as sparse_segment_mean  # noqa: F401
from trainer.sparse_ops import segment_sqrt_n as sparse_segment_sqrt_n  # noqa: F401
from trainer.sparse_ops import segment_sum as sparse_segment_sum  # noqa: F401
from trainer.sparse_ops import sparse_to_dense, to_indicator as sparse_to_indicator  # noqa: F401
from trainer.string_ops import (decode_base64, encode_base64, parse_tensor, reduce_join, regex_replace,  # noqa: F401
                                serialize_tensor, string_strip, string_to_hash_bucket, string_to_hash_bucket_fast,
                                string_to_hash_bucket_strong, substr)
from trainer.sparse_tensor import (SparseTensor, SparseTensorValue, sparse_placeholder, sparse_reduce_sum,
                                   sparse_tensor_dense_matmul, sparse_tensor_to_dense)
from trainer.train import clip_by_global_norm
from trainer.random_ops import (get_seed, multinomial, random_crop, random_gamma, random_normal, random_poisson,
                                random_shuffle, random_uniform, set_random_seed, truncated_normal)
from trainer.readers import (FixedLengthRecordReader, IdentityReader, ReaderBase, TextLineReader, TFRecordReader,
                             WholeFileReader)
from trainer.variable_scopes import (
    AUTO_REUSE,
    VariableScope,
    get_local_variable,
    get_variable,
    get_variable_scope,
    variable_scope,
)
from trainer.session_config import ConfigProto, GPUOptions, GraphOptions, OptimizerOptions, RunMetadata, RunOptions
from trainer.summary_proto import Summary
from trainer.tensor_array import TensorArray
from trainer.case import case
from trainer.template import make_template
from trainer.tensor_shape import Dimension, TensorShape, dimension_value
from trainer.variables import count_up_to, local_variables, local_variables_initializer
from trainer.array_extras import *  # noqa: F403 - tf.roll, tf.tensor_scatter_nd_update & co.
from trainer.array_extras import __all__ as _ARRAY_EXTRAS
from trainer.graph_extras import *  # noqa: F403 - tf.switch_case, tf.init_scope, tf.py_function & co.
from trainer.graph_extras import __all__ as _GRAPH_EXTRAS
from trainer.print_ops import print_ as print  # noqa: A001 - tf.print
from trainer.sparse_combine import add as sparse_add, concat as sparse_concat, maximum as sparse_maximum  # noqa: F401
from trainer.sparse_combine import merge as sparse_merge, minimum as sparse_minimum, reshape as sparse_reshape  # noqa
from trainer.sparse_combine import slice as sparse_slice, softmax as sparse_softmax, split as sparse_split  # noqa
from trainer.sparse_combine import edit_distance, transpose as sparse_transpose  # noqa: F401
from trainer.sparse_ops import reduce_max_to_dense as sparse_reduce_max  # noqa: F401
from trainer.assert_extras import *  # noqa: F403 - tf.assert_near, tf.assert_scalar & co.
from trainer.assert_extras import __all__ as _ASSERT_EXTRAS
# TF 1.15's top-level names of functions flowstack keeps in other namespaces
from trainer.compat import dimension_at_index  # noqa: F401
from trainer.initializers import UniformUnitScaling as uniform_unit_scaling_initializer  # noqa: F401
from trainer.linalg_ops import cholesky_solve, lstsq as matrix_solve_ls, eigvalsh as self_adjoint_eigvals  # noqa
from trainer.lookup_ops import tables_initializer as initialize_all_tables  # noqa: F401
from trainer.sequence_parsing import parse_single_sequence_example  # noqa: F401
from trainer.sparse_serialization import deserialize_many_sparse, serialize_many_sparse, serialize_sparse  # noqa
from trainer.special_math import betainc, igamma, igammac  # noqa: F401
from trainer.string_ops import decode_compressed  # noqa: F401

newaxis = None

# Resolved on first use (trainer/__init__.py): TensorBoard's Event protos, when tensorboard is installed.
LAZY_ATTRIBUTES = {"Event": ("trainer.summary", "Event"), "SessionLog": ("trainer.summary", "SessionLog"),
                   "keras": ("trainer.keras", None)}  # tf.keras: imported on first use (it imports trainer)


def get_collection(key: str, scope: str | None = None) -> list:
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name: str, value) -> None:
    get_default_graph().add_to_collection(name, value)


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's name
    """``input`` unless fed: any tensor can be fed, so this is an Identity of ``input``."""
    from trainer.ops import identity

    return identity(input, name=name or "PlaceholderWithDefault")


def initialize_all_variables():
    """The deprecated name of ``global_variables_initializer``."""
    from trainer.variables import global_variables_initializer

    return global_variables_initializer()


def initialize_local_variables():
    """The deprecated name of ``local_variables_initializer``."""
    return local_variables_initializer()


def all_variables() -> list:
    """The deprecated name of ``global_variables``."""
    from trainer.variables import global_variables

    return global_variables()


def initialize_variables(var_list, name: str = "init"):
    """The deprecated name of ``variables_initializer``."""
    from trainer.variables import variables_initializer

    return variables_initializer(var_list, name=name)


def add_to_collections(names, value) -> None:
    for name in [names] if isinstance(names, str) else names:
        add_to_collection(name, value)


def get_collection_ref(key: str) -> list:
    """The collection's own list: appending to it adds to the collection."""
    return get_default_graph().get_collection_ref(key)


def model_variables(scope=None) -> list:
    return get_collection(GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope=None) -> list:
    return get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def executing_eagerly() -> bool:
    """Always False: flowstack runs TensorFlow 1.x's graphs and sessions."""
    return False


def disable_eager_execution() -> None:
    """Nothing to do: flowstack runs graphs and sessions only (TF 1.15 scripts written for TF2's
    ``compat.v1`` call it first)."""


def disable_v2_behavior() -> None:
    """Nothing to do: flowstack behaves as TensorFlow 1.x."""


def enable_v2_behavior() -> None:
    raise NotImplementedError("enable_v2_behavior: flowstack runs TensorFlow 1.x graphs and sessions only")


def colocate_with(op, ignore_existing: bool = False):
    """Ops built inside go to the device of ``op`` (a tensor's op, or a variable's)."""
    node = op.node if isinstance(op, Tensor) else getattr(op, "op", op)
    return get_default_graph().colocate_with(node)


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """``value`` as is when it is IndexedSlices (of ``dtype``, if given), else ``convert_to_tensor``."""
    from trainer.dtypes import as_numpy_dtype
    from trainer.gradients import IndexedSlices
    from trainer.ops import convert_to_tensor as to_tensor

    if isinstance(value, IndexedSlices):
        if dtype is not None and value.values.dtype != as_numpy_dtype(dtype):
            raise ValueError(f"Tensor conversion requested dtype {dtype} for IndexedSlices of {value.values.dtype}")
        return value
    return to_tensor(value, dtype=dtype, name=name)


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    """``value`` as is when it is a SparseTensor (a SparseTensorValue becomes one), else ``convert_to_tensor``."""
    from trainer.dtypes import as_numpy_dtype
    from trainer.ops import convert_to_tensor as to_tensor

    if isinstance(value, SparseTensorValue):
        value = SparseTensor(*value)
    if isinstance(value, SparseTensor):
        if dtype is not None and value.values.dtype != as_numpy_dtype(dtype):
            raise ValueError(f"Sparse dtype: requested = {dtype}, actual = {value.values.dtype}")
        return value
    return to_tensor(value, dtype=dtype, name=name)


def get_logger():
    """The ``tensorflow`` logger that ``tf.logging`` writes to."""
    import logging as pylogging

    return pylogging.getLogger("tensorflow")


def no_regularizer(_):
    """A regularizer adding no penalty (for variables a scope's regularizer should skip)."""
    return None


# The TensorFlow release whose API ``import trainer as tf`` plays: scripts print it or compare it
# (``tf.__version__ >= "1.4"``). flowstack's own version is its package's (``importlib.metadata``).
VERSION = __version__ = "1.15.0"
GIT_VERSION = "flowstack"
COMPILER_VERSION = "none (pure Python and NumPy)"
CXX11_ABI_FLAG = 0
MONOLITHIC_BUILD = 0
_VERSIONS = {"VERSION", "__version__", "GIT_VERSION", "COMPILER_VERSION", "CXX11_ABI_FLAG", "MONOLITHIC_BUILD"}

# Session 21's names: namespaces, tf.print, the sparse_* aliases and other namespaces' functions.
_SESSION_21 = {
    "betainc", "bitwise", "cholesky_solve", "colocate_with", "convert_to_tensor_or_indexed_slices",
    "convert_to_tensor_or_sparse_tensor", "decode_compressed", "deserialize_many_sparse", "dimension_at_index",
    "edit_distance", "fft", "fft2d", "fft3d", "get_logger", "ifft", "ifft2d", "ifft3d", "igamma", "igammac",
    "initialize_all_tables", "manip", "matrix_solve_ls", "parse_single_sequence_example", "print", "queue", "self_adjoint_eigvals",
    "serialize_many_sparse", "serialize_sparse", "sets", "signal", "sparse_add", "sparse_concat", "sparse_maximum",
    "sparse_merge", "sparse_minimum", "sparse_reduce_max", "sparse_reshape", "sparse_slice", "sparse_softmax",
    "sparse_split", "sparse_transpose", "spectral", "test", "uniform_unit_scaling_initializer"}

__all__ = sorted(set(_ARRAY_EXTRAS) | set(_ASSERT_EXTRAS) | set(_GRAPH_EXTRAS) | _SESSION_21 | _VERSIONS | set(_ARRAY_OPS) |
                set(_DEBUGGING) | set(_DTYPES) | set(_STATE_OPS) | set(_SEGMENT_OPS) |
                set(_STRING_OPS) | set(_SPARSE_OPS) | set(_SPECIAL_MATH) | set(_LINALG_OPS) | {
    "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "make_ndarray", "make_tensor_proto",
    "AggregationMethod", "DeviceSpec", "NoGradient", "NotDifferentiable", "OpError", "Operation", "RegisterGradient",
    "custom_gradient",
    "UnconnectedGradients", "gradients", "hessians", "is_variable_initialized", "no_gradient",
    "report_uninitialized_variables",
    "FixedLengthRecordReader", "IdentityReader", "ReaderBase", "TFRecordReader", "TextLineReader", "WholeFileReader",
    "count_up_to", "decode_csv", "matching_files", "read_file", "write_file",
    "AUTO_REUSE", "ConfigProto", "Dimension", "GPUOptions", "GraphOptions", "OptimizerOptions", "RunMetadata",
    "RunOptions", "Summary", "TensorArray", "app", "as_string", "batch_to_space", "batch_to_space_nd", "case", "depth_to_space", "extract_image_patches", "make_template", "random_crop", "space_to_batch", "space_to_batch_nd", "space_to_depth", "disable_eager_execution", "disable_v2_behavior", "enable_v2_behavior", "lookup", "string_join", "string_split", "string_to_number", "strings", "tables_initializer", "SparseTensor", "SparseTensorValue", "sparse", "sparse_placeholder", "sparse_reduce_sum", "sparse_tensor_dense_matmul", "sparse_tensor_to_dense", "FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "parse_example", "parse_single_example", "numpy_function", "py_func", "GraphDef", "NodeDef", "graph_util", "image", "import_graph_def", "linalg", "lite", "math", "random", "flags", "gfile", "io", "logging", "python_io", "add_to_collections", "all_variables", "clip_by_global_norm", "executing_eagerly",
    "get_collection_ref", "get_seed", "initialize_local_variables", "initialize_variables", "is_tensor",
    "model_variables", "moving_average_variables", "no_regularizer", "InteractiveSession", "TensorShape", "dimension_value", "VariableScope", "add_to_collection", "constant_initializer", "contrib",
    "convert_to_tensor", "foldl", "foldr", "get_collection", "get_default_session", "get_local_variable", "get_variable",
    "get_variable_scope", "glorot_normal_initializer", "glorot_uniform_initializer", "initialize_all_variables",
    "initializers", "local_variables", "local_variables_initializer", "orthogonal_initializer", "map_fn", "multinomial", "newaxis", "ones_initializer",
    "placeholder_with_default", "random_normal", "random_normal_initializer", "random_shuffle", "random_gamma", "random_poisson", "random_uniform",
    "random_uniform_initializer", "scan", "set_random_seed", "truncated_normal", "truncated_normal_initializer",
    "variable_scope", "variance_scaling_initializer", "zeros_initializer",
})
