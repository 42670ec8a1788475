"""TensorFlow 1.x's file and record ops: ``tf.read_file``, ``tf.write_file``, ``tf.matching_files``
and ``tf.decode_csv`` (also under ``tf.io``).

The file ops run when the session runs them (the file system is state), so a pattern fed at run
time or a file written by an earlier step is seen as it is then.
"""

from __future__ import annotations

import numpy as np

from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import convert_to_tensor, make_op

__all__ = ["decode_csv", "matching_files", "read_file", "write_file"]

# The column types DecodeCSV parses, by the NumPy dtype name of a default.
_CSV_TYPES = ("float32", "float64", "int32", "int64", "object")


def _string(value) -> Tensor:
    return value if isinstance(value, Tensor) else convert_to_tensor(np.asarray(value, dtype=object))


def read_file(filename, name: str | None = None) -> Tensor:
    """The whole contents of ``filename`` (a scalar string) as a scalar byte string."""
    return make_op("ReadFile", [_string(filename)], domain=TRAINER_DOMAIN, name=name).outputs[0]


def write_file(filename, contents, name: str | None = None):
    """An op writing the scalar string ``contents`` as the whole of ``filename``."""
    return make_op("WriteFile", [_string(filename), _string(contents)], domain=TRAINER_DOMAIN, name=name)


def matching_files(pattern, name: str | None = None) -> Tensor:
    """The sorted names of the files matching the glob ``pattern`` (or any of a list of patterns)."""
    return make_op("MatchingFiles", [_string(pattern)], domain=TRAINER_DOMAIN, name=name).outputs[0]


def _default(value, i: int) -> Tensor:
    """record_defaults[i] as a tensor: Python ints are int32 and floats float32, as in TensorFlow."""
    if isinstance(value, Tensor):
        t = value
    else:
        a = np.asarray(value)
        if a.dtype.kind in "US":
            a = a.astype(object)
        elif a.dtype == np.int64 and not isinstance(value, np.ndarray):
            a = a.astype(np.int32)
        elif a.dtype == np.float64 and not isinstance(value, np.ndarray):
            a = a.astype(np.float32)
        t = convert_to_tensor(a)
    if t.dtype.name not in _CSV_TYPES:
        raise TypeError(f"decode_csv: record_defaults[{i}] has dtype {t.dtype}; a column is float32, float64, int32, "
                        "int64 or string")
    return t


def decode_csv(records, record_defaults, field_delim: str = ",", use_quote_delim: bool = True, name: str | None = None,
               na_value: str = "", select_cols=None) -> list[Tensor]:
    """One tensor per column of the CSV ``records``, of each ``record_defaults`` entry's dtype.

    Each default is a one-value list (``[0.0]``, ``[0]``, ``[""]``) used where a field is empty or
    equals ``na_value``, or an empty tensor of the column's dtype (``tf.constant([], tf.int32)``)
    where the field is required. ``select_cols`` (ascending indices) picks which columns to parse.
    """
    if len(field_delim) != 1:
        raise ValueError(f"decode_csv: field_delim must be one character, got {field_delim!r}")
    cols = [int(c) for c in select_cols or ()]
    if cols and (cols != sorted(set(cols)) or cols[0] < 0):
        raise ValueError(f"decode_csv: select_cols must be distinct, ascending and non-negative, got {cols}")
    if cols and len(cols) != len(record_defaults):
        raise ValueError(f"decode_csv: {len(cols)} select_cols but {len(record_defaults)} record_defaults")
    defaults = [_default(d, i) for i, d in enumerate(record_defaults)]
    node = make_op("DecodeCSV", [_string(records), *defaults],
                   {"field_delim": field_delim, "use_quote_delim": int(bool(use_quote_delim)), "na_value": na_value,
                    "select_cols": cols},
                   domain=TRAINER_DOMAIN, name=name or "DecodeCSV", num_outputs=len(defaults))
    return list(node.outputs)
