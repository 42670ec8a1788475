"""``tf.sets``: TF 1.15's set operations on the last dimension of a tensor or SparseTensor
(trainer/set_ops.py), under both of its spellings (``tf.sets.union`` is ``tf.sets.set_union``)."""

from __future__ import annotations

from trainer.set_ops import set_difference, set_intersection, set_size, set_union

__all__ = ["difference", "intersection", "set_difference", "set_intersection", "set_size", "set_union", "size",
           "union"]

difference = set_difference
intersection = set_intersection
size = set_size
union = set_union
