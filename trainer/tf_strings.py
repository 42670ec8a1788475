"""``tf.strings``: TF 1.15's string namespace (trainer/string_ops.py)."""

from __future__ import annotations

from trainer.string_ops import (as_string, bytes_split, format, length, lower, reduce_join, regex_full_match,
                                regex_replace, split, string_join, strip, substr, to_hash_bucket, to_hash_bucket_fast,
                                to_hash_bucket_strong, to_number, unicode_decode, unicode_encode, unicode_split,
                                unicode_transcode, upper)

join = string_join

__all__ = ["as_string", "bytes_split", "format", "join", "length", "lower", "reduce_join", "regex_full_match",
           "regex_replace", "split", "strip", "substr", "to_hash_bucket", "to_hash_bucket_fast",
           "to_hash_bucket_strong", "to_number", "unicode_decode", "unicode_encode", "unicode_split",
           "unicode_transcode", "upper"]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.strings", name, globals())
