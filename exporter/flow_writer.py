"""Writing IR models as .flow files: a FlatBuffer, then the weights, each on a 64-byte boundary."""

from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np

from edge_runtime.format import BUFFER_ALIGNMENT, FILE_IDENTIFIER, FORMAT_VERSION, buffer_crc32
from exporter import ir
from exporter.atomic import atomic_write
from schemas import dtypes, packing
from schemas.fb import (
    Attribute,
    Buffer,
    BufferChecksum,
    KeyValue,
    Model,
    Operator,
    OperatorCode,
    OpsetImport,
    Quantization,
    SignatureDef,
    SubGraph,
    Tensor,
    TensorMap,
)
from schemas.fb.AttrType import AttrType


def _align(n: int) -> int:
    return (n + BUFFER_ALIGNMENT - 1) // BUFFER_ALIGNMENT * BUFFER_ALIGNMENT


class _Layout:
    """Flattens the IR into tables: subgraphs in order, op codes, buffers (buffer 0 = empty)."""

    def __init__(self, model: ir.Model):
        self.model = model
        self.opcodes: dict[tuple[str, str, int], int] = {}
        self.blobs: list[np.ndarray] = [np.zeros(0, np.uint8)]
        self.subgraphs: list[dict] = []
        self._add_graph(model.graph, captures=[])
        self._checksums: list[int] | None = None

    def checksums(self) -> list[int]:
        """Each blob's CRC-32 (computed once: the FlatBuffer is built twice)."""
        if self._checksums is None:
            self._checksums = [buffer_crc32(blob.reshape(-1).view(np.uint8)) for blob in self.blobs]
        return self._checksums

    def _add_graph(self, graph: ir.Graph, captures: list[str]) -> int:
        index = len(self.subgraphs)
        entry: dict = {"name": graph.name, "tensors": [], "ops": []}
        self.subgraphs.append(entry)
        slots: dict[str, int] = {}
        quantized = _quantization_params(graph)

        def tensor(name: str) -> int:
            if name not in slots:
                slots[name] = len(entry["tensors"])
                value = graph.values.get(name) or ir.Value(name)
                entry["tensors"].append(self._tensor_record(value, quantized.get(name)))
            return slots[name]

        entry["inputs"] = [tensor(n) for n in list(graph.inputs) + captures]
        for node in graph.nodes:
            ins = [tensor(n) if n else -1 for n in node.inputs]
            implicit_names = [n for g in node.subgraphs() for n in g.free_names()]
            implicit_names = list(dict.fromkeys(implicit_names))
            implicit = [tensor(n) for n in implicit_names]
            attrs = []
            for key, value in node.attrs.items():
                if isinstance(value, ir.Graph):
                    attrs.append((key, AttrType.GRAPH, self._add_graph(value, implicit_names)))
                elif isinstance(value, np.ndarray):
                    const_name = f"{node.name or node.op_type}/{key}"
                    while const_name in slots or const_name in graph.values:
                        const_name += "_"
                    slots[const_name] = len(entry["tensors"])
                    entry["tensors"].append(self._tensor_record(ir.Value(const_name, dtypes.from_numpy(value.dtype), value.shape, value)))
                    attrs.append((key, AttrType.TENSOR, slots[const_name]))
                else:
                    attrs.append((key, *self._scalar_attr(node, key, value)))
            outs = [tensor(n) for n in node.outputs]
            version = self.model.opset_imports.get(node.domain, 1)
            code = self.opcodes.setdefault((node.domain, node.op_type, version), len(self.opcodes))
            entry["ops"].append({"code": code, "inputs": ins, "outputs": outs, "attrs": attrs, "name": node.name, "implicit": implicit})
        entry["outputs"] = [tensor(n) for n in graph.outputs]
        for name in graph.values:  # constants nobody reads still belong to the graph
            if graph.values[name].data is not None:
                tensor(name)
        entry["slots"] = slots
        return index

    @staticmethod
    def _scalar_attr(node: ir.Node, key: str, value) -> tuple[int, object]:
        if isinstance(value, (bool, np.bool_, int, np.integer)):
            return AttrType.INT, int(value)
        if isinstance(value, (float, np.floating)):
            return AttrType.FLOAT, float(value)
        if isinstance(value, str):
            return AttrType.STRING, value
        if isinstance(value, bytes):
            return AttrType.STRING, value.decode("utf-8", errors="replace")
        if isinstance(value, (list, tuple)):
            if all(isinstance(v, (int, np.integer)) for v in value):
                return AttrType.INTS, [int(v) for v in value]
            if all(isinstance(v, (int, float, np.number)) for v in value):
                return AttrType.FLOATS, [float(v) for v in value]
            if all(isinstance(v, str) for v in value):
                return AttrType.STRINGS, list(value)
        raise TypeError(f"node {node.name!r} ({node.op_type}): attribute {key!r} has unsupported value {value!r}")

    def _tensor_record(self, value: ir.Value, quantization: tuple | None = None) -> dict:
        record = {"name": value.name, "dtype": value.dtype or 0, "shape": value.shape, "buffer": 0, "strings": None,
                  "quantization": quantization}
        if value.data is not None:
            data = np.asarray(value.data)
            record["dtype"] = dtypes.from_numpy(data.dtype)
            record["shape"] = tuple(data.shape)
            if record["dtype"] == dtypes.STRING:
                record["strings"] = [s.decode() if isinstance(s, bytes) else str(s) for s in data.reshape(-1)]
            else:
                record["buffer"] = len(self.blobs)
                bits = dtypes.PACKED_BITS.get(record["dtype"])
                self.blobs.append(packing.pack(data, bits) if bits else np.ascontiguousarray(data))
        return record


