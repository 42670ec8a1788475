"""``flowstack run model.flow --input name=file.npy [--output-dir DIR]``"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flowstack_cli.arrays import parse_named_arrays


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a .flow model on .npy inputs")
    p.add_argument("model", type=Path)
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy", help="one per input")
    p.add_argument("--output-dir", type=Path, help="save each output as NAME.npy here")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.set_defaults(handler=run)


def run(args) -> int:
    from edge_runtime import load

    model = load(args.model, device=args.device)
    outputs = model.run(parse_named_arrays(args.input, "--input"))
    for name, value in outputs.items():
        value = np.asarray(value)
        print(f"{name}: {value.dtype} {list(value.shape)}")
        with np.printoptions(threshold=20, precision=5):
            print(value)
        if args.output_dir:
            args.output_dir.mkdir(parents=True, exist_ok=True)
            np.save(args.output_dir / f"{name.replace('/', '_')}.npy", value)
    return 0
