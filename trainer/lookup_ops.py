"""Lookup tables as TF 1.x text pipelines use them: ``tf.contrib.lookup.index_table_from_tensor`` /
``index_table_from_file`` (token -> id), ``index_to_string_table_from_tensor`` (id -> token) and
``HashTable`` / ``tf.lookup.StaticHashTable`` over a ``KeyValueTensorInitializer``.

A table's keys and values are tensors of the graph (a vocabulary file is read when the table is
built), so a table needs no initializing run: ``tf.tables_initializer()`` is a no-op kept for the
scripts that run it. Out-of-vocabulary buckets hash a key with FarmHash's Fingerprint64 as
TensorFlow does, so ids past the vocabulary match TensorFlow's.
"""

from __future__ import annotations

import os

import numpy as np

from trainer.dtypes import as_dtype
from trainer.graph import Tensor
from trainer.ops import cast, convert_to_tensor, gather, make_op, no_op, shape

__all__ = ["FastHashSpec", "HashTable", "IdTableWithHashBuckets", "KeyValueTensorInitializer", "StaticHashTable",
           "StaticVocabularyTable", "TextFileIdTableInitializer", "TextFileIndex", "TextFileInitializer",
           "TextFileStringTableInitializer", "index_table_from_file", "index_table_from_tensor", "index_to_string",
           "index_to_string_table_from_file", "index_to_string_table_from_tensor", "read_vocabulary",
           "tables_initializer"]


class KeyValueTensorInitializer:
    """A table's keys and values, given as tensors (or values convertible to them)."""

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
        self._default = default_value if isinstance(default_value, Tensor) else \
            convert_to_tensor(np.asarray(default_value, dtype=np.dtype(initializer.values.dtype)))
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
    ``vocab_size`` lines where given; columns as TextFileInitializer reads them)."""
    if vocabulary_file is None:
        raise ValueError("index_table_from_file: vocabulary_file must be given")
    _fast_hash_only("index_table_from_file", hasher_spec)
    init = TextFileInitializer(vocabulary_file, key_dtype or np.dtype(object), key_column_index, np.int64,
                               value_column_index, vocab_size, delimiter)
    return HashTable(init, np.int64(default_value), num_oov_buckets, name)


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


# -- text-file tables -------------------------------------------------------------------------------
class TextFileIndex:
    """Column numbers that name more than a column: the whole line, or its (0-based) line number."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


def _text_column(lines: list[str], index: int, dtype, delimiter: str, filename) -> np.ndarray:
    np_dtype = np.dtype(as_dtype(dtype).as_numpy_dtype)
    if index == TextFileIndex.LINE_NUMBER:
        if np_dtype.kind != "i":
            raise ValueError(f"TextFileInitializer: a LINE_NUMBER column must have an integer dtype, got {np_dtype}")
        return np.arange(len(lines), dtype=np_dtype)
    if index == TextFileIndex.WHOLE_LINE:
        cells = lines
    elif index >= 0:
        cells = []
        for n, line in enumerate(lines):
            parts = line.split(delimiter) if delimiter else line.split()
            if index >= len(parts):
                raise ValueError(f"TextFileInitializer: line {n} of {filename} has {len(parts)} column(s), "
                                 f"column {index} is asked for")
            cells.append(parts[index])
    else:
        raise ValueError(f"TextFileInitializer: column index must be >= 0, LINE_NUMBER or WHOLE_LINE, got {index}")
    if np_dtype == np.dtype(object):
        out = np.empty(len(cells), dtype=object)
        out[:] = cells
        return out
    try:
        return np.array([float(c) if np_dtype.kind == "f" else int(c) for c in cells], dtype=np_dtype)
    except ValueError as e:
        raise ValueError(f"TextFileInitializer: a cell of {filename} is not a {np_dtype.name}: {e}") from None


class TextFileInitializer(KeyValueTensorInitializer):
    """Keys and values read from a text file when the table is built: each line gives one pair,
    from the columns ``key_index`` and ``value_index`` (split at ``delimiter``), or
    ``TextFileIndex.WHOLE_LINE`` / ``LINE_NUMBER``."""

    def __init__(self, filename, key_dtype, key_index: int, value_dtype, value_index: int, vocab_size=None,
                 delimiter: str = "\t", name=None):
        lines = read_vocabulary(filename, vocab_size, "TextFileInitializer")
        super().__init__(_text_column(lines, key_index, key_dtype, delimiter, filename),
                         _text_column(lines, value_index, value_dtype, delimiter, filename), name=name)


