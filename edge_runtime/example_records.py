"""``tf.train.Example`` records without the protobuf package: a small decoder and encoder of the
protocol buffer wire format for example.proto and feature.proto, so the edge runtime (numpy and
flatbuffers only) can run ParseExample and a server can build records from JSON.

The wire format, as much of it as these messages use: a record is a run of fields, each a varint
tag (field number << 3 | wire type) and a value, a varint (type 0), 8 bytes (type 1), a varint
length then that many bytes (type 2) or 4 bytes (type 5). ``Example.features`` (1) is a
``Features``, whose map ``feature`` (1) holds entries of key (1, a UTF-8 string) and value (2, a
``Feature``); a ``Feature`` is one of ``bytes_list`` (1), ``float_list`` (2) or ``int64_list`` (3),
each a repeated field 1: bytes, floats (fixed32, packed in one length-delimited run or one per
field) and int64s (varints, two's complement in 64 bits, packed or not).

Decoding keeps protobuf's merge rules: a message field seen twice merges (lists concatenate), a
map key seen twice keeps its last value, a ``Feature`` whose kind changes keeps the last kind, and
unknown fields are skipped. Anything malformed (a truncated field, a varint over 10 bytes, a
packed float run not a multiple of 4 bytes, a group) raises ``ExampleFormatError`` saying what and
at which byte, never an IndexError or a loop that does not end.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Mapping, Sequence

import numpy as np

__all__ = ["EXAMPLE_INPUTS_KEY", "FEATURE_LISTS", "ExampleFormatError", "Feature", "RecordError", "decode_example",
           "encode_example", "example_inputs"]

# The .flow metadata key of the inputs a ParseExample node reads (batches of records): JSON of each
# input's name -> one well-formed record for it, base64 (what a server warms the model up with).
EXAMPLE_INPUTS_KEY = "example_inputs"
# A parsed tensor's dtype name -> the list of a tf.train.Feature that holds its values.
FEATURE_LISTS = {"float32": "float_list", "int64": "int64_list", "object": "bytes_list"}
_LIST_FIELDS = {1: "bytes_list", 2: "float_list", 3: "int64_list"}
_LIST_NUMBERS = {kind: number for number, kind in _LIST_FIELDS.items()}

VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = range(6)
_MASK64 = (1 << 64) - 1
_MAX_VARINT_BYTES = 10


class RecordError(ValueError):
    """Records that do not parse as a model's features: malformed, or missing or mistyping one (bad
    input, which a server answers with 400 / INVALID_ARGUMENT)."""


class ExampleFormatError(RecordError):
    """A record that is not a well-formed serialized tf.train.Example."""


class Feature:
    """One decoded feature: ``kind`` (``"bytes_list"``, ``"float_list"``, ``"int64_list"``, or None
    for a Feature with no list set) and ``values`` (a list of bytes, or a float32 / int64 array)."""

    __slots__ = ("kind", "_parts")

    def __init__(self) -> None:
        self.kind: str | None = None
        self._parts: list = []

    def start(self, kind: str) -> None:
        """Set ``kind``: a oneof, so setting another member clears the values of the first."""
        if kind != self.kind:
            self.kind, self._parts = kind, []

    def add(self, part) -> None:
        self._parts.append(part)

    @property
    def values(self):
        if self.kind == "bytes_list":
            return [bytes(p) for p in self._parts]
        if self.kind is None:
            return []
        dtype = np.float32 if self.kind == "float_list" else np.int64
        if len(self._parts) == 1 and isinstance(self._parts[0], np.ndarray):  # one packed run: the usual case
            return self._parts[0]
        arrays = [np.atleast_1d(np.asarray(p, dtype)) for p in self._parts]
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype)


# -- decoding -------------------------------------------------------------------------------------
def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(pos, min(end, pos + _MAX_VARINT_BYTES)):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _MASK64, i + 1
        shift += 7
    if end - pos >= _MAX_VARINT_BYTES:
        raise ExampleFormatError(f"a varint at byte {pos} runs over {_MAX_VARINT_BYTES} bytes")
    raise ExampleFormatError(f"a varint at byte {pos} is cut off by the end of its message at byte {end}")


def _fields(data: bytes, pos: int, end: int):
    """``(field number, wire type, value)`` for each field of the message in ``data[pos:end]``: a
    varint's value, a fixed field's bytes, a length-delimited field's ``(start, stop)``."""
    while pos < end:
        at = pos
        tag = data[pos]  # one byte for field numbers below 16: every field of these messages
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(data, pos, end)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise ExampleFormatError(f"field number 0 at byte {at}")
        if wire_type == VARINT:
            value, pos = _varint(data, pos, end)
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            if pos + size > end:
                raise ExampleFormatError(f"a {size}-byte field at byte {at} runs past the end of its message "
                                         f"(byte {end})")
            value, pos = data[pos:pos + size], pos + size
        elif wire_type == LENGTH:
            length = data[pos] if pos < end else 0x80
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(data, pos, end)
            if length > end - pos:
                raise ExampleFormatError(f"a length-delimited field at byte {at} says {length} bytes but its "
                                         f"message has {end - pos} left")
            value, pos = (pos, pos + length), pos + length
        else:
            raise ExampleFormatError(f"unsupported wire type {wire_type} (field {number}) at byte {at}")
        yield number, wire_type, value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed_varints(data: bytes, pos: int, end: int) -> list[int]:
    if pos < end and max(data[pos:end]) < 0x80:  # every value below 128: one byte each
        return list(data[pos:end])
    values = []
    while pos < end:
        value, pos = _varint(data, pos, end)
        values.append(_int64(value))
    return values