# The quantized tensor of each (de)quantization op: the input it dequantizes, the output it quantizes.
_QUANTIZED_TENSOR = {"DequantizeLinear": lambda node: node.inputs[0], "QuantizeLinear": lambda node: node.outputs[0]}


def _quantization_params(graph: ir.Graph) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Tensor name -> (scale, zero point, axis) for every tensor a (De)QuantizeLinear with constant
    parameters quantizes: recorded on the tensor itself, so a reader sees the scheme per tensor."""
    params = {}
    for node in graph.nodes:
        pick = _QUANTIZED_TENSOR.get(node.op_type) if not node.domain else None
        if pick is None or len(node.inputs) < 2:
            continue
        scale = graph.values.get(node.inputs[1])
        zero_point = graph.values.get(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        if scale is None or scale.data is None or (zero_point is not None and zero_point.data is None):
            continue
        zp = zero_point.data if zero_point is not None else np.zeros(scale.data.shape, np.int64)
        params[pick(node)] = (scale.data, zp, int(node.attrs.get("axis", 1)))
    return params


def _table_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _int_vector(b: flatbuffers.Builder, values: list[int]) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=np.int32))


def _string_vector(b: flatbuffers.Builder, strings: list[str]) -> int:
    return _table_vector(b, [b.CreateString(s) for s in strings])


def _table(b: flatbuffers.Builder, table, **fields) -> int:
    """One table of the generated module ``table``: ``Add<Field>`` for each keyword in the order given
    (the order fixes the bytes); returns the table's offset."""
    table.Start(b)
    for field, value in fields.items():
        getattr(table, "Add" + field)(b, value)
    return table.End(b)


def _optional(**fields) -> dict:
    """The optional fields that are set, for ``_table``."""
    return {field: value for field, value in fields.items() if value is not None}


