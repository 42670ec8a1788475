"""``tf.train.warm_start`` with ``VocabInfo``, and ``tf.estimator.WarmStartSettings``: start a new
model's variables from another model's checkpoint instead of their initializers.

``vars_to_warm_start`` picks the variables as TF 1.15 does: a regex matched (``re.match``) against
the trainable variables' names, a list of regexes matched against all global variables, or a list
of variables (None: none). Each reads the checkpoint tensor of its own name, or of
``var_name_to_prev_var_name[name]``. A variable with a ``VocabInfo`` (an embedding or a linear
model's weights over a vocabulary that changed) gets, for each entry of the new vocabulary, the
row (``axis=0``) or column (``axis=1``) of the same entry in the old vocabulary; entries new to
the vocabulary and the OOV buckets get ``backup_initializer``'s values (zeros without one).
"""

from __future__ import annotations

import collections
import re

import numpy as np

from trainer.checkpoint_utils import load_checkpoint_reader
from trainer.graph import GraphKeys, get_default_graph
from trainer.lookup_ops import read_vocabulary
from trainer.ops import constant, where
from trainer.variables import Variable

__all__ = ["VocabInfo", "WarmStartSettings", "warm_start"]


class VocabInfo(collections.namedtuple("VocabInfo", ["new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab",
                                                     "old_vocab_size", "backup_initializer", "axis"])):
    """How a variable's rows (or columns) follow a vocabulary from ``old_vocab`` to ``new_vocab`` (files)."""

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size=-1,
                backup_initializer=None, axis=0):
        if axis not in (0, 1):
            raise ValueError(f"The only supported values for the axis argument are 0 and 1.  Provided axis: {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab, old_vocab_size,
                               backup_initializer, axis)


class WarmStartSettings(collections.namedtuple("WarmStartSettings", ["ckpt_to_initialize_from", "vars_to_warm_start",
                                                                     "var_name_to_vocab_info",
                                                                     "var_name_to_prev_var_name"])):
    """What an Estimator's ``warm_start_from`` warm-starts (see ``warm_start``)."""

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                var_name_to_prev_var_name=None):
        if not ckpt_to_initialize_from:
            raise ValueError("`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start, var_name_to_vocab_info or {},
                               var_name_to_prev_var_name or {})


def _selected(vars_to_warm_start) -> list[Variable]:
    graph = get_default_graph()
    if vars_to_warm_start is None:
        return []
    if isinstance(vars_to_warm_start, str):
        pattern = re.compile(vars_to_warm_start)
        return [v for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES) if pattern.match(v.op.name)]
    items = list(vars_to_warm_start)
    if all(isinstance(v, Variable) for v in items):
        return items
    if all(isinstance(v, str) for v in items):
        found: dict[str, Variable] = {}
        for regex in items:
            pattern = re.compile(regex)
            found.update({v.op.name: v for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
                          if pattern.match(v.op.name)})
        return list(found.values())
    raise ValueError(f"vars_to_warm_start must be a regex, a list of regexes or a list of Variables, given "
                     f"{vars_to_warm_start!r}")


def _remapped(var: Variable, old: np.ndarray, info: VocabInfo):
    """The variable's initial value with its vocabulary axis following ``info``."""
    new_words = read_vocabulary(info.new_vocab, info.new_vocab_size, f"VocabInfo for {var.op.name!r}")
    old_size = None if info.old_vocab_size is None or info.old_vocab_size < 0 else info.old_vocab_size
    old_index = {w: i for i, w in enumerate(read_vocabulary(info.old_vocab, old_size, f"VocabInfo for {var.op.name!r}"))}
    shape = tuple(var.shape)
    rows = len(new_words) + int(info.num_oov_buckets)
    if shape[info.axis] != rows:
        raise ValueError(f"warm_start: variable {var.op.name!r} has {shape[info.axis]} entries on axis {info.axis}, "
                         f"but its new vocabulary has {len(new_words)} and {info.num_oov_buckets} OOV buckets")
    source = [old_index.get(w, -1) for w in new_words] + [-1] * int(info.num_oov_buckets)
    found = np.array([i >= 0 and i < old.shape[info.axis] for i in source])
    picked = np.take(old, np.where(found, source, 0), axis=info.axis).astype(var.dtype)
    if info.backup_initializer is None:
        return constant(np.where(np.expand_dims(found, 1 - info.axis), picked, 0).astype(var.dtype))
    mask = np.broadcast_to(np.expand_dims(found, 1 - info.axis), shape)
    return where(constant(mask), constant(picked), info.backup_initializer(shape, dtype=var.dtype))


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
               var_name_to_prev_var_name=None) -> None:
    """Make the chosen variables of the default graph initialize from the checkpoint (a prefix or a folder)."""
    vocab_infos = dict(var_name_to_vocab_info or {})
    previous = dict(var_name_to_prev_var_name or {})
    reader = load_checkpoint_reader(ckpt_to_initialize_from)
    graph = get_default_graph()
    variables = _selected(vars_to_warm_start)
    for name, info in vocab_infos.items():  # a vocabulary-mapped variable is warm-started even if not selected
        if not isinstance(info, VocabInfo):
            raise ValueError(f"var_name_to_vocab_info[{name!r}] must be a VocabInfo, given {type(info).__name__}")
        match = [v for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES) if v.op.name == name]
        variables.extend(v for v in match if v not in variables)
    names = {v.op.name for v in variables}
    for kind, table in (("var_name_to_vocab_info", vocab_infos), ("var_name_to_prev_var_name", previous)):
        unused = sorted(set(table) - names)
        if unused:
            raise ValueError(f"You provided the following variables in {kind} that were not used: {unused}. Perhaps "
                             f"you misspelled them? Here is the list of viable variable names: {sorted(names)}")
    for var in variables:
        name = var.op.name
        prev = previous.get(name, name)
        if not reader.has_tensor(prev):
            raise ValueError(f"warm_start: tensor {prev!r} (for variable {name!r}) is not in checkpoint "
                             f"{ckpt_to_initialize_from!r}")
        old = np.asarray(reader.get_tensor(prev))
        with graph.as_default():
            if name in vocab_infos:
                init = _remapped(var, old, vocab_infos[name])
            else:
                if tuple(old.shape) != tuple(var.shape):
                    raise ValueError(f"warm_start: variable {name!r} has shape {tuple(var.shape)}, tensor {prev!r} "
                                     f"of the checkpoint has {tuple(old.shape)}")
                init = constant(old.astype(var.dtype), name=f"{name}/warm_start")
        var.initializer.inputs[1] = init
        var.initial_value = init
