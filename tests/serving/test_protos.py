"""The committed gRPC code is exactly what scripts/regen_protos.py generates, and works from
``schemas.proto`` (the generated _pb2_grpc imports its sibling by absolute module name)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_regenerating_protos_is_a_no_op():
    pytest.importorskip("grpc_tools")
    run = subprocess.run([sys.executable, "scripts/regen_protos.py", "--check"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_generated_modules_import_from_schemas():
    from schemas.proto import grpc_service_pb2, grpc_service_pb2_grpc

    assert grpc_service_pb2.DESCRIPTOR.package == "inference"
    service = grpc_service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert [m.name for m in service.methods][:6] == [
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer",
    ]
    # Every method Triton's GRPCInferenceService has (what tritonclient.grpc calls), and only those.
    assert len(service.methods) == 20 and "RepositoryModelLoad" in service.methods_by_name
    assert hasattr(grpc_service_pb2_grpc, "add_GRPCInferenceServiceServicer_to_server")
