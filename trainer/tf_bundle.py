"""Checkpoints TensorFlow wrote: its V2 tensor bundles (``prefix.index`` + ``prefix.data-NNNNN-of-MMMMM``).

A TF 1.x user's checkpoints are bundles, so ``Saver.restore``, ``tf.train.latest_checkpoint``,
``list_variables`` and ``init_from_checkpoint`` read them as they read flowstack's own files.

The index is a LevelDB-format table (TensorFlow's ``core/lib/io/table``): data blocks of
prefix-compressed keys, each followed by a compression byte and a masked CRC32C; an index block
pointing at them; a 48-byte footer ending in the table magic. Its key ``""`` holds the
``BundleHeaderProto``, every other key a tensor's ``BundleEntryProto``: dtype, shape, shard, offset,
size and the masked CRC32C of the tensor's bytes in its data file. Strings are stored as every
element's varint64 length, a masked CRC32C of those lengths, then the bytes. Every block and
tensor is checked; damage raises ``CheckpointError`` naming the file and what is wrong.
"""

from __future__ import annotations

import os
import struct

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.message import DecodeError

from trainer.checkpoint_format import TF_INDEX_SUFFIX, CheckpointError
from trainer.data.tfrecord import crc32c, mask_crc, masked_crc32c
from trainer.tensor_proto import DATA_TYPES

