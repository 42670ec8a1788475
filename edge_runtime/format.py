"""Reading and validating .flow files.

The FlatBuffer is parsed once into plain dataclasses, checking every index, offset and length
against the file before anything is used: a bad file gives a ``ModelFormatError`` naming what is
wrong and where, never an IndexError, a hang or a huge allocation. Weights are not copied: each
buffer becomes a read-only NumPy view of the (memory-mapped) file.
"""

from __future__ import annotations

import itertools
import math
import mmap
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schemas import dtypes, packing
from schemas.fb.AttrType import AttrType
from schemas.fb.BufferChecksum import BufferChecksum
from schemas.fb.Model import Model as FbModel

FILE_IDENTIFIER = b"FLOW"
FORMAT_VERSION = 1
BUFFER_ALIGNMENT = 64


class ModelFormatError(ValueError):
    """A .flow file that cannot be read: names the file, the part that is wrong, and how."""


@dataclass(frozen=True)
class Quantization:
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


@dataclass
class TensorDef:
    name: str
    dtype: int
    shape: tuple[int, ...] | None  # None: rank unknown; -1 marks an unknown dim
    data: Any = None  # constant value (read-only ndarray view), or None
    quantization: Quantization | None = None


@dataclass
class OperatorDef:
    domain: str
    op_type: str
    version: int
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any]  # graph attributes hold a GraphRef
    name: str
    implicit_inputs: list[int]


@dataclass(frozen=True)
class GraphRef:
    """A graph attribute: the index of a subgraph in the model."""

    index: int


@dataclass
class SubGraphDef:
    name: str
    tensors: list[TensorDef]
    inputs: list[int]
    outputs: list[int]
    operators: list[OperatorDef]


@dataclass
class SignatureDef:
    key: str
    inputs: dict[str, int]
    outputs: dict[str, int]
    subgraph: int = 0


@dataclass
class ModelDef:
    format_version: int
    producer: str
    opset_imports: dict[str, int]
    subgraphs: list[SubGraphDef]
    signatures: dict[str, SignatureDef]
    metadata: dict[str, str] = field(default_factory=dict)
    size: int = 0
    # (offset, length, CRC-32) of every buffer, where the file records checksums (else empty).
    buffer_checksums: tuple[tuple[int, int, int], ...] = ()


def buffer_crc32(data: bytes | memoryview | np.ndarray) -> int:
    """The checksum a .flow file records for a buffer's bytes (zlib's CRC-32)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def verify_checksums(data: bytes | bytearray | memoryview | mmap.mmap, model: ModelDef, source: str = "<bytes>") -> bool:
    """Check every buffer of ``data`` (the file ``model`` was parsed from) against its recorded
    CRC-32; a mismatch (flipped or rewritten weight bytes) is a ``ModelFormatError`` naming the
    buffer. Returns False for a file written before checksums (nothing to check)."""
    if not model.buffer_checksums:
        return False
    view = memoryview(data)
    for index, (offset, length, expected) in enumerate(model.buffer_checksums):
        actual = buffer_crc32(view[offset : offset + length])
        if actual != expected:
            raise ModelFormatError(
                f"{source}: buffer {index} (offset {offset}, {length} bytes): checksum {actual:08x} does not match the "
                f"recorded {expected:08x}; the file's weights are corrupt"
            )
    return True


def read_file(path: str | Path, verify: bool = False) -> tuple[ModelDef, mmap.mmap | None]:
    """Map ``path`` read-only and parse it; returns the model and the mapping that backs its weights.
    ``verify`` checks the buffers' checksums too (reading every page of the file)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = path.stat().st_size
            if size < 8:
                raise ModelFormatError(f"{path}: {size} bytes is too short to be a .flow file")
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot open: {exc.strerror or exc}") from exc
    return parse(mapped, source=str(path), verify=verify), mapped




def parse(data: bytes | bytearray | memoryview | mmap.mmap, source: str = "<bytes>", verify: bool = False) -> ModelDef:
    """Parse and validate a complete .flow image held in memory (or mapped); ``verify`` also checks
    the buffers' checksums (``verify_checksums``)."""
    size = len(data)
    if size < 8:
        raise ModelFormatError(f"{source}: {size} bytes is too short to be a .flow file")
    ident = bytes(data[4:8])
    if ident != FILE_IDENTIFIER:
        if _looks_like_onnx(data, source):
            raise ModelFormatError(f"{source} is an ONNX model, not a .flow file: convert it first with "
                                   f"`flowstack convert {source}`")
        raise ModelFormatError(f"{source}: file identifier is {ident!r}, expected {FILE_IDENTIFIER!r}; not a .flow file")
    reader = _Reader(data, size, source)
    try:
        model = reader.model()
    except ModelFormatError:
        raise
    except struct.error as exc:
        # FlatBuffers reads with unpack_from: an offset past the end of what is there
        raise ModelFormatError(f"{source}: truncated or corrupt: reading {reader.where} runs past the end of the "
                               f"file ({size} bytes; {exc})") from exc
    except (IndexError, ValueError, TypeError, UnicodeDecodeError, OverflowError, RecursionError) as exc:
        raise ModelFormatError(f"{source}: corrupt FlatBuffer ({type(exc).__name__}: {exc}) while reading {reader.where}") from exc
    if verify:
        verify_checksums(data, model, source)
    return model


