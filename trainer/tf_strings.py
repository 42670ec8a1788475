"""``tf.strings``: TF 1.15's string namespace (trainer/string_ops.py)."""

from __future__ import annotations

from trainer.string_ops import as_string, split, string_join, to_number

join = string_join

__all__ = ["as_string", "join", "split", "to_number"]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.strings", name, globals())
