"""``tf.math``: TF 1.15's math namespace, resolved to flowstack's ``tf.*`` and ``tf.nn.*`` functions."""

from __future__ import annotations

from trainer.tf1_aliases import resolve

_RENAMED = {"divide_no_nan": "div_no_nan"}


def __getattr__(name: str):
    return resolve("tf.math", name, _RENAMED, globals())
