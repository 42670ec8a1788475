"""The edge runtime's tf.train.Example wire codec (edge_runtime/example_records.py) against the
protobuf package's own encoding and decoding (trainer/example_proto.py's messages)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edge_runtime.example_records import ExampleFormatError, decode_example, encode_example
from trainer.example_proto import BytesList, Example, Feature, Features, FloatList, Int64List

INT64_EDGES = [0, 1, -1, 127, 128, 300, 2**31 - 1, -2**31, 2**32, 2**62 + 12345, 2**63 - 1, -2**63]


def proto_example(**features) -> Example:
    """An Example of keyword -> list of values (bytes/str: bytes_list, float: float_list, int: int64_list)."""
    out = {}
    for key, values in features.items():
        if values and isinstance(values[0], (bytes, str)):
            out[key] = Feature(bytes_list=BytesList(value=[v.encode() if isinstance(v, str) else v for v in values]))
        elif values and isinstance(values[0], float):
            out[key] = Feature(float_list=FloatList(value=values))
        else:
            out[key] = Feature(int64_list=Int64List(value=values))
    return Example(features=Features(feature=out))


def as_protobuf_reads(record: bytes) -> dict:
    """What the protobuf package reads from ``record``: key -> (kind or None, list of values)."""
    parsed = Example.FromString(record).features.feature
    out = {}
    for key in parsed:
        kind = parsed[key].WhichOneof("kind")
        out[key] = (kind, list(getattr(parsed[key], kind).value) if kind else [])
    return out


def as_we_read(record: bytes) -> dict:
    return {key: (f.kind, list(f.values) if f.kind == "bytes_list" else np.asarray(f.values).tolist())
            for key, f in decode_example(record).items()}


def same_reading(record: bytes) -> dict:
    theirs, ours = as_protobuf_reads(record), as_we_read(record)
    assert ours.keys() == theirs.keys()
    for key, (kind, values) in theirs.items():
        assert ours[key][0] == kind, key
        if kind == "float_list":
            np.testing.assert_array_equal(np.float32(ours[key][1]), np.float32(values))
        else:
            assert ours[key][1] == values, key
    return ours


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def record_of(key: bytes, feature: bytes) -> bytes:
    """An Example with one map entry, its Feature message given as raw bytes."""
    return field(1, field(1, field(1, key) + field(2, feature)))


@pytest.mark.parametrize("features", [
    {"ints": INT64_EDGES},
    {"floats": [0.0, -1.5, 3.25e38, 1e-40, float("inf"), -0.0]},
    {"text": [b"", b"plain", "caf\u00e9 \u65e5\u672c".encode(), bytes(range(256))]},
    {"empty_ints": [], "one": [7], "name": ["x"]},
    {"k\u00e9y \u2713": [1.0], "": [2]},
], ids=["int64 edges", "floats", "bytes", "empty list", "unicode keys"])
def test_protobuf_encoded_examples_read_the_same(features):
    record = proto_example(**features).SerializeToString()
    ours = same_reading(record)
    assert ours.keys() == features.keys()


def test_an_empty_feature_list_keeps_its_kind_and_a_feature_with_none_has_no_kind():
    record = Example(features=Features(feature={
        "no_floats": Feature(float_list=FloatList()), "no_bytes": Feature(bytes_list=BytesList()), "unset": Feature(),
    })).SerializeToString()
    ours = same_reading(record)
    assert ours == {"no_floats": ("float_list", []), "no_bytes": ("bytes_list", []), "unset": (None, [])}


def test_unpacked_repeated_scalars_read_as_protobuf_reads_them():
    unpacked_ints = b"".join(varint(1 << 3 | 0) + varint(v) for v in INT64_EDGES)
    unpacked_floats = b"".join(varint(1 << 3 | 5) + struct.pack("<f", v) for v in (1.5, -2.0))
    mixed_ints = field(1, b"".join(varint(v) for v in (5, -6))) + varint(1 << 3) + varint(7)
    for kind_number, payload, expected in ((3, unpacked_ints, INT64_EDGES), (2, unpacked_floats, [1.5, -2.0]),
                                           (3, mixed_ints, [5, -6, 7])):
        ours = same_reading(record_of(b"f", field(kind_number, payload)))
        assert ours["f"][1] == expected


def test_protobuf_merge_rules_hold():
    twice_in_one_feature = field(3, field(1, varint(1))) + field(3, field(1, varint(2)))
    kind_switched = field(3, field(1, varint(1))) + field(2, field(1, struct.pack("<f", 4.0)))
    key_repeated = field(1, field(1, field(1, b"k") + field(2, field(3, field(1, varint(1))))) +
                         field(1, field(1, b"k") + field(2, field(3, field(1, varint(9))))))
    entry = field(1, b"k") + field(2, field(3, field(1, varint(3))))
    unknown_fields = varint(9 << 3) + varint(5) + field(1, field(1, entry) + varint(15 << 3 | 1) + b"12345678")
    assert same_reading(record_of(b"k", twice_in_one_feature))["k"] == ("int64_list", [1, 2])
    assert same_reading(record_of(b"k", kind_switched))["k"] == ("float_list", [4.0])
    assert same_reading(key_repeated)["k"] == ("int64_list", [9])
    assert same_reading(unknown_fields)["k"] == ("int64_list", [3])


def test_the_encoder_writes_what_protobuf_reads_and_writes():
    features = {"ints": ("int64_list", INT64_EDGES), "floats": ("float_list", [0.5, -3.0]),
                "words": ("bytes_list", ["\u00fcber", b"\x00\xff"]), "none": ("int64_list", [])}
    record = encode_example(features)
    parsed = Example.FromString(record).features.feature
    assert list(parsed["ints"].int64_list.value) == INT64_EDGES
    assert list(parsed["floats"].float_list.value) == [0.5, -3.0]
    assert list(parsed["words"].bytes_list.value) == ["\u00fcber".encode(), b"\x00\xff"]
    assert parsed["none"].WhichOneof("kind") == "int64_list" and not parsed["none"].int64_list.value
    assert as_protobuf_reads(encode_example({"e": (None, [])})) == {"e": (None, [])}  # a Feature with no list
    one = encode_example({"x": ("float_list", [1.0, 2.0])})
    assert one == proto_example(x=[1.0, 2.0]).SerializeToString()  # one key: protobuf's bytes exactly
    with pytest.raises(ValueError, match="kind 'string_list'"):
        encode_example({"x": ("string_list", ["a"])})


def test_every_truncation_is_refused_or_read_as_protobuf_reads_it():
    record = proto_example(ints=INT64_EDGES, floats=[1.0, 2.0], text=["abc", "\u00e9"]).SerializeToString()
    for cut in range(len(record)):
        try:
            Example.FromString(record[:cut])
        except Exception:
            with pytest.raises(ExampleFormatError):
                decode_example(record[:cut])
        else:
            same_reading(record[:cut])


@pytest.mark.parametrize("record,message", [
    (b"\x0a\x05\x0a\x03", "says 5 bytes but its message has 2 left"),
    (b"\x08" + b"\xff" * 11, "runs over 10 bytes"),
    (b"\x08\xff\xff", "cut off by the end of its message"),
    (record_of(b"f", field(2, field(1, b"\x00\x00\x80"))), "not a multiple of 4"),
    (b"\x0b\x0c", "unsupported wire type 3"),
    (b"\x00\x01", "field number 0"),
    (record_of(b"\xff\xfe", field(3, b"")), "not valid UTF-8"),
    (b"\x0d\x00\x00", "4-byte field at byte 0 runs past the end"),
], ids=["long length", "long varint", "cut varint", "ragged floats", "group", "field 0", "bad key", "cut fixed32"])
def test_malformed_records_get_a_clear_error(record, message):
    with pytest.raises(ExampleFormatError, match=message):
        decode_example(record)


def test_random_bytes_never_escape_as_another_error():
    rng = np.random.default_rng(0)
    good = proto_example(ints=[1, -2], floats=[0.5], text=["a"]).SerializeToString()
    for _ in range(400):
        noisy = bytearray(good)
        for position in rng.integers(0, len(noisy), size=rng.integers(1, 4)):
            noisy[position] = int(rng.integers(0, 256))
        try:
            decode_example(bytes(noisy))
        except ExampleFormatError:
            pass
    for size in (1, 2, 7, 40):
        for _ in range(50):
            try:
                decode_example(rng.integers(0, 256, size=size, dtype=np.uint8).tobytes())
            except ExampleFormatError:
                pass
