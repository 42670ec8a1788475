"""``--quantize SCHEME [--calibration NAME=FILE.npy]``: the flags ``convert`` and ``export`` share."""

from __future__ import annotations


def add_arguments(parser) -> None:
    from exporter.quantize import SCHEMES

    parser.add_argument("--quantize", choices=sorted(SCHEMES), metavar="SCHEME",
                        help=f"post-training quantization: {', '.join(sorted(SCHEMES))} (weights as float16, "
                             f"int8 per channel with float activations, or int8 with calibrated activations)")
    parser.add_argument("--calibration", action="append", default=[], metavar="NAME=FILE.npy",
                        help="calibration samples for --quantize int8, one per input, samples along axis 0")


def request(args):
    """The ``QuantizationRequest`` the flags ask for, or None without ``--quantize``."""
    from exporter.quantize import QuantizationRequest
    from flowstack_cli.arrays import parse_named_arrays

    if args.calibration and args.quantize is None:
        raise ValueError("--calibration is only used with --quantize int8")
    if args.quantize is None:
        return None
    arrays = parse_named_arrays(args.calibration, "--calibration")
    sources = dict(pair.partition("=")[::2] for pair in args.calibration)
    return QuantizationRequest(args.quantize, arrays or None, sources)
