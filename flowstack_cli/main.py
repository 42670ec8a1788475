"""The ``flowstack`` command: one subcommand per module, listed in COMMANDS."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines register(subparsers), which adds its subcommand and sets `handler`.
COMMANDS = (
    "flowstack_cli.convert",
    "flowstack_cli.export",
    "flowstack_cli.inspect_model",
    "flowstack_cli.run_model",
    "flowstack_cli.bench",
    "flowstack_cli.demo",
    "flowstack_cli.serve",
    "flowstack_cli.cluster",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flowstack", description="Train, export, serve and run .flow models.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from edge_runtime import ExecutionError, ModelFormatError, UnsupportedOpError

    try:
        return int(args.handler(args) or 0)
    except (ModelFormatError, UnsupportedOpError, ExecutionError, ValueError, RuntimeError, FileNotFoundError) as exc:
        print(f"flowstack {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
