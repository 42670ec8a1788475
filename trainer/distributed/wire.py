"""The wire format of the task service: a JSON header and raw tensor bytes, split into chunks.

A message is a stream of byte chunks. The first chunk starts with the header's length (4 bytes,
little endian) and the header (UTF-8 JSON); the tensors the header lists (name, dtype, shape,
nbytes) follow as one run of raw bytes, cut into chunks of at most ``CHUNK_BYTES``. Tensors go
in and out as buffers (no per-element work, nothing pickled), and since every chunk is small, no
gRPC message size limit applies to a tensor: a 1 GB variable is 1024 chunks.

>>> import numpy as np
>>> chunks = list(encode({"op": "demo"}, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}))
>>> header, tensors = decode(iter(chunks))
>>> header["op"], tensors["x"].shape, float(tensors["x"][1, 2])
('demo', (2, 3), 5.0)
"""

from __future__ import annotations

import json
import struct
from typing import Iterable, Iterator, Mapping

import numpy as np

__all__ = ["CHUNK_BYTES", "WireError", "decode", "encode", "encode_one"]

# 1 MB, not 4: with 4 MB chunks, steps moving 100 MB each way took 1.5-2x as long in about half
# the benchmark runs on a loaded 2-core host (figures in the commit that set this); gRPC's cost
# per message stays small next to copying 1 MB.
CHUNK_BYTES = 1 << 20
# gRPC's receive limit must hold one chunk plus its header; headers are small (unary calls carry
# whole small messages, hence the margin).
MAX_MESSAGE_BYTES = CHUNK_BYTES + (4 << 20)
_LEN = struct.Struct("<I")
_ALLOWED_KINDS = frozenset("biufc?SU")


class WireError(ValueError):
    """A malformed message: names what is wrong with it."""


def _host(value) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        value = value.get() if hasattr(value, "get") else np.asarray(value)
    if value.dtype.kind not in _ALLOWED_KINDS:
        raise WireError(f"cannot send an array of dtype {value.dtype} (only numeric, bool and fixed-width strings)")
    return value if value.flags.c_contiguous else value.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def encode(header: Mapping, tensors: Mapping[str, object] | None = None, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Chunks of one message: the header and ``tensors`` (arrays by name) as raw bytes."""
    arrays = {name: _host(v) for name, v in (tensors or {}).items()}
    head = dict(header)
    head["tensors"] = [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape), "nbytes": a.nbytes}
                       for n, a in arrays.items()]
    head_bytes = json.dumps(head, separators=(",", ":")).encode("utf-8")
    pending = bytearray(_LEN.pack(len(head_bytes)) + head_bytes)
    for a in arrays.values():
        view = memoryview(a.reshape(-1).view(np.uint8)) if a.nbytes else memoryview(b"")
        pos = 0
        while pos < len(view):
            if pending is None and len(view) - pos >= chunk_bytes:
                yield bytes(view[pos:pos + chunk_bytes])  # a full chunk: one copy, straight from the array
                pos += chunk_bytes
                continue
            if pending is None:
                pending = bytearray()
            take = view[pos:pos + chunk_bytes - len(pending)]
            pending += take
            pos += len(take)
            if len(pending) >= chunk_bytes:
                yield bytes(pending)
                pending = None
    if pending is not None:
        yield bytes(pending)


def encode_one(header: Mapping, tensors: Mapping[str, object] | None = None) -> bytes:
    """A whole message as one chunk (for unary calls whose tensors are known to be small)."""
    return b"".join(encode(header, tensors, chunk_bytes=1 << 62))


def decode(chunks: Iterable[bytes]) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, tensors) from a message's chunks; every tensor is one freshly allocated array."""
    it = iter(chunks)
    try:
        first = next(it)
    except StopIteration:
        raise WireError("empty message (no header)") from None
    if len(first) < _LEN.size:
        raise WireError(f"message of {len(first)} bytes is shorter than its header length field")
    (n,) = _LEN.unpack_from(first)
    if _LEN.size + n > len(first):
        raise WireError(f"header length {n} runs past the first chunk ({len(first)} bytes)")
    try:
        header = json.loads(bytes(first[_LEN.size:_LEN.size + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireError(f"header is not UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise WireError("header is not a JSON object")
    arrays, targets, names = _allocate(header.get("tensors", []))
    data = memoryview(first)[_LEN.size + n:]
    ti, pos = 0, 0
    while True:
        while len(data):
            while ti < len(targets) and pos == len(targets[ti]):
                ti, pos = ti + 1, 0
            if ti == len(targets):
                raise WireError("message carries more bytes than its header's tensors")
            take = min(len(data), len(targets[ti]) - pos)
            targets[ti][pos:pos + take] = data[:take]
            pos += take
            data = data[take:]
        try:
            data = memoryview(next(it))
        except StopIteration:
            break
    while ti < len(targets) and pos == len(targets[ti]):
        ti, pos = ti + 1, 0
    if ti != len(targets):
        raise WireError(f"message ended inside tensor {names[ti]!r}")
    return header, arrays


def _allocate(specs) -> tuple[dict[str, np.ndarray], list[memoryview], list[str]]:
    arrays: dict[str, np.ndarray] = {}
    targets, names = [], []
    if not isinstance(specs, list):
        raise WireError("header field 'tensors' is not a list")
    for spec in specs:
        try:
            name, dtype, shape, nbytes = spec["name"], np.dtype(spec["dtype"]), tuple(spec["shape"]), spec["nbytes"]
        except (KeyError, TypeError) as e:
            raise WireError(f"tensor description {spec!r} is malformed: {e}") from None
        if dtype.kind not in _ALLOWED_KINDS:
            raise WireError(f"tensor {name!r}: dtype {dtype} is not allowed on the wire")
        if any(not isinstance(d, int) or d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != nbytes:
            raise WireError(f"tensor {name!r}: shape {list(shape)} and dtype {dtype} do not make {nbytes} bytes")
        a = np.empty(shape, dtype)
        arrays[name] = a
        if nbytes:
            targets.append(memoryview(a.reshape(-1).view(np.uint8)))
            names.append(name)
    return arrays, targets, names
