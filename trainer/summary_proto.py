"""``tf.Summary`` built by hand in a training loop, as TF1 scripts log Python-side numbers:

    summary = tf.Summary(value=[tf.Summary.Value(tag="accuracy", simple_value=acc)])
    writer.add_summary(summary, step)

``bytes(summary)`` is the serialized ``Summary`` proto ``FileWriter.add_summary`` writes.
"""

from __future__ import annotations

import threading

from trainer.kernels.summary import tensorboard_proto

__all__ = ["FileWriterCache", "Summary"]


class SummaryValue:
    """One ``Summary.Value``: a ``tag`` with a ``simple_value`` (a scalar)."""

    def __init__(self, tag: str = "", simple_value: float | None = None, **unsupported):
        if unsupported:
            raise ValueError(f"Summary.Value: only tag and simple_value are supported, got {sorted(unsupported)}; "
                             "use the tf.summary ops for images, audio, text and histograms")
        self.tag, self.simple_value = tag, simple_value

    def message(self):
        """This value as TensorBoard's ``Summary.Value`` message."""
        value = tensorboard_proto("summary_pb2").Summary.Value(tag=self.tag)
        if self.simple_value is not None:
            value.simple_value = float(self.simple_value)
        return value


class Summary:
    """A list of ``Summary.Value`` s; ``value.add(tag=, simple_value=)`` appends one, as the proto's."""

    Value = SummaryValue

    class _Values(list):
        def add(self, **fields) -> SummaryValue:
            v = SummaryValue(**fields)
            self.append(v)
            return v

    def __init__(self, value=None):
        self.value = Summary._Values(value or [])

    def __bytes__(self) -> bytes:
        return tensorboard_proto("summary_pb2").Summary(value=[v.message() for v in self.value]).SerializeToString()

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        return bytes(self)


class FileWriterCache:
    """One FileWriter per log directory, shared by whoever asks for it."""

    _writers: dict = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, logdir: str):
        from trainer.summary import FileWriter

        with cls._lock:
            if logdir not in cls._writers:
                cls._writers[logdir] = FileWriter(logdir)
            return cls._writers[logdir]

    @classmethod
    def clear(cls) -> None:
        with cls._lock:
            for writer in cls._writers.values():
                writer.close()
            cls._writers.clear()