# How each attribute type is stored: the vector to build first (None: a scalar field) and its field.
_ATTRIBUTE_FIELDS = {
    AttrType.INT: (None, "I"),
    AttrType.FLOAT: (None, "F"),
    AttrType.STRING: (lambda b, v: b.CreateByteVector(v.encode("utf-8")), "S"),
    AttrType.INTS: (lambda b, v: b.CreateNumpyVector(np.asarray(v, dtype=np.int64)), "Ints"),
    AttrType.FLOATS: (lambda b, v: b.CreateNumpyVector(np.asarray(v, dtype=np.float32)), "Floats"),
    AttrType.STRINGS: (_string_vector, "Strings"),
    AttrType.TENSOR: (None, "Tensor"),
    AttrType.GRAPH: (None, "Graph"),
}


# -- builders: one per table, each returning the table's offset (or a vector of them) ---------------
def _buffers(b: flatbuffers.Builder, layout: _Layout, data_start: int) -> int:
    """The Buffer table of every blob: absolute offsets from ``data_start``, each aligned; buffer 0 empty."""
    tables = []
    position = data_start
    for i, (blob, crc) in enumerate(zip(layout.blobs, layout.checksums())):
        offset, length = (0, 0) if i == 0 else (position, blob.nbytes)
        if i:
            position = _align(position + blob.nbytes)
        tables.append(_table(b, Buffer, Offset=offset, Length=length, Crc32=crc))
    return _table_vector(b, tables)


def _operator_codes(b: flatbuffers.Builder, layout: _Layout) -> int:
    tables = []
    for (domain, name, version) in layout.opcodes:
        d, n = b.CreateString(domain), b.CreateString(name)
        tables.append(_table(b, OperatorCode, Domain=d, Name=n, Version=version))
    return _table_vector(b, tables)


def _quantization_table(b: flatbuffers.Builder, scale: np.ndarray, zero_point: np.ndarray, axis: int) -> int:
    scales = b.CreateNumpyVector(np.asarray(scale, dtype=np.float32).reshape(-1))
    zero_points = b.CreateNumpyVector(np.asarray(zero_point, dtype=np.int64).reshape(-1))
    return _table(b, Quantization, Scale=scales, ZeroPoint=zero_points, Axis=axis)


def _tensor(b: flatbuffers.Builder, t: dict) -> int:
    name = b.CreateString(t["name"])
    shape = b.CreateNumpyVector(np.asarray(t["shape"] or [], dtype=np.int64))
    strings = _string_vector(b, t["strings"]) if t["strings"] is not None else None
    quantization = _quantization_table(b, *t["quantization"]) if t.get("quantization") is not None else None
    return _table(b, Tensor, Name=name, Dtype=t["dtype"], Shape=shape, RankKnown=t["shape"] is not None,
                  Buffer=t["buffer"], **_optional(StringData=strings, Quantization=quantization))


def _attribute(b: flatbuffers.Builder, key: str, kind: int, value) -> int:
    k = b.CreateString(key)
    encode, field = _ATTRIBUTE_FIELDS[kind]
    payload = encode(b, value) if encode else value
    return _table(b, Attribute, Name=k, Type=kind, **{field: payload})


def _operator(b: flatbuffers.Builder, o: dict) -> int:
    attrs = _table_vector(b, [_attribute(b, *attr) for attr in o["attrs"]])
    ins, outs, implicit = (_int_vector(b, o[k]) for k in ("inputs", "outputs", "implicit"))
    name = b.CreateString(o["name"])
    return _table(b, Operator, OpcodeIndex=o["code"], Inputs=ins, Outputs=outs, Attributes=attrs, Name=name,
                  ImplicitInputs=implicit)


def _subgraph(b: flatbuffers.Builder, sg: dict) -> int:
    tensors = _table_vector(b, [_tensor(b, t) for t in sg["tensors"]])
    ops = _table_vector(b, [_operator(b, o) for o in sg["ops"]])
    ins, outs = _int_vector(b, sg["inputs"]), _int_vector(b, sg["outputs"])
    name = b.CreateString(sg["name"])
    return _table(b, SubGraph, Name=name, Tensors=tensors, Inputs=ins, Outputs=outs, Operators=ops)