# An ONNX ModelProto starts with its ir_version (field 1, a small varint), then another field's tag
# (producer_name 2, ..., graph 7, opset_import 8, metadata_props 14: length-delimited, wire type 2).
_ONNX_SECOND_FIELD_TAGS = {(field << 3) | 2 for field in (2, 3, 4, 5, 6, 7, 8, 14, 20)}


def _looks_like_onnx(data, source: str) -> bool:
    head = bytes(data[:3])
    return source.lower().endswith(".onnx") or (
        len(head) == 3 and head[0] == 0x08 and head[1] < 0x80 and head[2] in _ONNX_SECOND_FIELD_TAGS
    )


class _Reader:
    def __init__(self, data, size: int, source: str):
        self.data = data
        self.size = size
        self.source = source
        self.where = "the model header"
        self.buffers: list[tuple[int, int]] = []

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.source}: {self.where}: {message}")

    # -- primitives with bounds checks ------------------------------------------------------
    def count(self, table, name: str, elem_size: int = 4) -> int:
        n = getattr(table, name + "Length")()
        # Each element occupies at least `elem_size` bytes of the file: a length beyond that is corrupt,
        # and checking it here keeps a flipped bit from turning into a billion-iteration loop.
        if n < 0 or n * elem_size > self.size:
            raise self.fail(f"{name} claims {n} entries, more than the file can hold")
        return n

    def ints(self, table, name: str, elem_size: int) -> list[int]:
        n = self.count(table, name, elem_size)
        if n == 0:
            return []
        arr = getattr(table, name + "AsNumpy")()
        return [int(v) for v in arr]

    def floats(self, table, name: str) -> np.ndarray:
        n = self.count(table, name, 4)
        return np.array(getattr(table, name + "AsNumpy")(), dtype=np.float32) if n else np.zeros(0, np.float32)

    def string(self, raw) -> str:
        return raw.decode("utf-8") if raw is not None else ""

    def strings(self, table, name: str) -> list[str]:
        return [self.string(getattr(table, name)(i)) for i in range(self.count(table, name))]

    # -- tables --------------------------------------------------------------------------------
    def model(self) -> ModelDef:
        fb = FbModel.GetRootAs(self.data, 0)
        version = fb.FormatVersion()
        if version > FORMAT_VERSION:
            raise self.fail(
                f"format version {version} is newer than this reader understands ({FORMAT_VERSION}); "
                f"upgrade flowstack to read it"
            )
        if version < 1:
            raise self.fail(f"format version {version} is invalid")
        self.where = "buffers"
        checksum = fb.Checksum()
        if checksum not in (BufferChecksum.NONE, BufferChecksum.CRC32):
            raise self.fail(f"unknown buffer checksum kind {checksum}; upgrade flowstack to read it")
        crcs = []
        for i in range(self.count(fb, "Buffers")):
            b = fb.Buffers(i)
            offset, length = b.Offset(), b.Length()
            crcs.append(b.Crc32())
            if i == 0:
                if length != 0:
                    raise self.fail("buffer 0 must be the empty sentinel")
            elif offset % BUFFER_ALIGNMENT:
                raise self.fail(f"buffer {i} starts at offset {offset}, not a multiple of {BUFFER_ALIGNMENT}")
            if offset + length > self.size:
                raise self.fail(f"buffer {i} (offset {offset}, {length} bytes) runs past the end of the file "
                                f"({self.size} bytes): the file is truncated")
            self.buffers.append((offset, length))
        self.check_disjoint(self.buffers)
        self.where = "operator codes"
        codes = []
        for i in range(self.count(fb, "OperatorCodes")):
            c = fb.OperatorCodes(i)
            codes.append((self.string(c.Domain()), self.string(c.Name()), c.Version()))
        self.where = "opset imports"
        opsets = {}
        for i in range(self.count(fb, "OpsetImports")):
            o = fb.OpsetImports(i)
            opsets[self.string(o.Domain())] = o.Version()
        n_sub = self.count(fb, "Subgraphs")
        if n_sub == 0:
            raise self.fail("the model has no subgraphs")
        subgraphs = [self.subgraph(fb.Subgraphs(i), i, codes, n_sub) for i in range(n_sub)]
        self.where = "signatures"
        signatures = {}
        for i in range(self.count(fb, "Signatures")):
            s = fb.Signatures(i)
            sub = s.Subgraph()
            if sub >= n_sub:
                raise self.fail(f"signature {i} refers to subgraph {sub}; the model has {n_sub}")
            n_t = len(subgraphs[sub].tensors)
            sig = SignatureDef(self.string(s.Key()), self.tensor_maps(s, "Inputs", n_t), self.tensor_maps(s, "Outputs", n_t), sub)
            signatures[sig.key] = sig
        self.where = "metadata"
        metadata = {}
        for i in range(self.count(fb, "Metadata")):
            kv = fb.Metadata(i)
            metadata[self.string(kv.Key())] = self.string(kv.Value())
        checksums = tuple((o, n, c) for (o, n), c in zip(self.buffers, crcs)) if checksum == BufferChecksum.CRC32 else ()
        return ModelDef(version, self.string(fb.Producer()), opsets, subgraphs, signatures, metadata, self.size, checksums)

    def check_disjoint(self, buffers: list[tuple[int, int]]) -> None:
        """Each weight owns its bytes: buffers that share bytes are a corrupt or hand-edited file."""
        spans = sorted((offset, offset + length, i) for i, (offset, length) in enumerate(buffers) if length)
        for (_, end, i), (start, _, j) in itertools.pairwise(spans):
            if start < end:
                raise self.fail(f"buffer {j} (offset {start}) overlaps buffer {i} (offset {buffers[i][0]}, {buffers[i][1]} bytes)")

    def tensor_maps(self, sig, name: str, n_tensors: int) -> dict[str, int]:
        out = {}
        for i in range(self.count(sig, name)):
            m = getattr(sig, name)(i)
            t = m.Tensor()
            if not 0 <= t < n_tensors:
                raise self.fail(f"{name.lower()} {i} refers to tensor {t}; the subgraph has {n_tensors}")
            out[self.string(m.Name())] = t
        return out

    def subgraph(self, g, index: int, codes, n_sub: int) -> SubGraphDef:
        self.where = f"subgraph {index}"
        tensors = [self.tensor(g.Tensors(i), index, i) for i in range(self.count(g, "Tensors"))]
        n_t = len(tensors)

        def check(indices: list[int], what: str, allow_absent: bool = False) -> list[int]:
            for t in indices:
                if not (0 <= t < n_t or (allow_absent and t == -1)):
                    raise self.fail(f"{what} refers to tensor {t}; the subgraph has {n_t}")
            return indices

        self.where = f"subgraph {index}"
        inputs = check(self.ints(g, "Inputs", 4), "an input")
        if len(set(inputs)) != len(inputs):
            twice = sorted({t for t in inputs if inputs.count(t) > 1})
            raise self.fail(f"tensor(s) {twice} ({', '.join(repr(tensors[t].name) for t in twice)}) listed more than once among the inputs")
        outputs = check(self.ints(g, "Outputs", 4), "an output")
        ops = []
        for i in range(self.count(g, "Operators")):
            o = g.Operators(i)
            self.where = f"subgraph {index}, operator {i}"
            code = o.OpcodeIndex()
            if code >= len(codes):
                raise self.fail(f"op code index {code} is out of range ({len(codes)} op codes)")
            domain, name, version = codes[code]
            self.where = f"subgraph {index}, operator {i} ({name} {self.string(o.Name())!r})"
            attrs = {}
            for k in range(self.count(o, "Attributes")):
                a = o.Attributes(k)
                attrs[self.string(a.Name())] = self.attribute(a, tensors, n_sub)
            ops.append(OperatorDef(
                domain, name, version,
                check(self.ints(o, "Inputs", 4), "an input", allow_absent=True),
                check(self.ints(o, "Outputs", 4), "an output"),
                attrs, self.string(o.Name()),
                check(self.ints(o, "ImplicitInputs", 4), "an implicit input"),
            ))
        return SubGraphDef(self.string(g.Name()), tensors, inputs, outputs, ops)

    def attribute(self, a, tensors: list[TensorDef], n_sub: int) -> Any:
        kind = a.Type()
        name = self.string(a.Name())
        read = _ATTRIBUTE_READERS.get(kind)
        if read is None:
            raise self.fail(f"attribute {name!r} has unknown type {kind}")
        return read(self, a, name, tensors, n_sub)

    def _string_attr(self, a, name, tensors, n_sub) -> str:
        return bytes(a.SAsNumpy()).decode("utf-8") if self.count(a, "S", 1) else ""

    def _tensor_attr(self, a, name, tensors, n_sub) -> np.ndarray:
        t = a.Tensor()
        if not 0 <= t < len(tensors) or tensors[t].data is None:
            raise self.fail(f"attribute {name!r} refers to tensor {t}, which is not a constant of this subgraph")
        return tensors[t].data

    def _graph_attr(self, a, name, tensors, n_sub) -> GraphRef:
        g = a.Graph()
        if not 0 < g < n_sub:
            raise self.fail(f"attribute {name!r} refers to subgraph {g}; valid: 1..{n_sub - 1}")
        return GraphRef(g)

    def tensor(self, t, sub: int, index: int) -> TensorDef:
        self.where = f"subgraph {sub}, tensor {index}"
        name = self.string(t.Name())
        self.where = f"subgraph {sub}, tensor {index} ({name!r})"
        code = t.Dtype()
        if not dtypes.is_known(code):
            raise self.fail(f"unknown element type code {code}")
        shape = tuple(self.ints(t, "Shape", 8)) if t.RankKnown() else None
        if shape is not None and any(d < -1 for d in shape):
            raise self.fail(f"shape {shape} has a negative dimension other than -1")
        quant = None
        q = t.Quantization()
        if q is not None:
            quant = Quantization(self.floats(q, "Scale"), np.array(self.ints(q, "ZeroPoint", 8), np.int64), q.Axis())
        data = None
        if code == dtypes.STRING and not t.StringDataIsNone():  # present but empty: a constant of no strings
            data = np.array(self.strings(t, "StringData"), dtype=object)
            if shape is None or -1 in shape or math.prod(shape) != data.size:
                raise self.fail(f"{data.size} strings do not fill shape {shape}")
            data = data.reshape(shape)
        buf = t.Buffer()
        if buf:
            if buf >= len(self.buffers):
                raise self.fail(f"buffer index {buf} is out of range ({len(self.buffers)} buffers)")
            if shape is None or -1 in shape:
                raise self.fail(f"a constant needs a fully known shape, got {shape}")
            if code == dtypes.STRING:
                raise self.fail("string constants are stored as string_data, not in a buffer")
            data = self.buffer_data(buf, code, shape)
        return TensorDef(name, code, shape, data, quant)

    def buffer_data(self, buf: int, code: int, shape: tuple[int, ...]) -> np.ndarray:
        """The read-only constant buffer ``buf`` holds: a view of the file, or for sub-byte types
        (stored packed, ``schemas.packing``) the unpacked copy."""
        try:
            dtype = dtypes.to_numpy(code)
        except dtypes.DTypeError as exc:  # an ml_dtypes type without ml_dtypes installed
            raise self.fail(str(exc)) from None
        offset, length = self.buffers[buf]
        count = math.prod(shape)  # Python ints: a huge shape cannot wrap around
        bits = dtypes.PACKED_BITS.get(code)
        expected = packing.packed_size(count, bits) if bits else count * dtype.itemsize
        if expected != length:
            layout = f" packed {8 // bits} to a byte" if bits else ""
            raise self.fail(f"buffer {buf} holds {length} bytes but shape {list(shape)} of {dtype}{layout} needs {expected}")
        if bits:
            raw = np.frombuffer(self.data, dtype=np.uint8, count=length, offset=offset)
            data = packing.unpack(raw, bits, count).view(dtype).reshape(shape)
        else:
            data = np.frombuffer(self.data, dtype=dtype, count=count, offset=offset).reshape(shape)
        if data.flags.writeable:
            data = data.view()
            data.flags.writeable = False
        return data


# How each attribute type is read back: (reader, attribute table, name, tensors, subgraph count).
_ATTRIBUTE_READERS = {
    AttrType.INT: lambda r, a, *_: int(a.I()),
    AttrType.FLOAT: lambda r, a, *_: float(a.F()),
    AttrType.STRING: _Reader._string_attr,
    AttrType.INTS: lambda r, a, *_: r.ints(a, "Ints", 8),
    AttrType.FLOATS: lambda r, a, *_: [float(v) for v in r.floats(a, "Floats")],
    AttrType.STRINGS: lambda r, a, *_: r.strings(a, "Strings"),
    AttrType.TENSOR: _Reader._tensor_attr,
    AttrType.GRAPH: _Reader._graph_attr,
}
