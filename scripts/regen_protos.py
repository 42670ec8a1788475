"""Regenerate the committed gRPC Python code in schemas/proto/ from its .proto files with grpcio-tools.

    python scripts/regen_protos.py            # rewrite schemas/proto/*_pb2.py and *_pb2_grpc.py
    python scripts/regen_protos.py --check    # exit 1 if the committed code is stale

The generated modules import each other as ``schemas.proto.<name>_pb2``, because protoc runs from the
repository root with the proto path ``schemas/proto/<name>.proto``.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "schemas" / "proto"
# The generated code checks the protobuf runtime against the protoc that made it; keep protoc
# within the protobuf major version the clients we interoperate with pin (tritonclient: < 7).
PROTOC_PROTOBUF_MAJOR = 6


def generate(out_dir: Path) -> Path:
    from grpc_tools import protoc

    protos = sorted(p.relative_to(ROOT).as_posix() for p in PROTO_DIR.glob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = ["grpc_tools.protoc", f"-I{ROOT}", f"-I{include}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if protoc.main(args + protos) != 0:
        sys.exit(f"protoc failed on {protos}")
    return out_dir / "schemas" / "proto"


def check_protoc_version() -> None:
    import grpc_tools
    from importlib.metadata import version

    major = int(version("protobuf").split(".")[0])
    if major != PROTOC_PROTOBUF_MAJOR:
        sys.exit(
            f"need protobuf {PROTOC_PROTOBUF_MAJOR}.x with a matching grpcio-tools (pip install 'grpcio-tools<1.82' "
            f"'protobuf<7'); found protobuf {version('protobuf')}, grpcio-tools at {grpc_tools.__file__}"
        )


def generated_names(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*_pb2*.py")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare, do not write")
    args = parser.parse_args()
    check_protoc_version()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        names = sorted(generated_names(generated) | generated_names(PROTO_DIR))
        stale = [
            n for n in names
            if not ((generated / n).exists() and (PROTO_DIR / n).exists() and filecmp.cmp(generated / n, PROTO_DIR / n, shallow=False))
        ]
        if args.check:
            if stale:
                print("stale generated files:", ", ".join(stale))
                return 1
            return 0
        for name in generated_names(PROTO_DIR):
            (PROTO_DIR / name).unlink()
        for name in generated_names(generated):
            shutil.copyfile(generated / name, PROTO_DIR / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
