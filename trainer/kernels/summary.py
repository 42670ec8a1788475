"""Summary kernels: values to serialized TensorBoard ``Summary`` protos.

The protobuf wire format is written by hand (a handful of fields), so training needs no
protobuf or tensorboard install; tests read the files back with tensorboard's own loader.
Serialized ``Summary`` messages concatenate into one whose ``value`` list is the union, which
is all MergeSummary does.
"""

from __future__ import annotations

import struct
import zlib

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


# -- images, audio and text, as TensorBoard's image, audio and text plugins read them ---------------
def png(image: np.ndarray) -> bytes:
    """A [height, width, 1|3|4] uint8 image as PNG (zlib only: no imaging library needed)."""
    h, w, c = image.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _to_uint8(images: np.ndarray) -> np.ndarray:
    if images.dtype == np.uint8:
        return images
    x = images.astype(np.float64)
    if x.size and x.min() >= 0.0 and x.max() <= 1.0:
        return np.round(x * 255.0).astype(np.uint8)
    lo, hi = (x.min(), x.max()) if x.size else (0.0, 1.0)
    return np.round((x - lo) / (hi - lo if hi > lo else 1.0) * 255.0).astype(np.uint8)


def _clip_tags(tag: str, kind: str, n: int) -> list[str]:
    return [f"{tag}/{kind}"] if n == 1 else [f"{tag}/{kind}/{i}" for i in range(n)]


def image_summary(tag: str, images, max_images: int = 3) -> bytes:
    batch = np.asarray(images)
    if batch.ndim != 4 or batch.shape[-1] not in (1, 3, 4):
        raise ValueError(f"image summary {tag!r}: images must be [batch, height, width, 1|3|4], got {batch.shape}")
    batch = _to_uint8(batch[:max_images])
    out = b""
    for t, img in zip(_clip_tags(tag, "image", len(batch)), batch):
        msg = (field_varint(1, img.shape[0]) + field_varint(2, img.shape[1]) + field_varint(3, img.shape[2])
               + field_bytes(4, png(img)))
        out += field_bytes(1, field_bytes(1, t.encode()) + field_bytes(4, msg))
    return out


def wav(clip: np.ndarray, sample_rate: int) -> bytes:
    """A [frames, channels] clip in [-1, 1] as 16-bit PCM WAV."""
    pcm = (np.clip(clip, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    channels = clip.shape[1]
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, channels,
                         sample_rate, sample_rate * channels * 2, channels * 2, 16, b"data", len(pcm))
    return header + pcm


def audio_summary(tag: str, clips, sample_rate: float, max_outputs: int = 3) -> bytes:
    batch = np.asarray(clips, dtype=np.float64)
    if batch.ndim == 2:
        batch = batch[:, :, None]
    if batch.ndim != 3:
        raise ValueError(f"audio summary {tag!r}: clips must be [batch, frames(, channels)], got {batch.shape}")
    batch = batch[:max_outputs]
    out = b""
    for t, clip in zip(_clip_tags(tag, "audio", len(batch)), batch):
        msg = (field_float(1, float(sample_rate)) + field_varint(2, clip.shape[1]) + field_varint(3, clip.shape[0])
               + field_bytes(4, wav(clip, int(sample_rate))) + field_bytes(5, b"audio/wav"))
        out += field_bytes(1, field_bytes(1, t.encode()) + field_bytes(6, msg))
    return out


def text_summary(tag: str, text) -> bytes:
    values = np.asarray(text, dtype=object)
    strings = [v if isinstance(v, bytes) else str(v).encode() for v in values.reshape(-1)]
    shape = b"".join(field_bytes(2, field_varint(1, d)) for d in values.shape)
    tensor = field_varint(1, 7) + field_bytes(2, shape) + b"".join(field_bytes(8, s) for s in strings)
    metadata = field_bytes(1, field_bytes(1, b"text"))
    return field_bytes(1, field_bytes(1, tag.encode()) + field_bytes(9, metadata) + field_bytes(8, tensor))


def _host(values):
    return values.get() if hasattr(values, "get") else values


@kernel("ImageSummary", domain=D)
def image_summary_kernel(tensor, *, xp, tag, max_images):
    return _obj(image_summary(tag, _host(tensor), max_images))


@kernel("AudioSummary", domain=D)
def audio_summary_kernel(tensor, sample_rate, *, xp, tag, max_outputs):
    return _obj(audio_summary(tag, _host(tensor), float(sample_rate), max_outputs))


@kernel("TextSummary", domain=D)
def text_summary_kernel(tensor, *, xp, tag):
    return _obj(text_summary(tag, tensor))


# -- the graph, as a GraphDef for TensorBoard's Graphs tab -------------------------------------------
def graph_def(nodes) -> bytes:
    """A GraphDef (name, op, inputs, device per node) of trainer ``Node``s."""
    out = b""
    for node in nodes:
        msg = field_bytes(1, node.name.encode()) + field_bytes(2, node.op_type.encode())
        for t in node.inputs:
            if t is not None:
                ref = t.node.name if t.index == 0 else f"{t.node.name}:{t.index}"
                msg += field_bytes(3, ref.encode())
        for c in node.control_inputs:
            msg += field_bytes(3, ("^" + c.name).encode())
        if node.device:
            msg += field_bytes(4, node.device.encode())
        out += field_bytes(1, msg)
    return out + field_bytes(4, field_varint(1, 27))  # versions { producer: 27 }, as TF 1.15 writes
