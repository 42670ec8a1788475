"""Summary kernels: values to serialized TensorBoard ``Summary`` protos.

The protobuf wire format is written by hand (a handful of fields), so training needs no
protobuf or tensorboard install; tests read the files back with tensorboard's own loader.
Serialized ``Summary`` messages concatenate into one whose ``value`` list is the union, which
is all MergeSummary does.
"""

from __future__ import annotations

import struct

import numpy as np

from edge_runtime.kernels import kernel

D = "flowstack"


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_double(num: int, v: float) -> bytes:
    return varint(num << 3 | 1) + struct.pack("<d", v)


def field_float(num: int, v: float) -> bytes:
    return varint(num << 3 | 5) + struct.pack("<f", v)


def field_varint(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def scalar_summary(tag: str, value: float) -> bytes:
    return field_bytes(1, field_bytes(1, tag.encode()) + field_float(2, float(value)))


def _histogram(values: np.ndarray, bins: int = 30) -> bytes:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        v = np.zeros(1)
    counts, edges = np.histogram(v, bins=bins)
    limits = edges[1:]
    msg = (field_double(1, v.min()) + field_double(2, v.max()) + field_double(3, float(v.size))
           + field_double(4, float(v.sum())) + field_double(5, float((v * v).sum()))
           + field_bytes(6, struct.pack(f"<{len(limits)}d", *limits))
           + field_bytes(7, struct.pack(f"<{len(counts)}d", *counts.astype(np.float64))))
    return msg


def histogram_summary(tag: str, values) -> bytes:
    return field_bytes(1, field_bytes(1, tag.encode()) + field_bytes(5, _histogram(values)))


def _obj(b: bytes):
    out = np.empty((), dtype=object)
    out[()] = b
    return out


@kernel("ScalarSummary", domain=D)
def scalar_summary_kernel(value, *, xp, tag):
    return _obj(scalar_summary(tag, float(value)))


@kernel("HistogramSummary", domain=D)
def histogram_summary_kernel(values, *, xp, tag):
    host = values.get() if hasattr(values, "get") else values
    return _obj(histogram_summary(tag, host))


@kernel("MergeSummary", domain=D)
def merge_summary(*inputs, xp):
    return _obj(b"".join(bytes(np.asarray(i, dtype=object)[()]) for i in inputs))
