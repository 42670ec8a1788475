"""Lookup tables as TF 1.x text pipelines use them: ``tf.contrib.lookup.index_table_from_tensor`` /
``index_table_from_file`` (token -> id), ``index_to_string_table_from_tensor`` (id -> token) and
``HashTable`` / ``tf.lookup.StaticHashTable`` over a ``KeyValueTensorInitializer``.

A table's keys and values are tensors of the graph (a vocabulary file is read when the table is
built), so a table needs no initializing run: ``tf.tables_initializer()`` is a no-op kept for the
scripts that run it. Out-of-vocabulary buckets hash a key with FarmHash Fingerprint64, as
TensorFlow's do, so ids past the vocabulary match TensorFlow's.
"""

from __future__ import annotations

import os

import numpy as np

from trainer.dtypes import as_dtype
from trainer.ops import cast, convert_to_tensor, gather, make_op, no_op, shape

__all__ = ["HashTable", "KeyValueTensorInitializer", "StaticHashTable", "index_table_from_file",
           "index_table_from_tensor", "index_to_string_table_from_tensor", "read_vocabulary", "tables_initializer"]


class KeyValueTensorInitializer:
    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        self.keys = convert_to_tensor(keys) if key_dtype is None else \
            convert_to_tensor(keys, dtype=as_dtype(key_dtype).as_numpy_dtype)
        self.values = convert_to_tensor(values) if value_dtype is None else \
            convert_to_tensor(values, dtype=as_dtype(value_dtype).as_numpy_dtype)
        self.key_dtype, self.value_dtype = self.keys.dtype, self.values.dtype


class HashTable:
    """``HashTable(initializer, default_value)``: ``lookup(keys)`` gives each key's value, else the default."""

    def __init__(self, initializer: KeyValueTensorInitializer, default_value, num_oov_buckets: int = 0, name=None):
        self._init = initializer
        self._default = convert_to_tensor(np.asarray(default_value, dtype=np.dtype(initializer.values.dtype)))
        self._buckets = int(num_oov_buckets)
        self.name = name

    @property
    def key_dtype(self):
        return self._init.key_dtype

    @property
    def value_dtype(self):
        return self._init.value_dtype

    @property
    def default_value(self):
        return self._default

    def lookup(self, keys, name=None):
        from trainer.sparse_tensor import SparseTensor

        if isinstance(keys, SparseTensor):
            return SparseTensor(keys.indices, self.lookup(keys.values, name), keys.dense_shape)
        return make_op("LookupTableFind", [convert_to_tensor(keys), self._init.keys, self._init.values, self._default],
                       {"num_oov_buckets": self._buckets}, domain="flowstack",
                       name=name or "hash_table_Lookup").outputs[0]

    def size(self, name=None):
        return cast(gather(shape(self._init.keys), 0), np.int64) + self._buckets

    @property
    def init(self):
        return no_op(name="table_init")

    initializer = init


StaticHashTable = HashTable


def index_table_from_tensor(mapping, num_oov_buckets: int = 0, default_value: int = -1, hasher_spec=None,
                            dtype=None, name=None) -> HashTable:
    """Token -> its position in the 1-D ``mapping`` (int64); unknown tokens -> ``default_value``, or
    with ``num_oov_buckets``, one of that many ids after the vocabulary."""
    keys = convert_to_tensor(mapping)
    ids = cast(make_op("Range", [np.array(0, np.int64), cast(make_op("Size", [keys]).outputs[0], np.int64),
                                 np.array(1, np.int64)]).outputs[0], np.int64)
    return HashTable(KeyValueTensorInitializer(keys, ids), np.int64(default_value), num_oov_buckets, name)


def index_table_from_file(vocabulary_file=None, num_oov_buckets: int = 0, vocab_size=None, default_value: int = -1,
                          hasher_spec=None, key_dtype=None, name=None, key_column_index=-2, value_column_index=-1,
                          delimiter="\t") -> HashTable:
    """As ``index_table_from_tensor`` over the tokens of ``vocabulary_file``, one a line (the first
    ``vocab_size`` lines where given)."""
    if vocabulary_file is None:
        raise ValueError("index_table_from_file: vocabulary_file must be given")
    tokens = read_vocabulary(vocabulary_file, vocab_size, "index_table_from_file")
    return index_table_from_tensor(np.array(tokens, dtype=object), num_oov_buckets, default_value, name=name)


def read_vocabulary(vocabulary_file, size: int | None, what: str) -> list[str]:
    """The tokens of a vocabulary file, one a line (the first ``size`` where given)."""
    path = os.fspath(vocabulary_file)
    if not os.path.isfile(path):
        raise ValueError(f"{what}: vocabulary file {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\r\n") for line in f]
    if size is not None:
        if size > len(tokens):
            raise ValueError(f"{what}: vocabulary size {size} is more than the {len(tokens)} lines of {path}")
        tokens = tokens[:size]
    return tokens


def index_to_string_table_from_tensor(vocabulary_list, default_value: str = "UNK", name=None) -> HashTable:
    """Id -> the token at that position of ``vocabulary_list``; other ids -> ``default_value``."""
    values = convert_to_tensor(vocabulary_list)
    keys = make_op("Range", [np.array(0, np.int64), make_op("Size", [values]).outputs[0], np.array(1, np.int64)]).outputs[0]
    return HashTable(KeyValueTensorInitializer(keys, values), np.array(default_value, dtype=object), name=name)


def tables_initializer(name: str = "init_all_tables"):
    """A no-op: flowstack's tables are ready when built (kept for scripts that run it)."""
    return no_op(name=name)
