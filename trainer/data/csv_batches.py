"""``tf.data.experimental.make_csv_dataset``: batches of ``(features, label)`` read from CSV files,
column names from the header and column types inferred from the first rows, as TF 1.15 does it."""

from __future__ import annotations

import csv
from typing import Sequence

import numpy as np

from trainer.data.csv_dataset import CsvDataset
from trainer.data.dataset import AUTOTUNE, Dataset
from trainer.data.files import text_lines
from trainer.data.filtering import IgnoreErrorsDataset
from trainer.data.readers import matching_files, shuffle_and_repeat_epochs
from trainer.data.tfrecord import compression_name

__all__ = ["infer_column_types", "make_csv_dataset"]

# The types a column may take, least permissive first: a column is the first type all its values fit.
_INT32, _INT64 = np.iinfo(np.int32), np.iinfo(np.int64)


def _fits(text: str, rank: int) -> bool:
    try:
        if rank <= 1:
            value = int(text)
            limits = _INT32 if rank == 0 else _INT64
            return limits.min <= value <= limits.max
        with np.errstate(over="ignore"):
            return bool(np.isfinite(np.float32(text) if rank == 2 else np.float64(text)))
    except (ValueError, OverflowError):
        return rank == 4


_TYPES = [np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64), np.dtype(object)]


def _rows(paths: list[str], compression: str, header: bool, field_delim: str, use_quote_delim: bool):
    for path in paths:
        lines = text_lines(path, compression)
        if header:
            next(lines, None)
        quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
        yield from csv.reader(lines, delimiter=field_delim, quoting=quoting)


def infer_column_types(paths: list[str], num_columns: int, field_delim: str = ",", use_quote_delim: bool = True,
                       na_value: str = "", header: bool = True, num_rows: int = 100,
                       select_columns: Sequence[int] | None = None, compression: str = "") -> list[np.dtype]:
    """Each column's type from the first ``num_rows`` rows: int32, int64, float32, float64 or
    string, whichever is the first that every non-empty value fits (string if none is given)."""
    ranks: list[int | None] = [None] * num_columns
    for n, row in enumerate(_rows(paths, compression, header, field_delim, use_quote_delim)):
        if n >= num_rows:
            break
        values = [row[c] for c in select_columns] if select_columns else row
        for i, text in enumerate(values[:num_columns]):
            if text in ("", na_value):
                continue
            rank = ranks[i] or 0
            while not _fits(text, rank):
                rank += 1
            ranks[i] = rank
    return [_TYPES[4 if r is None else r] for r in ranks]


def _header_names(paths: list[str], compression: str, field_delim: str, use_quote_delim: bool) -> list[str]:
    names = None
    quoting = csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE
    for path in paths:
        first = next(text_lines(path, compression), None)
        if first is None:
            raise ValueError(f"make_csv_dataset: {path!r} is empty; it has no header line to take column names from")
        found = next(csv.reader([first], delimiter=field_delim, quoting=quoting))
        if names is not None and found != names:
            raise ValueError(f"make_csv_dataset: files have different column names in the header row: {names} vs "
                             f"{found} in {path!r}")
        names = found
    return names


def _column_indices(select_columns, column_names: list[str]) -> list[int] | None:
    if select_columns is None:
        return None
    if all(isinstance(c, (int, np.integer)) for c in select_columns):
        indices = [int(c) for c in select_columns]
        bad = [c for c in indices if not 0 <= c < len(column_names)]
        if bad:
            raise ValueError(f"make_csv_dataset: select_columns index {bad[0]} is not a column (there are "
                             f"{len(column_names)})")
    elif all(isinstance(c, str) for c in select_columns):
        missing = [c for c in select_columns if c not in column_names]
        if missing:
            raise ValueError(f"make_csv_dataset: select_columns {missing} are not among the columns {column_names}")
        indices = [column_names.index(c) for c in select_columns]
    else:
        raise ValueError("make_csv_dataset: select_columns must be all column names or all column indices")
    return sorted(indices)


def make_csv_dataset(file_pattern, batch_size: int, column_names: Sequence[str] | None = None,
                     column_defaults=None, label_name: str | None = None, select_columns=None,
                     field_delim: str = ",", use_quote_delim: bool = True, na_value: str = "", header: bool = True,
                     num_epochs: int | None = None, shuffle: bool = True, shuffle_buffer_size: int = 10000,
                     shuffle_seed: int | None = None, prefetch_buffer_size=AUTOTUNE, num_parallel_reads: int = 1,
                     sloppy: bool = False, num_rows_for_inference: int = 100, compression_type=None,
                     ignore_errors: bool = False) -> Dataset:
    """Batches of ``features`` (a dict, column name to a ``[batch]`` tensor) or ``(features, label)``
    with ``label_name``. Files are ``file_pattern``'s matches; names come from the header unless
    given; types come from ``column_defaults`` or are inferred from ``num_rows_for_inference`` rows.
    ``num_epochs=None`` repeats forever (and drops the last partial batch, as TensorFlow does)."""
    paths = matching_files(file_pattern, "make_csv_dataset")
    compression = compression_name(compression_type)
    if column_names is None:
        if not header:
            raise ValueError("make_csv_dataset: cannot infer column names without a header line; give column_names")
        column_names = _header_names(paths, compression, field_delim, use_quote_delim)
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError(f"make_csv_dataset: duplicate column names in {column_names}")
    indices = _column_indices(select_columns, column_names)
    names = [column_names[i] for i in indices] if indices is not None else column_names
    if label_name is not None and label_name not in names:
        raise ValueError(f"make_csv_dataset: label_name {label_name!r} must be one of the columns {names}")
    if column_defaults is None:
        types = infer_column_types(paths, len(names), field_delim, use_quote_delim, na_value, header,
                                   num_rows_for_inference, indices, compression)
        column_defaults = [[""] if t == object else np.zeros(1, t) for t in types]
    if len(column_defaults) != len(names):
        raise ValueError(f"make_csv_dataset: {len(column_defaults)} column_defaults for {len(names)} columns")

    def rows_of(path_dataset_or_path):
        rows = CsvDataset(path_dataset_or_path, column_defaults, compression_type=compression_type, header=header,
                          field_delim=field_delim, use_quote_delim=use_quote_delim, na_value=na_value,
                          select_cols=indices)
        return IgnoreErrorsDataset(rows) if ignore_errors else rows

    files = Dataset.from_tensor_slices(np.asarray(paths, dtype=object))
    if shuffle:
        files = files.shuffle(len(paths), seed=shuffle_seed)
    dataset = files.interleave(rows_of, cycle_length=num_parallel_reads)
    dataset = shuffle_and_repeat_epochs(dataset, num_epochs, shuffle, shuffle_buffer_size, shuffle_seed)
    dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)

    def to_features(*columns):
        features = dict(zip(names, columns))
        if label_name is None:
            return features
        label = features.pop(label_name)
        return features, label

    return dataset.map(to_features).prefetch(prefetch_buffer_size)
