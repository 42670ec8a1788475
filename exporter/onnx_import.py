"""ONNX in: an ONNX model becomes our IR (and from there a .flow file).

    flowstack convert model.onnx -o model.flow

Initializers and Constant nodes become constants, older-opset nodes are rewritten to the current
forms (``exporter.onnx_upgrade``), If/Loop/Scan bodies become subgraphs, and every node is checked
against the op registry and the edge kernels, so an unsupported op is reported by node and op
name at conversion time, not at run time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import onnx
import onnx.inliner  # a submodule `import onnx` does not load
from onnx import helper, numpy_helper

from edge_runtime.format import ModelFormatError
from edge_runtime.kernels import has_kernel
from exporter import flow_writer, ir
from exporter.onnx_qlinear import expand_qlinear_ops
from exporter.onnx_upgrade import UpgradeContext, upgrade
from schemas import UnsupportedOpError, dtypes, get_schema, has_schema

DEFAULT_DOMAINS = ("", "ai.onnx")


def _load(source: str | Path | bytes | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        if isinstance(source, bytes):
            return onnx.load_from_string(source)
        return onnx.load(str(source))
    except FileNotFoundError:
        raise
    except Exception as exc:  # protobuf DecodeError and friends
        raise ModelFormatError(f"{source if not isinstance(source, bytes) else '<bytes>'}: not a readable ONNX model: {exc}") from exc


def _value_type(type_proto: onnx.TypeProto) -> ir.ElementType | None:
    """The type ``type_proto`` declares, sequences' and optionals' element types included; None for
    kinds the IR has no values of (maps, sparse tensors) or an empty declaration."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        tt = type_proto.tensor_type
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
        return ir.ElementType(tt.elem_type or None, shape)
    if kind in _CONTAINER_KINDS:
        container = getattr(type_proto, kind)
        element = _value_type(container.elem_type) if container.HasField("elem_type") else None
        return ir.ElementType(_CONTAINER_KINDS[kind], element=element)
    return None


# TypeProto's oneof field -> the dtype code of a value of that kind
_CONTAINER_KINDS = {"sequence_type": dtypes.SEQUENCE, "optional_type": dtypes.OPTIONAL}


def _unknown_code(t: ir.ElementType | None) -> int | None:
    """An element type code in ``t``, at any depth, that flowstack cannot represent."""
    while t is not None:
        if t.dtype is not None and not dtypes.is_known(t.dtype):
            return t.dtype
        t = t.element
    return None


