"""CSV records to columns, as TensorFlow's DecodeCSV parses them (the kernel: trainer/kernels/data.py).

A field may be quoted (``use_quote_delim``): ``"a,b"`` is one field and ``""`` inside quotes is a
quote; a quote inside an unquoted field, or text after a closing quote, is an error. An empty field,
or one equal to ``na_value``, takes its column's default; a column with no default is required.
Every error is an InvalidArgumentError naming the record (its index and text) and the field.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["decode_csv_records", "split_fields"]

# What DecodeCSV's errors call each column type.
_TYPE_NAMES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64", "object": "string"}


class _FieldError(ValueError):
    """A record that does not split into fields (reported with the record's index and text)."""


def split_fields(record: str, delim: str, quoted: bool) -> list[str]:
    """The fields of one record.

    >>> split_fields('1,"a ""b"", c",', ",", True)
    ['1', 'a "b", c', '']
    """
    if not quoted or '"' not in record:
        return record.split(delim)
    fields, i, n = [], 0, len(record)
    while True:
        if i < n and record[i] == '"':
            parts, i = [], i + 1
            while True:
                j = record.find('"', i)
                if j < 0:
                    raise _FieldError(f"field {len(fields)}: a quoted field has to end with a quote")
                parts.append(record[i:j])
                if record.startswith('""', j):
                    parts.append('"')
                    i = j + 2
                    continue
                i = j + 1
                break
            fields.append("".join(parts))
            if i == n:
                return fields
            if record[i] != delim:
                raise _FieldError(f"field {len(fields) - 1}: a quote inside a quoted field has to be escaped by "
                                  "another quote")
            i += 1
        else:
            j = record.find(delim, i)
            field = record[i:] if j < 0 else record[i:j]
            if '"' in field:
                raise _FieldError(f"field {len(fields)}: an unquoted field cannot have quotes inside")
            fields.append(field)
            if j < 0:
                return fields
            i = j + 1


def _text(record) -> str:
    return record.decode("utf-8") if isinstance(record, bytes) else str(record)


def _column(cells: list[str], default: np.ndarray, col: int, na_value: str, records: list[str]) -> np.ndarray:
    """Column ``col``'s values: its cells parsed as the default's dtype, the default where empty or NA."""
    dtype = default.dtype
    missing = [i for i, cell in enumerate(cells) if cell == "" or (na_value and cell == na_value)]
    if missing and default.size == 0:
        r = missing[0]
        raise InvalidArgumentError(f"Field {col} is required but missing in record {r}! (record: {records[r]!r})")
    present = [c for c in cells if not (c == "" or (na_value and c == na_value))]
    out = np.empty(len(cells), dtype)
    mask = np.ones(len(cells), bool)
    mask[missing] = False
    if dtype == object:
        values = np.empty(len(present), object)
        values[:] = present
    else:
        try:
            values = np.asarray(present, dtype=dtype)
        except (ValueError, OverflowError):
            r = next(i for i, c in enumerate(cells) if mask[i] and not _parses(c, dtype))
            raise InvalidArgumentError(f"Field {col} in record {r} is not a valid {_TYPE_NAMES[dtype.name]}: "
                                       f"{cells[r]!r} (record: {records[r]!r})") from None
    out[mask] = values
    if missing:
        out[~mask] = default.reshape(-1)[0]
    return out


def _parses(cell: str, dtype: np.dtype) -> bool:
    try:
        np.asarray([cell], dtype=dtype)
    except (ValueError, OverflowError):
        return False
    return True


def decode_csv_records(records, record_defaults: Sequence[np.ndarray], field_delim: str = ",",
                       use_quote_delim: bool = True, na_value: str = "",
                       select_cols: Sequence[int] = ()) -> list[np.ndarray]:
    """One array per default, each of the records' shape (see the module docstring)."""
    shape = np.shape(records)
    texts = [_text(r) for r in np.asarray(records, dtype=object).reshape(-1)]
    n_cols = len(record_defaults)
    if select_cols and len(select_cols) != n_cols:
        raise InvalidArgumentError(f"decode_csv: {len(select_cols)} select_cols but {n_cols} record_defaults")
    columns: list[list[str]] = [[] for _ in range(n_cols)]
    for r, text in enumerate(texts):
        try:
            fields = split_fields(text, field_delim, use_quote_delim)
        except _FieldError as e:
            raise InvalidArgumentError(f"Record {r} is not valid CSV: {e} (record: {text!r})") from None
        if select_cols:
            if len(fields) <= select_cols[-1]:
                raise InvalidArgumentError(f"Expect at least {select_cols[-1] + 1} fields (select_cols) but have "
                                           f"{len(fields)} in record {r} (record: {text!r})")
            fields = [fields[c] for c in select_cols]
        elif len(fields) != n_cols:
            raise InvalidArgumentError(f"Expect {n_cols} fields but have {len(fields)} in record {r} "
                                       f"(record: {text!r})")
        for column, field in zip(columns, fields):
            column.append(field)
    outputs = []
    for i, (cells, default) in enumerate(zip(columns, record_defaults)):
        col = select_cols[i] if select_cols else i
        outputs.append(_column(cells, np.asarray(default), col, na_value, texts).reshape(shape))
    return outputs
