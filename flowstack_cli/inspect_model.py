"""``flowstack inspect model.flow``: inputs, outputs, op histogram, size, metadata."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from schemas import dtypes


def register(subparsers) -> None:
    p = subparsers.add_parser("inspect", help="describe a .flow file")
    p.add_argument("model", type=Path)
    p.set_defaults(handler=run)


def _shape(shape) -> str:
    return "?" if shape is None else "[" + ", ".join("?" if d == -1 else str(d) for d in shape) + "]"


def describe(path: Path) -> str:
    from edge_runtime.format import read_file

    model, _ = read_file(path)
    main = model.subgraphs[0]
    lines = [f"{path}: {model.size:,} bytes, format v{model.format_version}, producer {model.producer!r}"]
    lines.append("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in model.opset_imports.items()))
    for title, indices in (("inputs", main.inputs), ("outputs", main.outputs)):
        lines.append(f"{title}:")
        for i in indices:
            t = main.tensors[i]
            lines.append(f"  {t.name}: {dtypes.NAMES.get(t.dtype, t.dtype)} {_shape(t.shape)}")
    weights = [t for g in model.subgraphs for t in g.tensors if t.data is not None]
    weight_bytes = sum(getattr(t.data, "nbytes", 0) for t in weights)
    ops = Counter(op.op_type for g in model.subgraphs for op in g.operators)
    lines.append(f"weights: {len(weights)} tensors, {weight_bytes:,} bytes")
    lines.append(f"ops: {sum(ops.values())} in {len(model.subgraphs)} subgraph(s)")
    for name, count in ops.most_common():
        lines.append(f"  {name:<28}{count:>6}")
    if model.signatures:
        lines.append("signatures: " + ", ".join(model.signatures))
    if model.metadata:
        lines.append("metadata:")
        lines.extend(f"  {k}: {v}" for k, v in model.metadata.items())
    return "\n".join(lines)


def run(args) -> int:
    print(describe(args.model))
    return 0
