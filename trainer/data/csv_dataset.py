"""``tf.data.experimental.CsvDataset``: the records of CSV files, one element per line, a scalar per
column; parsed by DecodeCSV's parser (trainer/csv_records.py), so both agree on quoting, defaults
and missing fields. A line that does not parse is an InvalidArgumentError naming the file and the
line; below ``ignore_errors()`` the line is skipped instead.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from trainer.csv_records import decode_csv_records
from trainer.data.dataset import Dataset, TensorSpec
from trainer.data.files import file_paths, text_lines
from trainer.data.structure import as_numpy_dtype
from trainer.data.tfrecord import compression_name
from trainer.graph import Tensor
from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["CSV_COLUMN_TYPES", "CsvDataset", "csv_column_default"]

CSV_COLUMN_TYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, object))
_LINES_PER_PARSE = 512  # lines parsed per DecodeCSV call: its per-call cost shared, its errors still found


def csv_column_default(value, i: int) -> np.ndarray:
    """``record_defaults[i]``: a dtype (a required column) or a value of one entry (its default;
    Python ints are int32 and floats float32, as in TensorFlow); an empty value is required too."""
    if isinstance(value, Tensor):
        from trainer.graph_extras import get_static_value

        known = get_static_value(value)
        if known is None:
            raise TypeError(f"CsvDataset: record_defaults[{i}] is the tensor {value.name}, whose value is not "
                            "known when the dataset is built; give a constant")
        value = known
    if isinstance(value, type) or hasattr(value, "as_numpy_dtype") or isinstance(value, np.dtype):
        array = np.zeros(0, as_numpy_dtype(value))
    else:
        array = np.asarray(value)
        leaves = np.asarray(value, dtype=object).reshape(-1)
        from_python = not isinstance(value, (np.ndarray, np.generic)) and \
            not any(isinstance(v, np.generic) for v in leaves)
        if array.dtype.kind in "US" or (array.dtype == object and array.size and isinstance(array.flat[0], bytes)):
            array = np.asarray([v.decode() if isinstance(v, bytes) else str(v) for v in array.reshape(-1)],
                               dtype=object).reshape(array.shape)
        elif array.dtype == np.int64 and from_python:
            array = array.astype(np.int32)
        elif array.dtype == np.float64 and from_python:
            array = array.astype(np.float32)
    if array.dtype not in CSV_COLUMN_TYPES:
        raise TypeError(f"CsvDataset: record_defaults[{i}] has dtype {array.dtype.name}; a column is float32, "
                        "float64, int32, int64 or string")
    if array.size > 1:
        raise ValueError(f"CsvDataset: record_defaults[{i}] must hold at most one value, got {array.size}")
    return array.reshape(-1)


class CsvDataset(Dataset):
    """``CsvDataset(filenames, record_defaults, ...)``: a tuple of scalars per record, one per column."""

    def __init__(self, filenames, record_defaults, compression_type=None, buffer_size=None, header: bool = False,
                 field_delim: str = ",", use_quote_delim: bool = True, na_value: str = "", select_cols=None):
        self.filenames = filenames if isinstance(filenames, Tensor) else file_paths(filenames)
        self.compression = compression_name(compression_type)
        if not record_defaults:
            raise ValueError("CsvDataset: record_defaults must name at least one column")
        self.defaults = [csv_column_default(d, i) for i, d in enumerate(record_defaults)]
        if len(field_delim) != 1:
            raise ValueError(f"CsvDataset: field_delim must be one character, got {field_delim!r}")
        self.select_cols = [int(c) for c in select_cols] if select_cols is not None else []
        cols = self.select_cols
        if cols and (cols != sorted(set(cols)) or cols[0] < 0):
            raise ValueError(f"CsvDataset: select_cols must be distinct, ascending and non-negative, got {cols}")
        if cols and len(cols) != len(self.defaults):
            raise ValueError(f"CsvDataset: select_cols has {len(cols)} columns but record_defaults "
                             f"{len(self.defaults)}; they must have the same length")
        self.header = bool(header)
        self.field_delim, self.use_quote_delim, self.na_value = field_delim, bool(use_quote_delim), na_value
        self.element_spec = tuple(TensorSpec(d.dtype, ()) for d in self.defaults)

    def _own_captured(self):
        return [self.filenames] if isinstance(self.filenames, Tensor) else []

    def elements(self, ctx):
        paths = file_paths(ctx.value(self.filenames)) if isinstance(self.filenames, Tensor) else self.filenames
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"CsvDataset: no file {path!r}")
            yield from self._records(path, ctx.skip_failed_elements)

    def _records(self, path: str, skip_bad_lines: bool) -> Iterator[list]:
        lines = text_lines(path, self.compression)
        first = 1
        if self.header and next(lines, None) is not None:
            first = 2
        chunk: list[str] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) == _LINES_PER_PARSE:
                yield from self._parse(chunk, path, first, skip_bad_lines)
                first += len(chunk)
                chunk = []
        if chunk:
            yield from self._parse(chunk, path, first, skip_bad_lines)

    def _decode(self, lines: list[str]) -> list[np.ndarray]:
        return decode_csv_records(lines, self.defaults, self.field_delim, self.use_quote_delim, self.na_value,
                                  self.select_cols)

    def _parse(self, lines: list[str], path: str, first_line: int, skip_bad_lines: bool) -> Iterator[list]:
        try:
            columns = self._decode(lines)
        except InvalidArgumentError:
            columns = None  # find the bad line(s) one at a time, below
        if columns is not None:
            for i in range(len(lines)):
                yield [_scalar(c[i]) for c in columns]
            return
        for n, line in enumerate(lines, first_line):
            try:
                columns = self._decode([line])
            except InvalidArgumentError as e:
                if skip_bad_lines:
                    continue
                raise InvalidArgumentError(f"CsvDataset: {path}:{n}: {e}") from None
            yield [_scalar(c[0]) for c in columns]


def _scalar(value) -> np.ndarray:
    if isinstance(value, str):
        out = np.empty((), dtype=object)
        out[()] = value
        return out
    return np.asarray(value)
