"""The state behind a TF1 reader handle: the file being read, where in it, and the counts.

A reader (``tf.TextLineReader`` & co., trainer/readers.py) is session state, as in TensorFlow: its
handle op's kernel (trainer/kernels/data.py) creates a ``ReaderState`` on first use. Each read takes
the next record of the current *work unit* (a file name); when that is exhausted it dequeues the
next one from the queue of file names, so a queue closed and drained ends the reads with
OutOfRangeError. Reads are serialized, so several queue-runner threads may share one reader.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator

from trainer.data.files import fixed_length_records, text_lines
from trainer.data.tfrecord import read_records
from trainer.errors import OutOfRangeError
from trainer.queue_buffer import QueueBuffer

__all__ = ["READER_SOURCES", "ReaderState"]

Record = tuple[str, object]  # (key, value)


def _text_line_records(path: str, *, skip_header_lines: int) -> Iterator[Record]:
    for number, line in enumerate(text_lines(path), start=1):  # keys count the header lines too, as TF's
        if number > skip_header_lines:
            yield f"{path}:{number}", line


def _tfrecord_records(path: str, *, compression_type: str) -> Iterator[Record]:
    offset = 0
    for record in read_records(path, compression_type):
        yield f"{path}:{offset}", record
        offset += 16 + len(record)  # length, its CRC, the data, its CRC


def _fixed_length_records(path: str, *, record_bytes: int, header_bytes: int, footer_bytes: int, hop_bytes: int,
                          encoding: str) -> Iterator[Record]:
    records = fixed_length_records(path, encoding, record_bytes, header_bytes, footer_bytes, hop_bytes)
    for index, record in enumerate(records):
        yield f"{path}:{index}", record


def _whole_file_records(path: str) -> Iterator[Record]:
    with open(path, "rb") as f:
        yield path, f.read()


def _identity_records(work: str) -> Iterator[Record]:
    yield work, work


# Reader op -> (work unit, the op's attributes) -> its records; a file reader's work unit is a path.
READER_SOURCES: dict[str, Callable[..., Iterator[Record]]] = {
    "TextLineReader": _text_line_records,
    "TFRecordReader": _tfrecord_records,
    "FixedLengthRecordReader": _fixed_length_records,
    "WholeFileReader": _whole_file_records,
    "IdentityReader": _identity_records,
}


class ReaderState:
    """One reader's progress: the current work unit's records, records produced, units completed."""

    def __init__(self, name: str, op_type: str, attrs: dict):
        self.name = name
        self.kind = op_type
        self.source = READER_SOURCES[op_type]
        self.attrs = attrs
        self.lock = threading.Lock()
        self.records: Iterator[Record] | None = None
        self.produced = 0
        self.completed = 0

    def _next_work(self, queue: QueueBuffer) -> Iterator[Record]:
        work = queue.take(1)[0][0][()]
        return self.source(work.decode() if isinstance(work, bytes) else str(work), **self.attrs)

    def read_up_to(self, queue: QueueBuffer, n: int) -> list[Record]:
        """Up to ``n`` records, moving on to the queue's next file as each ends; fewer only when the
        queue is closed and drained, and OutOfRangeError when not even one is left."""
        out: list[Record] = []
        with self.lock:
            while len(out) < n:
                if self.records is None:
                    try:
                        self.records = self._next_work(queue)
                    except OutOfRangeError as e:
                        if out:
                            break
                        raise OutOfRangeError(f"{self.kind} {self.name!r}: no more files to read: {e}") from None
                try:
                    out.append(next(self.records))
                except StopIteration:
                    self.records = None
                    self.completed += 1
                except FileNotFoundError as e:
                    self.records = None
                    raise FileNotFoundError(f"{self.kind} {self.name!r}: no file {e.filename!r}") from None
                except BaseException:
                    self.records = None  # a bad file is skipped by the next read, not re-read forever
                    raise
            self.produced += len(out)
        return out

    def reset(self) -> None:
        with self.lock:
            if self.records is not None:
                self.records.close()
            self.records = None
            self.produced = self.completed = 0
