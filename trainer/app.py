"""``tf.app``: ``run`` and ``flags`` as TensorFlow 1.x scripts' entry points use them."""

from trainer import flags
from trainer.flags import run

__all__ = ["flags", "run"]
