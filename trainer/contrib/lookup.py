"""``tf.contrib.lookup``: vocabulary tables (trainer/lookup_ops.py)."""

from __future__ import annotations

from trainer.lookup_ops import (
    HashTable,
    IdTableWithHashBuckets,
    KeyValueTensorInitializer,
    TextFileIdTableInitializer,
    TextFileIndex,
    TextFileInitializer,
    TextFileStringTableInitializer,
    index_table_from_file,
    index_table_from_tensor,
    index_to_string,
    index_to_string_table_from_file,
    index_to_string_table_from_tensor,
)

__all__ = ["HashTable", "IdTableWithHashBuckets", "KeyValueTensorInitializer", "TextFileIdTableInitializer",
           "TextFileIndex", "TextFileInitializer", "TextFileStringTableInitializer", "index_table_from_file",
           "index_table_from_tensor", "index_to_string", "index_to_string_table_from_file",
           "index_to_string_table_from_tensor"]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.lookup", name, globals())
