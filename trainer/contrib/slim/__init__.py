"""``tf.contrib.slim`` as TF-Slim model code uses it: ``slim = tf.contrib.slim``.

Slim is a surface over other parts, as in TensorFlow: the layers, initializers and regularizers
of ``tf.contrib.layers`` (the same functions, so ``arg_scope`` defaults set for ``slim.conv2d``
also apply to ``tf.contrib.layers.conv2d``), ``arg_scope``, the model-variable helpers,
``slim.losses`` (``tf.contrib.losses``: logits first), ``slim.metrics`` (``tf.contrib.metrics``)
and ``slim.learning``.
"""

from trainer.contrib import metrics
from trainer.contrib.arg_scope import (add_arg_scope, arg_scope, arg_scope_func_key, arg_scoped_arguments,
                                       current_arg_scope, has_arg_scope)
from trainer.contrib.layers import (apply_regularization, avg_pool2d, batch_norm, bias_add, conv2d,
                                    conv2d_transpose, convolution2d, convolution2d_transpose, dropout, elu,
                                    embed_sequence, flatten, fully_connected, l1_regularizer, l2_regularizer,
                                    layer_norm, linear, max_pool2d, one_hot_encoding, relu, relu6, repeat,
                                    separable_conv2d, separable_convolution2d, softmax, stack, sum_regularizer,
                                    unit_norm, variance_scaling_initializer, xavier_initializer,
                                    xavier_initializer_conv2d)
from trainer.contrib.model_variables import (add_model_variable, assign_from_checkpoint_fn, get_local_variables,
                                             get_model_variables, get_trainable_variables, get_unique_variable,
                                             get_variable_full_name, get_variables, get_variables_by_name,
                                             get_variables_by_suffix, get_variables_to_restore, global_variable,
                                             local_variable, model_variable, variable)
from trainer.contrib.framework import (VariableDeviceChooser, assert_or_get_global_step, assign_from_checkpoint,
                                       assign_from_values, assign_from_values_fn, create_global_step, filter_variables,
                                       zero_initializer)
from trainer.contrib.layers_extra import (avg_pool3d, conv1d, conv3d, convolution, convolution1d, convolution3d,
                                          dense_to_sparse, group_norm, instance_norm, l1_l2_regularizer, max_pool3d,
                                          maxout, pool, summarize_activation, summarize_tensor)
from trainer.contrib.optimize_loss import optimize_loss
from trainer.contrib.slim import learning, losses
from trainer.nn import safe_embedding_lookup_sparse
from trainer.train import assert_global_step, get_global_step, get_or_create_global_step

__all__ = [
    "add_arg_scope", "add_model_variable", "apply_regularization", "arg_scope", "arg_scope_func_key",
    "arg_scoped_arguments", "assign_from_checkpoint_fn", "avg_pool2d", "batch_norm", "bias_add", "conv2d",
    "conv2d_transpose", "convolution2d", "convolution2d_transpose", "current_arg_scope", "dropout", "elu",
    "embed_sequence", "flatten", "fully_connected", "get_global_step", "get_local_variables",
    "get_model_variables", "get_or_create_global_step", "get_trainable_variables", "get_unique_variable",
    "get_variable_full_name", "get_variables", "get_variables_by_name", "get_variables_by_suffix",
    "get_variables_to_restore", "global_variable", "has_arg_scope", "l1_regularizer", "l2_regularizer",
    "layer_norm", "learning", "linear", "local_variable", "losses", "max_pool2d", "metrics", "model_variable",
    "one_hot_encoding", "relu", "relu6", "repeat", "separable_conv2d", "separable_convolution2d", "softmax",
    "stack", "sum_regularizer", "unit_norm", "variable", "variance_scaling_initializer", "xavier_initializer",
    "xavier_initializer_conv2d",
    "assert_global_step", "avg_pool3d", "conv1d", "conv3d", "convolution", "convolution1d", "convolution3d",
    "create_global_step", "dense_to_sparse", "group_norm", "instance_norm", "l1_l2_regularizer", "max_pool3d",
    "maxout", "optimize_loss", "pool", "safe_embedding_lookup_sparse", "summarize_activation", "summarize_tensor",
    "VariableDeviceChooser", "assert_or_get_global_step", "assign_from_checkpoint", "assign_from_values",
    "assign_from_values_fn", "filter_variables", "zero_initializer",
]


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.slim", name, globals())