__all__ = ["data_file", "read_bundle", "tf_checkpoint_state"]

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_BYTES = 48
_BLOCK_TRAILER_BYTES = 5
_DTYPES = {number: np.dtype(name) for name, number in DATA_TYPES.items()}
_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow/core/protobuf/tensor_bundle.proto's messages, with their field numbers."""
    fd = descriptor_pb2.FileDescriptorProto(name="flowstack/tensor_bundle.proto", package="tensorflow",
                                            syntax="proto3")

    def message(name: str, *fields: tuple, parent=None):
        m = (parent.nested_type if parent is not None else fd.message_type).add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            f = m.field.add(name=field_name, number=number, type=kind,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = f".tensorflow.{type_name}"
        return m

    shape = message("TensorShapeProto", ("dim", 2, _F.TYPE_MESSAGE, "TensorShapeProto.Dim", True),
                    ("unknown_rank", 3, _F.TYPE_BOOL, "", False))
    message("Dim", ("size", 1, _F.TYPE_INT64, "", False), ("name", 2, _F.TYPE_STRING, "", False), parent=shape)
    message("VersionDef", ("producer", 1, _F.TYPE_INT32, "", False), ("min_consumer", 2, _F.TYPE_INT32, "", False),
            ("bad_consumers", 3, _F.TYPE_INT32, "", True))
    # enums (Endianness, DataType) travel as the int32 they are on the wire
    message("BundleHeaderProto", ("num_shards", 1, _F.TYPE_INT32, "", False), ("endianness", 2, _F.TYPE_INT32, "", False),
            ("version", 3, _F.TYPE_MESSAGE, "VersionDef", False))
    extent = message("TensorSliceProto", ("extent", 1, _F.TYPE_MESSAGE, "TensorSliceProto.Extent", True))
    message("Extent", ("start", 1, _F.TYPE_INT64, "", False), ("length", 2, _F.TYPE_INT64, "", False), parent=extent)
    extent.nested_type[0].oneof_decl.add(name="has_length")
    extent.nested_type[0].field[1].oneof_index = 0
    message("BundleEntryProto", ("dtype", 1, _F.TYPE_INT32, "", False), ("shape", 2, _F.TYPE_MESSAGE, "TensorShapeProto", False),
            ("shard_id", 3, _F.TYPE_INT32, "", False), ("offset", 4, _F.TYPE_INT64, "", False),
            ("size", 5, _F.TYPE_INT64, "", False), ("crc32c", 6, _F.TYPE_FIXED32, "", False),
            ("slices", 7, _F.TYPE_MESSAGE, "TensorSliceProto", True))
    message("CheckpointState", ("model_checkpoint_path", 1, _F.TYPE_STRING, "", False),
            ("all_model_checkpoint_paths", 2, _F.TYPE_STRING, "", True),
            ("all_model_checkpoint_timestamps", 3, _F.TYPE_DOUBLE, "", True),
            ("last_preserved_timestamp", 4, _F.TYPE_DOUBLE, "", False))
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
_HEADER = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.BundleHeaderProto"))
_ENTRY = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.BundleEntryProto"))
_STATE = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.CheckpointState"))


def tf_checkpoint_state(text: str) -> dict:
    """The ``checkpoint`` file TensorFlow's Saver writes (a text-format ``CheckpointState``) as
    ``{"model_checkpoint_path": ..., "all_model_checkpoint_paths": [...]}``; ValueError if it is not one."""
    try:
        state = text_format.Parse(text, _STATE())
    except text_format.ParseError as e:
        raise ValueError(f"not a TensorFlow CheckpointState: {e}") from None
    if not state.model_checkpoint_path and not state.all_model_checkpoint_paths:
        raise ValueError("not a TensorFlow CheckpointState: it names no checkpoint")
    return {"model_checkpoint_path": state.model_checkpoint_path or None,
            "all_model_checkpoint_paths": list(state.all_model_checkpoint_paths)}


def data_file(prefix: str, shard: int, shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{shards:05d}"


def _varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf) and shift < 64:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    raise CheckpointError(f"{where}: a varint runs past the end of its block (the file is damaged)")


def _block(table: bytes, handle: bytes, path: str, what: str) -> bytes:
    offset, pos = _varint(handle, 0, path)
    size, _ = _varint(handle, pos, path)
    end = offset + size
    if end + _BLOCK_TRAILER_BYTES > len(table):
        raise CheckpointError(f"checkpoint index {path!r}: the {what} block at byte {offset} runs past the end of "
                              "the file (truncated)")
    contents, kind = table[offset:end], table[end]
    (stored,) = struct.unpack_from("<I", table, end + 1)
    if masked_crc32c(table[offset:end + 1]) != stored:
        raise CheckpointError(f"checkpoint index {path!r}: the {what} block at byte {offset} fails its checksum "
                              "(the file is damaged)")
    if kind != 0:
        raise CheckpointError(f"checkpoint index {path!r}: the {what} block is compressed (type {kind}); "
                              "TensorFlow writes bundles uncompressed, and only those are read")
    return contents


def _entries(block: bytes, path: str):
    """The (key, value) pairs of one table block, in order."""
    if len(block) < 4:
        raise CheckpointError(f"checkpoint index {path!r}: a block of {len(block)} bytes is too short")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise CheckpointError(f"checkpoint index {path!r}: a block lists {restarts} restart points it cannot hold")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos, path)
        unshared, pos = _varint(block, pos, path)
        length, pos = _varint(block, pos, path)
        if shared > len(key) or pos + unshared + length > limit:
            raise CheckpointError(f"checkpoint index {path!r}: a key or value runs past its block (the file is damaged)")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + length]
        pos += length


def _index(path: str) -> dict[bytes, bytes]:
    try:
        with open(path, "rb") as f:
            table = f.read()
    except OSError as e:
        raise CheckpointError(f"checkpoint index {path!r} is unreadable: {e}") from None
    if len(table) < _FOOTER_BYTES:
        raise CheckpointError(f"checkpoint index {path!r} is {len(table)} bytes, shorter than a table's footer "
                              "(truncated)")
    footer = table[-_FOOTER_BYTES:]
    if struct.unpack_from("<Q", footer, 40)[0] != _TABLE_MAGIC:
        raise CheckpointError(f"checkpoint index {path!r} is not a TensorFlow checkpoint index (no table magic at "
                              "its end: truncated, or another file)")
    _, pos = _varint(footer, 0, path)  # the metaindex block's handle, which a bundle leaves empty
    _, pos = _varint(footer, pos, path)
    index_handle = footer[pos:40]
    values: dict[bytes, bytes] = {}
    for _, handle in _entries(_block(table, index_handle, path, "index"), path):
        values.update(_entries(_block(table, handle, path, "data"), path))
    return values


