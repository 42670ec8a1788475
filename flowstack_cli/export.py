"""``flowstack export CHECKPOINT_DIR --inputs images --outputs probs -o models/digits/1/model.flow``

Freezes the newest checkpoint of a directory (its graph.npz supplies the graph), checks the
frozen graph against the trainer's own outputs, optimizes it, checks it again, and writes the
.flow file (and with ``--onnx``, an ONNX file too). ``--inputs``/``--outputs`` take tensor names
(``node`` or ``node:0``), optionally as ``public=tensor`` to choose the signature's names.
"""

from __future__ import annotations

from pathlib import Path

from flowstack_cli import quantize_flags
from flowstack_cli.flow_flags import add_flow_flags


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="freeze a trained checkpoint into an optimized, verified .flow file")
    p.add_argument("checkpoint_dir", type=Path,
                   help="a checkpoint directory (what Saver writes) or a checkpoint prefix such as run/model-5")
    p.add_argument("--inputs", required=True, action="append",
                   help="input tensor(s), comma-separated or repeated: images, or image=images:0")
    p.add_argument("--outputs", required=True, action="append",
                   help="output tensor(s), comma-separated or repeated: probabilities, or probs=probabilities:0")
    p.add_argument("-o", "--output", type=Path, required=True, help="the .flow file to write")
    p.add_argument("--labels", type=Path, help="a text file with one class label per line, kept in the metadata")
    p.add_argument("--onnx", type=Path, help="also write the frozen model as ONNX here")
    add_flow_flags(p, checks="parity checks",
                   no_verify_help="skip the parity checks against the trainer and the frozen graph",
                   no_optimize_help="write the frozen graph as it is")
    quantize_flags.add_arguments(p)
    p.set_defaults(handler=run)


def parse_tensors(specs: list[str]) -> dict[str, str]:
    """``["image=images:0,labels"]`` -> ``{"image": "images:0", "labels": "labels"}``."""
    out: dict[str, str] = {}
    for spec in specs:
        for item in filter(None, (s.strip() for s in spec.split(","))):
            public, sep, tensor = item.partition("=")
            if not sep:
                public, tensor = item.partition(":")[0].replace("/", "_"), item
            if public in out:
                raise ValueError(f"public name {public!r} given twice")
            out[public] = tensor
    return out


def run(args) -> int:
    from exporter.freeze import export_trained
    from flowstack_cli.arrays import parse_named_arrays

    labels = None
    if args.labels is not None:
        labels = [line.strip() for line in args.labels.read_text().splitlines() if line.strip()]
    report = export_trained(args.checkpoint_dir, args.output, parse_tensors(args.inputs), parse_tensors(args.outputs),
                            optimize_graph=not args.no_optimize, verify=not args.no_verify, verbose=args.verbose,
                            labels=labels, samples=parse_named_arrays(args.sample, "--sample") or None,
                            quantization=quantize_flags.request(args))
    # With --verbose the pass manager has printed its report already.
    print(report.headline())
    if report.passes is not None and not args.verbose:
        print(f"ops: {report.passes.nodes_before} frozen -> {report.passes.nodes_after} optimized")
    if report.parity is not None and args.verbose:
        print(report.parity)
    for part in (report.quantization, report.accuracy):
        if part is not None:
            print(part)
    if report.trainer_parity is not None:
        worst = max((d.max_rel for d in report.trainer_parity.outputs.values()), default=0.0)
        print(f"matches the trainer on {report.trainer_parity.samples} sample(s) (max rel diff {worst:.2g})")
    if args.onnx is not None:
        size = write_onnx(report.frozen, args.onnx)
        print(f"wrote {args.onnx} ({size:,} bytes, passes onnx.checker)")
    return 0


def write_onnx(model, path: Path) -> int:
    """``to_onnx(model)``, checked by ``onnx.checker``, written atomically; returns the size."""
    import onnx

    from exporter.atomic import atomic_write
    from exporter.onnx_export import to_onnx

    proto = to_onnx(model)
    onnx.checker.check_model(proto, full_check=True)
    data = proto.SerializeToString()
    atomic_write(path, [data])
    return len(data)