class _GraphImporter:
    def __init__(self, opset: int, source: str):
        self.opset = opset
        self.source = source

    def graph(self, g: onnx.GraphProto, outer_names: set[str]) -> ir.Graph:
        graph = ir.Graph(name=g.name or "main")
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            t = _value_type(vi.type) or ir.ElementType(None)
            dtype = _unknown_code(t)
            if dtype is not None:
                name = onnx.TensorProto.DataType.Name(dtype) if dtype in onnx.TensorProto.DataType.values() else dtype
                raise UnsupportedOpError(f"{self.source}: value {vi.name!r} has element type {name}, which flowstack cannot represent")
            graph.values[vi.name] = ir.Value(vi.name, t.dtype, t.shape, element=t.element)
        for init in g.initializer:
            graph.values[init.name] = ir.Value(init.name, data=self.tensor(init, f"initializer {init.name!r}"))
        for sparse in g.sparse_initializer:
            raise UnsupportedOpError(f"{self.source}: sparse initializer {sparse.values.name!r} is not supported")
        graph.inputs = [vi.name for vi in g.input if graph.values[vi.name].data is None]
        graph.outputs = [vi.name for vi in g.output]
        self.check_single_writer(g, graph)
        ctx = UpgradeContext(graph, self.opset)
        known = set(outer_names) | set(graph.inputs) | set(graph.constants())
        # A subgraph may read any value of this graph, whichever node makes it.
        scope = known | {o for n in g.node for o in n.output if o}
        nodes = []
        for index, proto in enumerate(g.node):
            nodes.extend(self.node(ctx, proto, index, scope))
        graph.nodes = self.topological(nodes, known, graph)
        return graph

    def check_single_writer(self, g: onnx.GraphProto, graph: ir.Graph) -> None:
        """ONNX graphs are in SSA form: a value written twice (or an input or initializer written by a
        node) has no single meaning, and the graph is malformed."""
        writers = {name: "a graph input" for name in graph.inputs}
        writers.update((name, "an initializer") for name in graph.constants())
        for index, proto in enumerate(g.node):
            name = proto.name or f"{proto.op_type}_{index}"
            for value in proto.output:
                if value in writers:
                    raise ModelFormatError(f"{self.source}: graph {graph.name!r}: node {name!r} writes {value!r}, "
                                           f"which is already {writers[value]}")
                if value:
                    writers[value] = f"written by node {name!r}"

    def node(self, ctx: UpgradeContext, proto: onnx.NodeProto, index: int, scope: set[str]) -> list[ir.Node]:
        domain = "" if proto.domain in DEFAULT_DOMAINS else proto.domain
        name = proto.name or f"{proto.op_type}_{index}"
        where = f"{self.source}: node {name!r} (op {proto.op_type}{', domain ' + domain if domain else ''})"
        attrs = {a.name: self.attribute(a, where, scope) for a in proto.attribute}
        node = ir.Node(proto.op_type, list(proto.input), list(proto.output), attrs, name, domain)
        if domain == "" and node.op_type == "Constant" and len(node.outputs) == 1:
            value = _constant_value(node, where)
            if value is not None:
                ctx.graph.values[node.outputs[0]] = ir.Value(node.outputs[0], data=value)
                return []
        rewritten = upgrade(ctx, node) if domain == "" else [node]
        for n in rewritten:
            if not has_schema(n.op_type, n.domain) or not has_kernel(n.op_type, n.domain):
                raise UnsupportedOpError(f"{where}: op {n.op_type!r} is not supported by flowstack's edge runtime")
            schema = get_schema(n.op_type, n.domain)
            if n.op_type == "Split" and schema.attrs.get("num_outputs") and "num_outputs" not in n.attrs \
                    and (len(n.inputs) < 2 or not n.inputs[1]):
                n.attrs["num_outputs"] = len(n.outputs)
            try:
                schema.check_attr_types(n.attrs)
                schema.resolve_attrs(n.attrs)
                schema.check_arity(len(n.inputs), len(n.outputs))
                schema.check_given([bool(name) for name in n.inputs])
            except ValueError as exc:
                raise UnsupportedOpError(f"{where}: {exc}") from None
        return rewritten

    def attribute(self, attr: onnx.AttributeProto, where: str, scope: set[str]) -> Any:
        if attr.ref_attr_name:
            raise UnsupportedOpError(f"{where}: attribute {attr.name!r} refers to a function attribute")
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        if isinstance(value, onnx.TensorProto):
            return self.tensor(value, f"attribute {attr.name!r}")
        if isinstance(value, onnx.GraphProto):
            return self.graph(value, scope)
        if isinstance(value, list) and value:
            if isinstance(value[0], bytes):
                return [v.decode("utf-8", errors="replace") for v in value]
            if isinstance(value[0], (onnx.TensorProto, onnx.GraphProto, onnx.TypeProto, onnx.SparseTensorProto)):
                raise UnsupportedOpError(f"{where}: attribute {attr.name!r} of type {type(value[0]).__name__} lists is not supported")
        if isinstance(value, onnx.TypeProto):  # Optional's `type`: kept as ir.ElementType's text
            t = _value_type(value)
            return helper.printable_type(value) if t is None else str(t)  # the exporter refuses the former
        if isinstance(value, onnx.SparseTensorProto):
            raise UnsupportedOpError(f"{where}: attribute {attr.name!r} of type {type(value).__name__} is not supported")
        return value

    def tensor(self, proto: onnx.TensorProto, what: str) -> np.ndarray:
        if proto.data_location == onnx.TensorProto.EXTERNAL:
            raise ModelFormatError(f"{self.source}: {what} keeps its data in an external file; load the model with its data first")
        if any(d < 0 for d in proto.dims):
            raise ModelFormatError(f"{self.source}: {what} has negative dims {list(proto.dims)}")
        try:
            array = numpy_helper.to_array(proto)
        except Exception as exc:
            raise ModelFormatError(f"{self.source}: {what} (dims {list(proto.dims)}) has data that does not match its declared size or type: {exc}") from exc
        if array.dtype.kind in "SU":
            array = array.astype(object)
        if array.dtype != object and not _representable(array.dtype):
            raise UnsupportedOpError(f"{self.source}: {what} has element type {array.dtype}, which flowstack cannot store")
        return array

    def topological(self, nodes: list[ir.Node], known: set[str], graph: ir.Graph) -> list[ir.Node]:
        """Order nodes so every input is produced first; a cycle is a format error naming its nodes."""
        available = set(known) | set(graph.constants())
        ordered, pending = [], list(nodes)
        while pending:
            progress = []
            for node in pending:
                if all(n in available for n in _needs(node)):
                    progress.append(node)
                    available.update(node.outputs)
            if not progress:
                # A value nothing defines stalls its reader and every node downstream of it: name
                # it (and its reader) rather than calling that chain a cycle.
                produced = {o for node in pending for o in node.outputs}
                undefined = {n: node.name for node in pending for n in _needs(node)
                             if n not in available and n not in produced}
                if undefined:
                    values = sorted(undefined)[:8]
                    readers = sorted({undefined[n] for n in values})
                    raise ModelFormatError(f"{self.source}: graph {graph.name!r} reads undefined value(s) {values} "
                                           f"(read by node(s) {readers})")
                names = [node.name for node in pending][:8]
                raise ModelFormatError(f"{self.source}: graph {graph.name!r} has a cycle among nodes {names}")
            done = {id(n) for n in progress}
            ordered.extend(progress)
            pending = [n for n in pending if id(n) not in done]
        return ordered


