"""``flowstack inspect model.flow [--compare other.flow]``: inputs, outputs, op histogram, size,
metadata; and before/after figures: against ``--compare``, or against the frozen graph the file was
optimized from when its metadata records it (``flowstack export`` does)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from schemas import dtypes, packing


def register(subparsers) -> None:
    p = subparsers.add_parser("inspect", help="describe a .flow file")
    p.add_argument("model", type=Path)
    p.add_argument("--compare", type=Path, help="another .flow file (e.g. the unoptimized export) to set op counts and sizes against")
    p.add_argument("--verify", action="store_true",
                   help="check every weight buffer against the checksum the file records (exit 2 naming a corrupt buffer)")
    p.set_defaults(handler=run)


def _shape(shape) -> str:
    return "?" if shape is None else "[" + ", ".join("?" if d == -1 else str(d) for d in shape) + "]"


def describe(path: Path, verify: bool = False) -> str:
    model = _read(path, verify)
    main = model.subgraphs[0]
    lines = [f"{path}: {model.size:,} bytes, format v{model.format_version}, producer {model.producer!r}"]
    if verify:
        checked = len(model.buffer_checksums) - 1  # buffer 0 is the empty sentinel
        lines.append(f"checksums: {checked} weight buffers match their CRC-32" if model.buffer_checksums
                     else "checksums: none recorded (a file written before checksums); nothing verified")
    lines.append("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in model.opset_imports.items()))
    for title, indices in (("inputs", main.inputs), ("outputs", main.outputs)):
        lines.append(f"{title}:")
        for i in indices:
            t = main.tensors[i]
            lines.append(f"  {t.name}: {dtypes.NAMES.get(t.dtype, t.dtype)} {_shape(t.shape)}")
    weights = [t for g in model.subgraphs for t in g.tensors if t.data is not None]
    weight_bytes = sum(packing.stored_size(t.data, t.dtype) for t in weights if hasattr(t.data, "nbytes"))
    ops = _op_counts(model)
    lines.append(f"weights: {len(weights)} tensors, {weight_bytes:,} bytes")
    lines.extend(_quantization(model, weights))
    lines.append(f"ops: {sum(ops.values())} in {len(model.subgraphs)} subgraph(s)")
    for name, count in ops.most_common():
        lines.append(f"  {name:<28}{count:>6}")
    if model.signatures:
        lines.append("signatures: " + ", ".join(model.signatures))
    if model.metadata:
        lines.append("metadata:")
        lines.extend(f"  {k}: {v}" for k, v in model.metadata.items() if k != "labels")
        labels = model.metadata.get("labels", "").splitlines()
        if labels:
            lines.append(f"  labels: {len(labels)} ({labels[0]}, ...)")
    # Metadata is free text in the file: figures that are not numbers are shown above, not compared.
    frozen_ops, frozen_size = model.metadata.get("frozen_ops", ""), model.metadata.get("frozen_size", "")
    if frozen_ops.isdecimal() and frozen_size.isdecimal():
        n = sum(ops.values())
        lines.append(f"frozen graph: {int(frozen_ops)} ops, {int(frozen_size):,} bytes -> optimized (this file): "
                     f"{n} ops, {model.size:,} bytes")
    return "\n".join(lines)


def _quantization(model, weights) -> list[str]:
    """The scheme (from the metadata) and what the file stores quantized, from the tensors' records."""
    records = [t for g in model.subgraphs for t in g.tensors if t.quantization is not None]
    half = [t for t in weights if t.dtype == dtypes.FLOAT16]
    scheme = model.metadata.get("quantization")
    if not (records or half or scheme):
        return []
    per_channel = sum(1 for t in records if t.quantization.scale.size > 1)
    stored = sum(1 for t in records if t.data is not None)
    kinds = sorted({dtypes.NAMES.get(t.dtype, str(t.dtype)) for t in records})
    line = f"quantization: {scheme or 'unnamed scheme'}"
    if records:
        line += (f"; {len(records)} tensors with scale/zero point ({'/'.join(kinds)}): {stored} weights, "
                 f"{len(records) - stored} activations; {per_channel} per channel")
    if half:
        line += f"; {len(half)} float16 weights"
    return [line]


def compare(path: Path, other: Path) -> str:
    """Op counts and sizes of ``path`` set against ``other``, op type by op type."""
    after, before = _read(path), _read(other)
    a, b = _op_counts(after), _op_counts(before)
    lines = [f"compared with {other}: {sum(b.values())} -> {sum(a.values())} ops, {before.size:,} -> {after.size:,} bytes"]
    for op in sorted(set(a) | set(b)):
        mark = "" if a[op] == b[op] else "  *"
        lines.append(f"  {op:<28}{b[op]:>6} -> {a[op]:<6}{mark}")
    return "\n".join(lines)


def _read(path: Path, verify: bool = False):
    from edge_runtime.format import read_file

    return read_file(path, verify=verify)[0]


def _op_counts(model) -> Counter:
    return Counter(op.op_type for g in model.subgraphs for op in g.operators)


def run(args) -> int:
    print(describe(args.model, verify=getattr(args, "verify", False)))
    if args.compare is not None:
        print(compare(args.model, args.compare))
    return 0
