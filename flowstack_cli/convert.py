"""``flowstack convert model.onnx -o model.flow [--sample NAME=FILE.npy] [--verbose] [--no-verify] [--no-optimize]
[--quantize float16|dynamic-int8|int8 [--calibration NAME=FILE.npy]]``"""

from __future__ import annotations

from pathlib import Path

from flowstack_cli import quantize_flags
from flowstack_cli.flow_flags import add_flow_flags


def register(subparsers) -> None:
    p = subparsers.add_parser("convert", help="convert an ONNX model to an optimized, verified .flow file")
    p.add_argument("source", type=Path, help="the .onnx file")
    p.add_argument("-o", "--output", type=Path, help="the .flow file to write (default: next to the source)")
    add_flow_flags(p, checks="parity check", no_verify_help="skip running both graphs to compare outputs",
                   no_optimize_help="write the graph as imported")
    quantize_flags.add_arguments(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    from exporter.onnx_import import convert_onnx
    from flowstack_cli.arrays import parse_named_arrays

    if not args.source.exists():
        raise FileNotFoundError(f"{args.source}: no such file")
    output = args.output or args.source.with_suffix(".flow")
    report = convert_onnx(args.source, output, optimize_graph=not args.no_optimize, verify=not args.no_verify,
                          verbose=args.verbose, samples=parse_named_arrays(args.sample, "--sample") or None,
                          quantization=quantize_flags.request(args))
    if args.verbose:
        print(report)  # the file, what each pass changed, the parity check
    else:
        print(report.headline())
        for check in report.checks():
            print(check)
    return 0
