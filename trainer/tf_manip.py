"""``tf.manip``: TF 1.15's namespace of tensor manipulations, each the ``tf.*`` function of the same
name (``tf.manip.roll`` is ``tf.roll``)."""

from __future__ import annotations

from trainer.tf1_aliases import resolve


def __getattr__(name: str):
    return resolve("tf.manip", name, {}, globals())
