"""TFRecord files as TensorFlow writes and reads them: framing, masked CRC32C, optional compression.

Each record is ``length`` (uint64, little-endian), ``masked_crc32c(length bytes)`` (uint32),
``data``, ``masked_crc32c(data)`` (uint32), so files written here read in TensorFlow and the
reverse. A file may be GZIP- or ZLIB-compressed as a whole (``TFRecordOptions``). Readers check
both checksums and name the file and record offset of any corruption.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from typing import BinaryIO, Iterator

from trainer.errors import DataLossError

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "compression_name", "crc32c", "mask_crc", "masked_crc32c",
           "open_stream", "read_records", "tf_record_iterator"]


_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, the checksum TFRecord frames carry.

    Computed by ``google-crc32c`` (the ``train`` extra): a byte loop in Python is hundreds of times
    slower, too slow to read records as fast as training takes them.
    """
    try:
        import google_crc32c
    except ImportError:
        raise ImportError("TFRecord files need the google-crc32c package for their checksums: "
                          "pip install 'flowstack[train]' (or google-crc32c)") from None
    return google_crc32c.value(bytes(data))


def mask_crc(crc: int) -> int:
    """TensorFlow's masked CRC: rotated right by 15 bits plus a constant (CRCs of CRCs stay useful)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C of ``data`` (see ``mask_crc``)."""
    return mask_crc(crc32c(data))


class TFRecordCompressionType:
    """``tf.python_io.TFRecordCompressionType``: NONE, ZLIB or GZIP."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_COMPRESSION = {None: "", "": "", "NONE": "", "ZLIB": "ZLIB", "GZIP": "GZIP",
                TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
                TFRecordCompressionType.GZIP: "GZIP"}


def compression_name(compression) -> str:
    """``""``, ``"ZLIB"`` or ``"GZIP"`` for any TF1 spelling (a string, a TFRecordCompressionType, options)."""
    if isinstance(compression, TFRecordOptions):
        return compression.compression_type
    try:
        return _COMPRESSION[compression]
    except (KeyError, TypeError):
        raise ValueError(f"TFRecord compression must be '', 'ZLIB' or 'GZIP', got {compression!r}") from None


class TFRecordOptions:
    """``tf.python_io.TFRecordOptions(compression_type)``."""

    def __init__(self, compression_type=None):
        self.compression_type = compression_name(compression_type)

    @staticmethod
    def get_compression_type_string(options) -> str:
        return compression_name(options)


class _ZlibWriter(io.RawIOBase):
    def __init__(self, raw: BinaryIO):
        self.raw, self.z = raw, zlib.compressobj()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.raw.write(self.z.compress(bytes(data)))
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.raw.write(self.z.flush())
            self.raw.close()
        super().close()


class _ZlibReader(io.RawIOBase):
    def __init__(self, raw: BinaryIO):
        self.raw, self.z, self.pending = raw, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self.pending:
            chunk = self.raw.read(1 << 16)
            if not chunk:
                self.pending = self.z.flush()
                break
            self.pending = self.z.decompress(chunk)
        n = min(len(buf), len(self.pending))
        buf[:n], self.pending = self.pending[:n], self.pending[n:]
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_stream(path: str, compression="", mode: str = "r") -> BinaryIO:
    """``path`` opened in binary ``mode`` ("r" or "w") through its compression ('', 'ZLIB' or 'GZIP')."""
    compression = compression_name(compression)
    if compression == "GZIP":
        return gzip.open(path, mode + "b")
    raw = open(path, mode + "b")  # noqa: SIM115 - closed by the caller
    if compression == "ZLIB":
        return _ZlibWriter(raw) if mode == "w" else io.BufferedReader(_ZlibReader(raw))
    return raw


class TFRecordWriter:
    """``tf.python_io.TFRecordWriter(path, options=None)`` (also ``tf.io``): ``write(bytes)``, ``flush``, ``close``."""

    def __init__(self, path: str, options=None):
        self.path = str(path)
        self._f = open_stream(self.path, options, "w")

    def write(self, record) -> None:
        if isinstance(record, str):
            record = record.encode()
        if not isinstance(record, (bytes, bytearray, memoryview)):
            raise TypeError(f"TFRecordWriter.write({self.path!r}): a record is bytes (e.g. "
                            f"example.SerializeToString() or array.tobytes()), got {type(record).__name__}")
        data = bytes(record)
        length = struct.pack("<Q", len(data))
        self._f.write(length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data)))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(path: str, compression="") -> Iterator[bytes]:
    """The records of one TFRecord file, each checked against its two CRCs."""
    with open_stream(str(path), compression) as f:
        offset = 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise DataLossError(f"{path}: truncated record header at byte {offset}")
            (length,), (length_crc,) = struct.unpack("<Q", header[:8]), struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != length_crc:
                raise DataLossError(f"{path}: corrupted record at byte {offset} (length checksum mismatch); "
                                    "is this a TFRecord file, and is its compression_type right?")
            body = f.read(length + 4)
            if len(body) < length + 4:
                raise DataLossError(f"{path}: truncated record at byte {offset} ({length} bytes announced)")
            data = body[:length]
            if masked_crc32c(data) != struct.unpack("<I", body[length:])[0]:
                raise DataLossError(f"{path}: corrupted record at byte {offset} (data checksum mismatch)")
            yield data
            offset += 16 + length


def tf_record_iterator(path: str, options=None) -> Iterator[bytes]:
    """``tf.python_io.tf_record_iterator``: the records of ``path`` as bytes, outside any graph."""
    return read_records(path, options)