# The .flow format stores op versions as 32-bit ints; ONNX's own defined opsets are far below.
MAX_OPSET_VERSION = 2**31 - 1


def _check_opsets(opsets: Mapping[str, int], graph: onnx.GraphProto, label: str) -> None:
    # A model of ai.onnx.ml ops alone (a bare scikit-learn Binarizer) needs no default-domain import.
    default_node = next((n for n in every_node(graph) if n.domain in DEFAULT_DOMAINS), None)
    if "" not in opsets and default_node is not None:
        raise ModelFormatError(f"{label}: the model imports no version of the default ONNX domain (opset_import), "
                               f"but uses its op {default_node.op_type}")
    newest = onnx.defs.onnx_opset_version()
    for domain, version in opsets.items():
        if not 1 <= version <= (newest if domain == "" else MAX_OPSET_VERSION):
            limit = f"1..{newest}, the newest this importer knows" if domain == "" else f"1..{MAX_OPSET_VERSION}"
            raise ModelFormatError(f"{label}: opset import {domain or 'ai.onnx'} version {version} is out of range ({limit})")


def every_node(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph`` and of the graphs nested in it."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield from every_node(sub)


def _check_output_counts(graph: onnx.GraphProto, label: str) -> None:
    """Count attributes (Split's num_outputs) must match the node's outputs, as the edge runtime
    checks at load. Checked here before shape inference, which (like the kernel) makes one entry
    per piece: num_outputs=10**9 on a one-output node costs 8 GB and a minute."""
    for index, node in enumerate(graph.node):
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        schema = get_schema(node.op_type, domain) if has_schema(node.op_type, domain) else None
        for attr in node.attribute:
            if schema is not None and attr.name == schema.output_count_attr and attr.type == onnx.AttributeProto.INT:
                problem = schema.output_count_mismatch({attr.name: attr.i}, len(node.output))
                if problem:
                    name = node.name or f"{node.op_type}_{index}"
                    raise ModelFormatError(f"{label}: node {name!r} (op {node.op_type}): {problem}")
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                _check_output_counts(sub, label)


def _needs(node: ir.Node) -> list[str]:
    """The values ``node`` reads: its inputs, and what its nested graphs capture from outside."""
    return [n for n in node.inputs if n] + [n for g in node.subgraphs() for n in g.free_names()]


def _representable(dtype: np.dtype) -> bool:
    try:
        dtypes.from_numpy(dtype)
        return True
    except dtypes.DTypeError:
        return False


def _constant_value(node: ir.Node, where: str) -> np.ndarray | None:
    a = node.attrs
    if "value" in a:
        return a["value"]
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64), ("value_floats", np.float32), ("value_ints", np.int64)):
        if key in a:
            return np.asarray(a[key], dtype=dtype)
    if "value_string" in a:
        return np.asarray(a["value_string"], dtype=object)
    if "value_strings" in a:
        return np.asarray(a["value_strings"], dtype=object)
    if "sparse_value" in a:
        raise UnsupportedOpError(f"{where}: sparse constants are not supported")
    return None


