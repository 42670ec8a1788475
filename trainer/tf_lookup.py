"""``tf.lookup``: TF 1.15's lookup namespace (trainer/lookup_ops.py)."""

from __future__ import annotations

from trainer.lookup_ops import (KeyValueTensorInitializer, StaticHashTable, StaticVocabularyTable, TextFileIndex,
                                TextFileInitializer)

__all__ = ["KeyValueTensorInitializer", "StaticHashTable", "StaticVocabularyTable", "TextFileIndex",
           "TextFileInitializer"]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.lookup", name, globals())
