"""Optional TLS on both front ends, with a self-signed certificate made by the openssl CLI."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import grpc
import httpx
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from tests.serving.conftest import running_server


@pytest.fixture
def certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def test_tls_on_http_and_grpc(repo, certificate):
    cert, key = certificate
    with running_server(repo, tls_cert=cert, tls_key=key) as server:
        url = f"https://127.0.0.1:{server.server.http_port}"
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert))) as client:
            assert client.get(f"{url}/v2/health/ready").json() == {"ready": True}
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{server.server.http_port}/v2/health/ready", timeout=5)
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        channel = grpc.secure_channel(server.grpc_address, credentials)
        assert pb_grpc.GRPCInferenceServiceStub(channel).ServerReady(pb.ServerReadyRequest(), timeout=10).ready
        channel.close()
