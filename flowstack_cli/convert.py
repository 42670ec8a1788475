"""``flowstack convert model.onnx -o model.flow``"""

from __future__ import annotations

from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("convert", help="convert an ONNX model to a .flow file")
    p.add_argument("source", type=Path, help="the .onnx file")
    p.add_argument("-o", "--output", type=Path, help="the .flow file to write (default: next to the source)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from exporter.onnx_import import convert_onnx

    if not args.source.exists():
        raise FileNotFoundError(f"{args.source}: no such file")
    output = args.output or args.source.with_suffix(".flow")
    size = convert_onnx(args.source, output)
    print(f"wrote {output} ({size:,} bytes)")
    return 0
