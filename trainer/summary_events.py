"""Event files read back: ``tf.train.summary_iterator`` and the ``tf.summary`` event messages
(``Event``, ``SessionLog``, ``TaggedRunMetadata``, ``SummaryDescription``).

An event file is a TFRecord file of serialized ``Event`` protos (what ``FileWriter`` writes); the
messages are TensorBoard's own classes, so reading needs the tensorboard package, as writing does.
"""

from __future__ import annotations

from typing import Iterator

from trainer.data.tfrecord import tf_record_iterator
from trainer.kernels.summary import tensorboard_proto

__all__ = ["EVENT_MESSAGES", "event_message", "summary_iterator"]

# tf.summary.<name> -> (tensorboard.compat.proto module, message name)
EVENT_MESSAGES = {
    "Event": ("event_pb2", "Event"),
    "SessionLog": ("event_pb2", "SessionLog"),
    "TaggedRunMetadata": ("event_pb2", "TaggedRunMetadata"),
    "SummaryDescription": ("summary_pb2", "SummaryDescription"),
}


def event_message(name: str):
    """The message class ``tf.summary.<name>`` is (``EVENT_MESSAGES``)."""
    module, message = EVENT_MESSAGES[name]
    return getattr(tensorboard_proto(module), message)


def summary_iterator(path: str) -> Iterator:
    """Yield each ``Event`` of the event file at ``path``, in order: the file-version record first,
    then the graph, summaries and session logs a ``FileWriter`` wrote (a corrupt record is a
    DataLossError naming the file)."""
    event_cls = event_message("Event")
    for record in tf_record_iterator(path):
        yield event_cls.FromString(record)