class TextFileIdTableInitializer(TextFileInitializer):
    """Token (the whole line) -> its line number, the initializer of a vocabulary table."""

    def __init__(self, filename, key_column_index: int = TextFileIndex.WHOLE_LINE,
                 value_column_index: int = TextFileIndex.LINE_NUMBER, vocab_size=None, delimiter: str = "\t",
                 name: str = "text_file_id_table_init", key_dtype=np.dtype(object)):
        super().__init__(filename, key_dtype, key_column_index, np.int64, value_column_index, vocab_size, delimiter,
                         name)


class TextFileStringTableInitializer(TextFileInitializer):
    """Line number -> its token (the whole line), the initializer of an id -> token table."""

    def __init__(self, filename, key_column_index: int = TextFileIndex.LINE_NUMBER,
                 value_column_index: int = TextFileIndex.WHOLE_LINE, vocab_size=None, delimiter: str = "\t",
                 name: str = "text_file_string_table_init"):
        super().__init__(filename, np.int64, key_column_index, np.dtype(object), value_column_index, vocab_size,
                         delimiter, name)


class StaticVocabularyTable(HashTable):
    """Key -> its id in ``initializer`` (int64 values); any other key -> one of ``num_oov_buckets``
    ids after the vocabulary, by FarmHash Fingerprint64 as TensorFlow assigns them."""

    def __init__(self, initializer: KeyValueTensorInitializer, num_oov_buckets: int, lookup_key_dtype=None,
                 name=None):
        if int(num_oov_buckets) <= 0:
            raise ValueError(f"StaticVocabularyTable: num_oov_buckets must be > 0, got {num_oov_buckets}")
        if initializer.value_dtype != np.dtype(np.int64):
            raise TypeError(f"StaticVocabularyTable: the initializer's values must be int64 ids, got "
                            f"{initializer.value_dtype}")
        super().__init__(initializer, np.int64(-1), int(num_oov_buckets), name)


class FastHashSpec:
    """The hasher of out-of-vocabulary buckets: FarmHash Fingerprint64 (TensorFlow's default, the only one here)."""


def _fast_hash_only(what: str, hasher_spec) -> None:
    if hasher_spec is not None and hasher_spec is not FastHashSpec and not isinstance(hasher_spec, FastHashSpec):
        raise ValueError(f"{what}: only FastHashSpec (FarmHash Fingerprint64) buckets are supported, got "
                         f"{hasher_spec!r}")


class IdTableWithHashBuckets(HashTable):
    """``table``'s ids, with keys it lacks hashed into ``num_oov_buckets`` ids after its size
    (``table=None``: every key hashed)."""

    def __init__(self, table: HashTable | None, num_oov_buckets: int, hasher_spec=FastHashSpec, name=None,
                 key_dtype=None):
        _fast_hash_only("IdTableWithHashBuckets", hasher_spec)
        if int(num_oov_buckets) < 0:
            raise ValueError(f"IdTableWithHashBuckets: num_oov_buckets must be >= 0, got {num_oov_buckets}")
        if table is None:
            key = np.dtype(as_dtype(key_dtype).as_numpy_dtype) if key_dtype is not None else np.dtype(object)
            init = KeyValueTensorInitializer(np.zeros(0, dtype=key), np.zeros(0, np.int64))
            super().__init__(init, np.int64(-1), int(num_oov_buckets), name)
        elif table._buckets:
            raise ValueError("IdTableWithHashBuckets: the table already has out-of-vocabulary buckets")
        else:
            super().__init__(table._init, table.default_value, int(num_oov_buckets), name)


def index_to_string_table_from_file(vocabulary_file, vocab_size=None, default_value: str = "UNK", name=None,
                                    key_column_index: int = TextFileIndex.LINE_NUMBER,
                                    value_column_index: int = TextFileIndex.WHOLE_LINE,
                                    delimiter: str = "\t") -> HashTable:
    """Id (line number) -> the token on that line of ``vocabulary_file``; other ids -> ``default_value``."""
    init = TextFileInitializer(vocabulary_file, np.int64, key_column_index, np.dtype(object), value_column_index,
                               vocab_size, delimiter)
    return HashTable(init, np.array(default_value, dtype=object), name=name)


def index_to_string(tensor, mapping, default_value: str = "UNK", name=None) -> Tensor:
    """The tokens ``mapping`` holds at the ids of ``tensor`` (``default_value`` past its end)."""
    return index_to_string_table_from_tensor(mapping, default_value).lookup(tensor, name=name)