def import_onnx(source: str | Path | bytes | onnx.ModelProto) -> ir.Model:
    """Read an ONNX model into the IR, upgrading old-opset nodes and checking every op is supported."""
    proto = expand_qlinear_ops(_load(source))
    label = str(source) if isinstance(source, (str, Path)) else (proto.graph.name or "<onnx model>")
    opsets = {("" if o.domain in DEFAULT_DOMAINS else o.domain): o.version for o in proto.opset_import}
    _check_opsets(opsets, proto.graph, label)
    opset = opsets.get("", onnx.defs.onnx_opset_version())
    if proto.functions:
        try:
            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as exc:  # onnx's ValidationError: recursive or malformed local functions
            names = [f"{f.domain}::{f.name}" for f in proto.functions][:8]
            raise ModelFormatError(f"{label}: cannot inline the model's local functions {names}: {exc}") from exc
    _check_output_counts(proto.graph, label)
    try:
        proto = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # shape inference is a best-effort source of tensor types only
        pass
    graph = _GraphImporter(opset, label).graph(proto.graph, set())
    metadata = {p.key: p.value for p in proto.metadata_props}
    metadata.setdefault("source", "onnx")
    if proto.producer_name:
        metadata.setdefault("onnx_producer", f"{proto.producer_name} {proto.producer_version}".strip())
    return ir.Model(graph, opset_imports=opsets, producer="flowstack onnx import", metadata=metadata)


def onnx_to_flow_bytes(source: str | Path | bytes | onnx.ModelProto) -> bytes:
    return flow_writer.to_bytes(import_onnx(source))


def convert_onnx(
    source: str | Path | bytes | onnx.ModelProto,
    destination: str | Path,
    *,
    optimize_graph: bool = True,
    verify: bool = True,
    verbose: bool = False,
    samples: Mapping[str, np.ndarray] | None = None,
    quantization=None,
):
    """Convert an ONNX model to an optimized, verified .flow file; returns the ``ExportReport``.

    ``samples`` (public input name -> array) feed the parity check; by default one is generated
    from the signature. ``quantization`` (an ``exporter.quantize.QuantizationRequest``) quantizes
    the optimized model. A model quantized by onnxruntime is folded to float first
    (``exporter.onnx_dequantize``) and the report's ``folded_quantization`` says what that changed."""
    from edge_runtime.format import ModelFormatError
    from exporter.accuracy import AccuracyReport, measure_accuracy
    from exporter.onnx_dequantize import dequantize_imported
    from exporter.pipeline import export
    from exporter.verify import sample_inputs

    imported = import_onnx(source)
    model, folded, grids = dequantize_imported(imported)
    report = export(model, destination, optimize_graph=optimize_graph, verify=verify, samples=samples,
                    verbose=verbose, quantization=quantization, weight_grids=grids)
    if folded and verify:
        title = "float (onnxruntime's quantization folded) against the quantized model as imported"
        try:
            report.folded_quantization = measure_accuracy(
                imported, model, [samples] if samples is not None else [sample_inputs(model)], title)
        except ModelFormatError as exc:  # e.g. a quantization scale of inf the folded model no longer has
            report.folded_quantization = AccuracyReport(title, not_measured=f"the model as imported does not load: {exc}")
    return report
