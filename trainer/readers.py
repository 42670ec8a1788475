"""TensorFlow 1.x's readers: ``tf.TextLineReader``, ``tf.TFRecordReader`` and the other ``ReaderBase``s.

A reader reads the files a queue of file names hands out (``tf.train.string_input_producer``), one
record per ``read``, moving on to the next file name when a file ends; once the queue is closed and
drained, ``read`` raises OutOfRangeError, which ends the queue runner that reads, and so the
epoch loop. The reader is session state (trainer/reader_state.py), like a queue: readers are
training-side and are never frozen into a served model.

    filename_queue = tf.train.string_input_producer(["a.csv", "b.csv"], num_epochs=2)
    key, value = tf.TextLineReader(skip_header_lines=1).read(filename_queue)
"""

from __future__ import annotations

import numpy as np

from trainer.data.tfrecord import compression_name
from trainer.graph import TRAINER_DOMAIN, Tensor, get_default_graph
from trainer.ops import convert_to_tensor, make_op

__all__ = ["FixedLengthRecordReader", "IdentityReader", "ReaderBase", "TFRecordReader",
           "TextLineReader", "WholeFileReader"]


def _queue_handle(queue) -> Tensor:
    """A queue object's handle (or a handle tensor given as is)."""
    handle = getattr(queue, "handle", queue)
    if not isinstance(handle, Tensor):
        raise TypeError(f"a reader reads from a queue of file names (e.g. tf.train.string_input_producer(...)), "
                        f"got {type(queue).__name__}")
    return handle


class ReaderBase:
    """A reader op's handle and the ops that read through it; subclasses name the op and its attributes."""

    op_type = ""

    def __init__(self, attrs: dict | None = None, name: str | None = None):
        g = get_default_graph()
        node = g.create_op(self.op_type, [], dict(attrs or {}), domain=TRAINER_DOMAIN, name=name or self.op_type)
        node.attrs["shared_name"] = node.name
        self.reader_ref = node.outputs[0]
        self.graph = g

    @property
    def supports_serialize(self) -> bool:
        return False

    def _op(self, op_type: str, inputs: list, name: str | None, num_outputs: int = 1):
        with self.graph.as_default():
            return make_op(op_type, [self.reader_ref, *inputs], domain=TRAINER_DOMAIN, num_outputs=num_outputs,
                           name=name or f"{self.reader_ref.node.name}/{op_type}")

    def read(self, queue, name: str | None = None) -> tuple[Tensor, Tensor]:
        """The next record as scalar strings ``(key, value)``."""
        key, value = self._op("ReaderRead", [_queue_handle(queue)], name, 2).outputs
        return key, value

    def read_up_to(self, queue, num_records, name: str | None = None) -> tuple[Tensor, Tensor]:
        """Up to ``num_records`` records as 1-D ``(keys, values)``; fewer only at the end of the input."""
        n = convert_to_tensor(np.asarray(num_records, np.int64)) if not isinstance(num_records, Tensor) else num_records
        keys, values = self._op("ReaderReadUpTo", [_queue_handle(queue), n], name, 2).outputs
        return keys, values

    def num_records_produced(self, name: str | None = None) -> Tensor:
        return self._op("ReaderNumRecordsProduced", [], name).outputs[0]

    def num_work_units_completed(self, name: str | None = None) -> Tensor:
        return self._op("ReaderNumWorkUnitsCompleted", [], name).outputs[0]

    def reset(self, name: str | None = None):
        """An op that forgets the current file and zeroes the counts."""
        return self._op("ReaderReset", [], name)

    def serialize_state(self, name: str | None = None):
        raise NotImplementedError(f"{type(self).__name__}.serialize_state: flowstack's readers cannot save their "
                                  "position; restart reading from the queue of file names instead")

    def restore_state(self, state, name: str | None = None):
        raise NotImplementedError(f"{type(self).__name__}.restore_state: flowstack's readers cannot restore a "
                                  "position; restart reading from the queue of file names instead")


class TextLineReader(ReaderBase):
    """Each line of each file (without its line ending) is a record, keyed ``file:line_number``."""

    op_type = "TextLineReader"

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None):
        super().__init__({"skip_header_lines": int(skip_header_lines or 0)}, name)


class TFRecordReader(ReaderBase):
    """Each record of each TFRecord file (bytes), keyed ``file:offset``."""

    op_type = "TFRecordReader"

    def __init__(self, name: str | None = None, options=None):
        super().__init__({"compression_type": compression_name(options)}, name)


class FixedLengthRecordReader(ReaderBase):
    """Records of ``record_bytes`` bytes between a header and a footer, keyed ``file:index``."""

    op_type = "FixedLengthRecordReader"

    def __init__(self, record_bytes: int, header_bytes: int | None = None, footer_bytes: int | None = None,
                 hop_bytes: int | None = None, name: str | None = None, encoding: str | None = None):
        if int(record_bytes) <= 0:
            raise ValueError(f"FixedLengthRecordReader: record_bytes must be positive, got {record_bytes}")
        super().__init__({"record_bytes": int(record_bytes), "header_bytes": int(header_bytes or 0),
                          "footer_bytes": int(footer_bytes or 0), "hop_bytes": int(hop_bytes or 0),
                          "encoding": compression_name(encoding)}, name)


class WholeFileReader(ReaderBase):
    """Each file whole (bytes) is one record, keyed by its name (images, small documents)."""

    op_type = "WholeFileReader"

    def __init__(self, name: str | None = None):
        super().__init__({}, name)


class IdentityReader(ReaderBase):
    """Each queued string is one record, as both key and value."""

    op_type = "IdentityReader"

    def __init__(self, name: str | None = None):
        super().__init__({}, name)

