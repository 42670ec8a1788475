"""Fetch the wheels scripts/gpu_check.sh installs on the GPU machine, which has no network: every
requirement of pyproject.toml's ``serve`` extra, for that machine's CPython 3.12 on x86-64 Linux,
into ``.whl/`` (ignored by git; carried to the device with ``carry: [".whl"]``).

    python scripts/gpu_wheels.py              # into .whl/
    python scripts/gpu_wheels.py --dest DIR

``--no-deps``: the serve extra already names what the server imports; the machine's image has
NumPy, CuPy, onnx, flatbuffers and PyTorch.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def requirements(extra: str = "serve") -> list[str]:
    """The requirement strings of one optional-dependency group of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"][extra])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", type=Path, default=ROOT / ".whl")
    args = p.parse_args(argv)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", "-d", str(args.dest)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return subprocess.call(command + requirements())


if __name__ == "__main__":
    sys.exit(main())
