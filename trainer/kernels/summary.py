"""Summary kernels: values to serialized TensorBoard ``Summary`` protos.

The messages are TensorBoard's own (``tensorboard.compat.proto``), imported when a summary is
first made, so training without summaries needs no tensorboard install. Serialized ``Summary``
messages concatenate into one whose ``value`` list is the union, which is all MergeSummary does.
"""

from __future__ import annotations

import importlib
import struct
import zlib

import numpy as np

from edge_runtime.kernels import kernel

D = "flowstack"


def tensorboard_proto(name: str):
    """``tensorboard.compat.proto.<name>``, or an ImportError saying which extra installs it."""
    try:
        return importlib.import_module(f"tensorboard.compat.proto.{name}")
    except ImportError as exc:
        raise ImportError(f"TensorBoard summaries need the tensorboard package: pip install 'flowstack[train]' ({exc})") from exc


def summary_value(tag: str, **field) -> bytes:
    """A ``Summary`` holding one value named ``tag`` with ``field`` (simple_value=, histo=...)."""
    summary_pb2 = tensorboard_proto("summary_pb2")
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, **field)]).SerializeToString()


def scalar_summary(tag: str, value: float) -> bytes:
    return summary_value(tag, simple_value=float(value))


def histogram_summary(tag: str, values, bins: int = 30) -> bytes:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        v = np.zeros(1)
    counts, edges = np.histogram(v, bins=bins)
    histo = tensorboard_proto("summary_pb2").HistogramProto(
        min=v.min(), max=v.max(), num=float(v.size), sum=float(v.sum()), sum_squares=float((v * v).sum()),
        bucket_limit=edges[1:].tolist(), bucket=counts.astype(np.float64).tolist())
    return summary_value(tag, histo=histo)


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
    Image = tensorboard_proto("summary_pb2").Summary.Image
    return b"".join(summary_value(t, image=Image(height=img.shape[0], width=img.shape[1], colorspace=img.shape[2],
                                                     encoded_image_string=png(img)))
                    for t, img in zip(_clip_tags(tag, "image", len(batch)), batch))


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
    Audio = tensorboard_proto("summary_pb2").Summary.Audio
    return b"".join(summary_value(t, audio=Audio(sample_rate=float(sample_rate), num_channels=clip.shape[1],
                                                     length_frames=clip.shape[0],
                                                     encoded_audio_string=wav(clip, int(sample_rate)),
                                                     content_type="audio/wav"))
                    for t, clip in zip(_clip_tags(tag, "audio", len(batch)), batch))


def text_summary(tag: str, text) -> bytes:
    values = np.asarray(text, dtype=object)
    strings = [v if isinstance(v, bytes) else str(v).encode() for v in values.reshape(-1)]
    summary_pb2, shape_pb2 = tensorboard_proto("summary_pb2"), tensorboard_proto("tensor_shape_pb2")
    shape = shape_pb2.TensorShapeProto(dim=[shape_pb2.TensorShapeProto.Dim(size=d) for d in values.shape])
    tensor = tensorboard_proto("tensor_pb2").TensorProto(dtype=tensorboard_proto("types_pb2").DT_STRING,
                                                         tensor_shape=shape, string_val=strings)
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    return summary_value(tag, metadata=metadata, tensor=tensor)


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
    graph_pb2, node_def_pb2 = tensorboard_proto("graph_pb2"), tensorboard_proto("node_def_pb2")
    graph = graph_pb2.GraphDef(versions=tensorboard_proto("versions_pb2").VersionDef(producer=27))  # as TF 1.15 writes
    for node in nodes:
        inputs = [t.node.name if t.index == 0 else f"{t.node.name}:{t.index}" for t in node.inputs if t is not None]
        inputs += ["^" + c.name for c in node.control_inputs]
        graph.node.append(node_def_pb2.NodeDef(name=node.name, op=node.op_type, input=inputs, device=node.device or ""))
    return graph.SerializeToString()