def _parse(message_type, data: bytes, path: str, what: str):
    try:
        return message_type.FromString(data)
    except DecodeError as e:
        raise CheckpointError(f"checkpoint index {path!r}: the {what} does not parse ({e})") from None


def _strings(raw: bytes, count: int, where: str) -> tuple[np.ndarray, int]:
    """A string tensor's elements, and the CRC32C TensorFlow keeps for it: one over each length as a
    uint32, the stored (masked) CRC of those lengths, and the bytes (not over the varints stored)."""
    lengths, pos = [], 0
    for _ in range(count):
        length, pos = _varint(raw, pos, where)
        lengths.append(length)
    as_uint32 = struct.pack(f"<{count}I", *lengths) if all(n < 1 << 32 for n in lengths) else None
    if as_uint32 is None:
        raise CheckpointError(f"{where}: a string of 4 GiB or more is not read")
    if pos + 4 > len(raw) or struct.unpack_from("<I", raw, pos)[0] != masked_crc32c(as_uint32):
        raise CheckpointError(f"{where}: the string lengths fail their checksum (the data file is damaged)")
    crc = crc32c(as_uint32 + raw[pos:])
    pos += 4
    values = np.empty(count, dtype=object)
    for i, length in enumerate(lengths):
        values[i] = raw[pos:pos + length]
        pos += length
    if pos != len(raw):
        raise CheckpointError(f"{where}: the strings take {pos} bytes of the {len(raw)} stored")
    return values, crc


def _ordered_number(value: int) -> bytes:
    """TensorFlow's OrderedCode encoding of a signed integer (``WriteSignedNumIncreasing``): a unary
    byte count in the leading bits, then the value big-endian; a negative value is the complement of
    its complement's encoding. Values below 2**48 take at most 7 bytes, all a tensor's extents need."""
    if value < 0:
        return bytes(~b & 0xFF for b in _ordered_number(~value))
    size = next(n for n in range(1, 8) if value < 1 << (7 * n - 1))
    encoded = bytearray(value.to_bytes(size, "big"))
    encoded[0] |= (0xFF00 >> size) & 0xFF
    return bytes(encoded)


def _slice_key(name: bytes, extents: list[tuple[int, int]]) -> bytes:
    """The index key TensorFlow stores one slice of a partitioned tensor under (EncodeTensorNameSlice)."""
    escaped = name.replace(b"\xff", b"\xff\x00").replace(b"\x00", b"\x00\xff")
    key = b"\x00" + escaped + b"\x00\x01" + bytes([1, len(extents)])
    return key + b"".join(_ordered_number(start) + _ordered_number(length) for start, length in extents)


