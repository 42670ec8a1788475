"""``tf.queue``: TF 1.15's namespace of the queue classes (``tf.queue.FIFOQueue`` is ``tf.FIFOQueue``)."""

from __future__ import annotations

from trainer.queues import FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "RandomShuffleQueue"]