def _packed_floats(data: bytes, start: int, stop: int) -> np.ndarray:
    if (stop - start) % 4:
        raise ExampleFormatError(f"packed floats at byte {start} take {stop - start} bytes, not a multiple of 4")
    return np.frombuffer(data, "<f4", (stop - start) // 4, start).astype(np.float32)


def _read_list(data: bytes, kind: str, start: int, stop: int, feature: Feature) -> None:
    """The values of a BytesList / FloatList / Int64List message into ``feature``."""
    feature.start(kind)
    for number, wire_type, value in _fields(data, start, stop):
        if number != 1:
            continue
        if kind == "bytes_list" and wire_type == LENGTH:
            feature.add(data[value[0]:value[1]])
        elif kind == "float_list" and wire_type == LENGTH:
            feature.add(_packed_floats(data, *value))
        elif kind == "float_list" and wire_type == FIXED32:
            feature.add(struct.unpack("<f", value)[0])
        elif kind == "int64_list" and wire_type == LENGTH:
            feature.add(_packed_varints(data, *value))
        elif kind == "int64_list" and wire_type == VARINT:
            feature.add(_int64(value))


def _read_feature(data: bytes, start: int, stop: int, feature: Feature) -> None:
    for number, wire_type, value in _fields(data, start, stop):
        kind = _LIST_FIELDS.get(number)
        if kind is not None and wire_type == LENGTH:
            _read_list(data, kind, *value, feature)


def _read_entry(data: bytes, start: int, stop: int) -> tuple[str, Feature]:
    key, feature = b"", Feature()
    for number, wire_type, value in _fields(data, start, stop):
        if number == 1 and wire_type == LENGTH:
            key = data[value[0]:value[1]]
        elif number == 2 and wire_type == LENGTH:
            _read_feature(data, *value, feature)
    try:
        return key.decode("utf-8"), feature
    except UnicodeDecodeError:
        raise ExampleFormatError(f"a feature key at byte {start} is not valid UTF-8: {key[:40]!r}") from None


def decode_example(record: bytes) -> dict[str, Feature]:
    """A serialized tf.train.Example's features by key (``ExampleFormatError`` if it is not one)."""
    data = bytes(record)
    features: dict[str, Feature] = {}
    for number, wire_type, value in _fields(data, 0, len(data)):
        if number != 1 or wire_type != LENGTH:
            continue
        for entry_number, entry_type, entry in _fields(data, *value):
            if entry_number == 1 and entry_type == LENGTH:
                key, feature = _read_entry(data, *entry)
                features[key] = feature
    return features


# -- encoding -------------------------------------------------------------------------------------
def _encode_varint(value: int) -> bytes:
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | LENGTH) + _encode_varint(len(payload)) + payload


def _encode_list(kind: str, values) -> bytes:
    if kind == "bytes_list":
        return b"".join(_length_delimited(1, v.encode("utf-8") if isinstance(v, str) else bytes(v)) for v in values)
    if not len(values):
        return b""
    if kind == "float_list":
        return _length_delimited(1, np.asarray(values, "<f4").tobytes())
    return _length_delimited(1, b"".join(_encode_varint(int(v)) for v in np.asarray(values, np.int64).tolist()))


def encode_example(features: Mapping[str, tuple[str | None, Sequence]]) -> bytes:
    """A serialized tf.train.Example of ``{key: (kind, values)}``, kind one of ``FEATURE_LISTS``'
    values (None: a Feature with no list set, for no values of no known type); floats and int64s
    packed, as protobuf writes them."""
    entries = []
    for key, (kind, values) in features.items():
        if kind is not None and kind not in _LIST_NUMBERS:
            raise ValueError(f"feature {key!r}: kind {kind!r} is not one of {sorted(_LIST_NUMBERS)}")
        feature = b"" if kind is None else _length_delimited(_LIST_NUMBERS[kind], _encode_list(kind, values))
        entries.append(_length_delimited(1, _length_delimited(1, key.encode("utf-8")) + _length_delimited(2, feature)))
    return _length_delimited(1, b"".join(entries)) if entries else b""


def example_inputs(metadata: Mapping[str, str]) -> dict[str, bytes]:
    """A model's inputs of serialized records (its metadata's ``EXAMPLE_INPUTS_KEY``), each with a
    record that parses; none where the metadata is not what an export writes."""
    try:
        listed = json.loads(metadata.get(EXAMPLE_INPUTS_KEY, "{}"))
        return {str(name): base64.b64decode(record, validate=True) for name, record in listed.items()}
    except (ValueError, TypeError, AttributeError):
        return {}
