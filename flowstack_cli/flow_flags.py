"""The flags ``convert`` and ``export`` share: how the .flow file they write is optimized and checked."""

from __future__ import annotations

import argparse


def add_flow_flags(parser: argparse.ArgumentParser, *, checks: str, no_verify_help: str,
                   no_optimize_help: str) -> None:
    """Add --verbose, --sample, --no-verify and --no-optimize; ``checks`` names the parity check(s)."""
    parser.add_argument("--verbose", action="store_true", help="report what each optimization pass changed")
    parser.add_argument("--sample", action="append", default=[], metavar="NAME=FILE.npy",
                        help=f"sample inputs for the {checks}, one per input (default: generated from the signature)")
    parser.add_argument("--no-verify", action="store_true", help=no_verify_help)
    parser.add_argument("--no-optimize", action="store_true", help=no_optimize_help)