class _Bundle:
    """One bundle's index and data shards, read on demand."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.path = os.fspath(prefix) + TF_INDEX_SUFFIX
        self.index = _index(self.path)
        if b"" not in self.index:
            raise CheckpointError(f"checkpoint index {self.path!r} has no bundle header (not a tensor bundle)")
        self.header = _parse(_HEADER, self.index.pop(b""), self.path, "bundle header")
        if self.header.endianness != 0:
            raise CheckpointError(f"checkpoint {prefix!r} was written big-endian; only little-endian bundles are read")
        self.shards: dict[int, bytes] = {}

    def entry(self, key: bytes, name: str):
        return _parse(_ENTRY, self.index[key], self.path, f"entry of {name!r}")

    def _shard(self, entry, name: str) -> bytes:
        if entry.shard_id not in self.shards:
            if not 0 <= entry.shard_id < self.header.num_shards:
                raise CheckpointError(f"checkpoint {self.prefix!r}: {name!r} names shard {entry.shard_id} of "
                                      f"{self.header.num_shards}")
            file = data_file(self.prefix, entry.shard_id, self.header.num_shards)
            try:
                with open(file, "rb") as f:
                    self.shards[entry.shard_id] = f.read()
            except OSError as e:
                raise CheckpointError(f"checkpoint {self.prefix!r}: its data file is unreadable: {e}") from None
        return self.shards[entry.shard_id]

    def dtype(self, entry, name: str) -> np.dtype:
        dtype = _DTYPES.get(entry.dtype)
        if dtype is None:
            raise CheckpointError(f"checkpoint {self.prefix!r}: {name!r} has DataType {entry.dtype}, which is not "
                                  f"read (read: {sorted(DATA_TYPES)})")
        return dtype

    def tensor(self, entry, name: str) -> np.ndarray:
        """The array one (unsliced) entry stores, its bytes checked."""
        dtype = self.dtype(entry, name)
        shard = self._shard(entry, name)
        where = f"checkpoint {self.prefix!r}, tensor {name!r}"
        if entry.offset + entry.size > len(shard):
            raise CheckpointError(f"{where}: bytes {entry.offset}-{entry.offset + entry.size} lie past the end of "
                                  f"its data file ({len(shard)} bytes: truncated)")
        raw = shard[entry.offset:entry.offset + entry.size]
        shape = tuple(d.size for d in entry.shape.dim)
        count = int(np.prod(shape, dtype=np.int64))
        if dtype == object:
            array, crc = _strings(raw, count, where)
        else:
            if len(raw) != count * dtype.itemsize:
                raise CheckpointError(f"{where}: shape {list(shape)} of {dtype.name} needs {count * dtype.itemsize} "
                                      f"bytes, the entry has {len(raw)}")
            array, crc = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype), crc32c(raw)
        if mask_crc(crc) != entry.crc32c:
            raise CheckpointError(f"{where}: its bytes fail their checksum (the data file is damaged)")
        return array.reshape(shape)

    def sliced(self, key: bytes, entry, name: str) -> np.ndarray:
        """A partitioned tensor, put together from the slices its entry lists."""
        shape = tuple(d.size for d in entry.shape.dim)
        whole = np.empty(shape, dtype=self.dtype(entry, name))
        covered = np.zeros(shape, dtype=bool)
        for piece in entry.slices:
            extents = [(e.start, e.length if e.HasField("length") else size - e.start)
                       for e, size in zip(piece.extent, shape)]
            extents += [(0, size) for size in shape[len(extents):]]
            slice_key = _slice_key(key, extents)
            if slice_key not in self.index:
                raise CheckpointError(f"checkpoint {self.prefix!r}: {name!r} lists slice {extents} (start, length "
                                      "per axis), which the index lacks")
            region = tuple(slice(start, start + length) for start, length in extents)
            label = f"{name} slice {extents}"
            whole[region] = self.tensor(self.entry(slice_key, label), label)
            covered[region] = True
        if not covered.all():
            raise CheckpointError(f"checkpoint {self.prefix!r}: the slices of {name!r} leave part of its shape "
                                  f"{list(shape)} unwritten")
        return whole


def read_bundle(prefix: str) -> dict[str, np.ndarray]:
    """{tensor name: array} of the TensorFlow checkpoint ``prefix``, every byte checked; a partitioned
    variable is read whole, under its own name, from its slices."""
    bundle = _Bundle(prefix)
    values = {}
    for key in bundle.index:
        if key.startswith(b"\x00"):
            continue  # one slice of a partitioned tensor, read with that tensor
        name = key.decode("utf-8", "replace")
        entry = bundle.entry(key, name)
        values[name] = bundle.sliced(key, entry, name) if entry.slices else bundle.tensor(entry, name)
    return values
