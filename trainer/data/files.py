"""Datasets that read files: ``TextLineDataset``, ``TFRecordDataset``, ``FixedLengthRecordDataset``.

``filenames`` is a path, a list of paths, or a string tensor (a placeholder fed to the iterator's
initializer, as TF1 scripts switch between training and validation files); files are read in order,
one after another. Elements are scalar strings: a text line as ``str`` (the trainer's string
tensors hold ``str``), without its line ending; a record as ``bytes``.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from trainer.data.dataset import Dataset, TensorSpec, positive_int
from trainer.data.tfrecord import compression_name, open_stream, read_records
from trainer.graph import Tensor

__all__ = ["FixedLengthRecordDataset", "TFRecordDataset", "TextLineDataset", "file_paths", "fixed_length_records",
           "text_lines"]

_STRING = TensorSpec(np.dtype(object), ())


def _scalar(value) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


class _FileDataset(Dataset):
    """Elements read from each of ``filenames`` in turn by ``_read(path)``."""

    element_spec = _STRING

    def __init__(self, filenames, compression_type=None):
        self.filenames = filenames if isinstance(filenames, Tensor) else file_paths(filenames)
        self.compression = compression_name(compression_type)

    def _own_captured(self):
        return [self.filenames] if isinstance(self.filenames, Tensor) else []

    def elements(self, ctx):
        paths = file_paths(ctx.value(self.filenames)) if isinstance(self.filenames, Tensor) else self.filenames
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{type(self).__name__}: no file {path!r}")
            for item in self._read(path):
                yield [_scalar(item)]

    def _read(self, path: str) -> Iterator:
        raise NotImplementedError(type(self).__name__)


def file_paths(filenames) -> list[str]:
    """``filenames`` (a path, a list of paths, or a string tensor's value) as a list of paths."""
    values = np.asarray(filenames, dtype=object).reshape(-1).tolist()
    paths = [v.decode() if isinstance(v, bytes) else v for v in values]
    bad = [p for p in paths if not isinstance(p, (str, os.PathLike))]
    if bad:
        raise TypeError(f"filenames must be strings (a path, a list of paths or a string tensor), got {bad[0]!r}")
    return [os.fspath(p) for p in paths]


class TextLineDataset(_FileDataset):
    """``tf.data.TextLineDataset(filenames, compression_type=None)``: one element per line."""

    def __init__(self, filenames, compression_type=None, buffer_size=None):
        super().__init__(filenames, compression_type)

    def _read(self, path):
        return text_lines(path, self.compression)


def text_lines(path: str, compression: str = "") -> Iterator[str]:
    """The lines of ``path`` as ``str``, without their line endings."""
    with open_stream(path, compression) as f:
        for line in f:
            yield line.decode("utf-8").rstrip("\r\n")


class TFRecordDataset(_FileDataset):
    """``tf.data.TFRecordDataset(filenames, compression_type=None)``: one element (bytes) per record."""

    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        super().__init__(filenames, compression_type)

    def _read(self, path):
        return read_records(path, self.compression)


class FixedLengthRecordDataset(_FileDataset):
    """``tf.data.FixedLengthRecordDataset``: records of ``record_bytes`` between a header and a footer."""

    def __init__(self, filenames, record_bytes: int, header_bytes: int = 0, footer_bytes: int = 0,
                 buffer_size=None, compression_type=None):
        super().__init__(filenames, compression_type)
        self.record = positive_int(record_bytes, "record_bytes")
        self.header, self.footer = int(header_bytes or 0), int(footer_bytes or 0)

    def _read(self, path):
        return fixed_length_records(path, self.compression, self.record, self.header, self.footer)


def fixed_length_records(path: str, compression: str, record: int, header: int = 0, footer: int = 0,
                         hop: int = 0) -> Iterator[bytes]:
    """The ``record``-byte records of ``path`` between ``header`` and ``footer`` bytes, each starting
    ``hop`` bytes after the last (0: right after it); a tail shorter than a record is an error naming
    the file, not a record silently lost."""
    with open_stream(path, compression) as f:
        data = f.read()
    body = data[header:len(data) - footer]
    step = hop or record
    count = (len(body) - record) // step + 1 if len(body) >= record else 0
    if ((count - 1) * step + record if count else 0) != len(body):
        raise ValueError(f"{path!r} holds {len(body)} bytes between header and footer, which records of "
                         f"record_bytes={record} every {step} bytes do not fill")
    for i in range(count):
        yield body[i * step:i * step + record]