def _tensor_maps(b: flatbuffers.Builder, names: dict[str, str], slots: dict[str, int]) -> int:
    tables = []
    for public, value_name in names.items():
        n = b.CreateString(public)
        tables.append(_table(b, TensorMap, Name=n, Tensor=slots[value_name]))
    return _table_vector(b, tables)


def _signature_defs(b: flatbuffers.Builder, layout: _Layout) -> int:
    """Each signature's public names mapped to tensors of the main graph (subgraph 0)."""
    slots = layout.subgraphs[0]["slots"]
    tables = []
    for key, sig in _signatures(layout.model).items():
        inputs, outputs = _tensor_maps(b, sig.inputs, slots), _tensor_maps(b, sig.outputs, slots)
        k = b.CreateString(key)
        tables.append(_table(b, SignatureDef, Key=k, Inputs=inputs, Outputs=outputs, Subgraph=0))
    return _table_vector(b, tables)


def _metadata(b: flatbuffers.Builder, model: ir.Model) -> int:
    tables = []
    for key, value in model.metadata.items():
        k, v = b.CreateString(key), b.CreateString(str(value))
        tables.append(_table(b, KeyValue, Key=k, Value=v))
    return _table_vector(b, tables)


def _opset_imports(b: flatbuffers.Builder, model: ir.Model) -> int:
    tables = []
    for domain, version in model.opset_imports.items():
        d = b.CreateString(domain)
        tables.append(_table(b, OpsetImport, Domain=d, Version=version))
    return _table_vector(b, tables)


def _build(layout: _Layout, data_start: int) -> bytes:
    """The FlatBuffer of ``layout``, its buffers placed from ``data_start``: the Model table built
    from the builders above, children first as FlatBuffers requires."""
    b = flatbuffers.Builder(1024)
    b.ForceDefaults(True)  # fixed layout: the second pass must produce the same size
    model = layout.model
    opsets = _opset_imports(b, model)
    codes = _operator_codes(b, layout)
    subgraphs = _table_vector(b, [_subgraph(b, sg) for sg in layout.subgraphs])
    buffers = _buffers(b, layout, data_start)
    signatures = _signature_defs(b, layout)
    metadata = _metadata(b, model)
    producer = b.CreateString(model.producer)
    root = _table(b, Model, FormatVersion=FORMAT_VERSION, Producer=producer, OpsetImports=opsets, OperatorCodes=codes,
                  Subgraphs=subgraphs, Buffers=buffers, Signatures=signatures, Metadata=metadata,
                  Checksum=BufferChecksum.BufferChecksum.CRC32)
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())


def _signatures(model: ir.Model) -> dict[str, ir.Signature]:
    if model.signatures:
        return model.signatures
    g = model.graph
    return {"serving_default": ir.Signature({n: n for n in g.inputs}, {n: n for n in g.outputs})}


def _chunks(model: ir.Model):
    """The file as a sequence of byte chunks: the FlatBuffer, then each weight after padding."""
    layout = _Layout(model)
    head = _build(layout, 0)
    # Buffer offsets are fixed-width fields, so a second build with the real data start has the same size.
    data_start = _align(len(head))
    head = _build(layout, data_start)
    assert _align(len(head)) == data_start, "FlatBuffer size changed between passes"
    yield head
    position = len(head)
    for blob in layout.blobs[1:]:
        padding = _align(position) - position
        yield b"\0" * padding
        yield memoryview(blob.reshape(-1).view(np.uint8))
        position += padding + blob.nbytes


def to_bytes(model: ir.Model) -> bytes:
    """Serialize ``model`` to a complete .flow image in memory."""
    return b"".join(_chunks(model))


def write(model: ir.Model, path: str | Path) -> int:
    """Write ``model`` to ``path`` atomically (temp file, fsync, rename); returns the size in bytes."""
    return atomic_write(path, _chunks(model))
