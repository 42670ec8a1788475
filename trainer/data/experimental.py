"""``tf.data.experimental``: the names TF 1.x scripts reach for there."""

from trainer.data.dataset import AUTOTUNE
from trainer.data.iterator import make_initializable_iterator, make_one_shot_iterator

__all__ = ["AUTOTUNE", "make_initializable_iterator", "make_one_shot_iterator"]
