"""Kernels of the input-pipeline ops (family ``data``: ``schemas/ops/data.py``): the stateful
iterator kernels, TF1's readers and file ops, and DecodeCSV's (in the trainer, failing with the
trainer's InvalidArgumentError naming the record). ParseExample runs on the edge runtime's kernel
(edge_runtime/kernels/data.py), so a model fed records exports.

Each receives the run's ``RunContext`` first. An iterator is an ``IteratorState`` resource in
``rctx.state.resources`` under its handle's shared name; its dataset comes from the graph's
dataset table (trainer/data/iterator.py), with the values of the tensors it captured as inputs.
A reader is a ``ReaderState`` resource (trainer/reader_state.py) the same way.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from edge_runtime.kernels import kernel
from trainer.csv_records import decode_csv_records
from trainer.data.dataset import Dataset
from trainer.data.iterator import IteratorState, lookup_dataset
from trainer.kernels.debugging import InvalidArgumentError
from trainer.kernels.registry import stateful_kernel
from trainer.reader_state import ReaderState

__all__: list[str] = []

D = "flowstack"


def _handle(rctx, name: str, factory=IteratorState) -> np.ndarray:
    resources = rctx.state.resources
    with rctx.state.lock:
        if name not in resources:
            resources[name] = factory(name)
    return _string(name)


def _string(value) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _state(rctx, handle):
    """The resource (an IteratorState, a ReaderState, a queue's QueueBuffer) behind a handle."""
    return rctx.state.resources[str(handle[()])]


def _captured_values(dataset: Dataset, values) -> dict:
    return dict(zip(dataset.captured_tensors(), values))


@stateful_kernel("Iterator")
def iterator_handle(rctx, *, xp, shared_name, dataset):
    return _handle(rctx, shared_name)


@stateful_kernel("OneShotIterator")
def one_shot_iterator(rctx, *captured, xp, shared_name, dataset):
    with rctx.state.lock:
        fresh = shared_name not in rctx.state.resources
        handle = _handle(rctx, shared_name)
        if fresh:
            ds = lookup_dataset(rctx.session.graph, dataset, shared_name)
            _state(rctx, handle).start(ds, _captured_values(ds, captured))
    return handle


@stateful_kernel("MakeIterator")
def make_iterator(rctx, handle, *captured, xp, dataset):
    state = _state(rctx, handle)
    ds = lookup_dataset(rctx.session.graph, dataset, state.name)
    state.start(ds, _captured_values(ds, captured))


@stateful_kernel("IteratorGetNext")
def iterator_get_next(rctx, handle, *, xp, output_types, output_shapes):
    comps = _state(rctx, handle).next()
    return tuple(c if isinstance(c, np.ndarray) else np.asarray(c) for c in comps)


# -- TF1 readers: one handle op per kind, all reading through ReaderState ------------------------
def _reader(rctx, op_type: str, shared_name: str, **attrs) -> np.ndarray:
    return _handle(rctx, shared_name, lambda name: ReaderState(name, op_type, attrs))


@stateful_kernel("TextLineReader")
def text_line_reader(rctx, *, xp, shared_name, skip_header_lines):
    return _reader(rctx, "TextLineReader", shared_name, skip_header_lines=skip_header_lines)


@stateful_kernel("TFRecordReader")
def tfrecord_reader(rctx, *, xp, shared_name, compression_type):
    return _reader(rctx, "TFRecordReader", shared_name, compression_type=compression_type)


@stateful_kernel("FixedLengthRecordReader")
def fixed_length_record_reader(rctx, *, xp, shared_name, record_bytes, header_bytes, footer_bytes, hop_bytes,
                               encoding):
    return _reader(rctx, "FixedLengthRecordReader", shared_name, record_bytes=record_bytes,
                   header_bytes=header_bytes, footer_bytes=footer_bytes, hop_bytes=hop_bytes, encoding=encoding)


@stateful_kernel("WholeFileReader")
def whole_file_reader(rctx, *, xp, shared_name):
    return _reader(rctx, "WholeFileReader", shared_name)


@stateful_kernel("IdentityReader")
def identity_reader(rctx, *, xp, shared_name):
    return _reader(rctx, "IdentityReader", shared_name)


@stateful_kernel("ReaderRead")
def reader_read(rctx, reader, queue, *, xp):
    (key, value), = _state(rctx, reader).read_up_to(_state(rctx, queue), 1)
    return _string(key), _string(value)


@stateful_kernel("ReaderReadUpTo")
def reader_read_up_to(rctx, reader, queue, num_records, *, xp):
    n = int(num_records)
    if n <= 0:
        raise InvalidArgumentError(f"read_up_to: num_records must be positive, got {n}")
    records = _state(rctx, reader).read_up_to(_state(rctx, queue), n)
    keys, values = np.empty(len(records), dtype=object), np.empty(len(records), dtype=object)
    for i, (key, value) in enumerate(records):
        keys[i], values[i] = key, value
    return keys, values


@stateful_kernel("ReaderNumRecordsProduced")
def reader_num_records_produced(rctx, reader, *, xp):
    return np.asarray(_state(rctx, reader).produced, np.int64)


@stateful_kernel("ReaderNumWorkUnitsCompleted")
def reader_num_work_units_completed(rctx, reader, *, xp):
    return np.asarray(_state(rctx, reader).completed, np.int64)


@stateful_kernel("ReaderReset")
def reader_reset(rctx, reader, *, xp):
    _state(rctx, reader).reset()


# -- files -------------------------------------------------------------------------------------
def _path(value) -> str:
    path = np.asarray(value, dtype=object)
    if path.shape != ():
        raise InvalidArgumentError(f"a file name must be a scalar string, got shape {path.shape}")
    path = path[()]
    return path.decode() if isinstance(path, bytes) else str(path)


@stateful_kernel("ReadFile")
def read_file(rctx, filename, *, xp):
    with open(_path(filename), "rb") as f:
        return _string(f.read())


@stateful_kernel("WriteFile")
def write_file(rctx, filename, contents, *, xp):
    path, data = _path(filename), np.asarray(contents, dtype=object)[()]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else bytes(data))


@stateful_kernel("MatchingFiles")
def matching_files(rctx, pattern, *, xp):
    patterns = [p.decode() if isinstance(p, bytes) else str(p) for p in np.asarray(pattern, dtype=object).reshape(-1)]
    names = sorted({name for p in patterns for name in glob.glob(p)})
    out = np.empty(len(names), dtype=object)
    out[:] = names
    return out


@kernel("DecodeCSV", domain=D)
def decode_csv(records, *record_defaults, xp, field_delim, use_quote_delim, na_value, select_cols):
    return tuple(decode_csv_records(records, record_defaults, field_delim, bool(use_quote_delim), na_value,
                                    list(select_cols)))
