"""The gRPC front end: KServe v2 through our generated stubs, through tritonclient.grpc (in a
subprocess, see triton_grpc_client.py), the health service, limits and auth."""

from __future__ import annotations


import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from tests.serving.conftest import client_report, running_server


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory, mlp):
    from tests.serving.conftest import add_version

    root = tmp_path_factory.mktemp("grpc") / "models"
    root.mkdir()
    add_version(root, "mlp", 1, mlp, {"max_batch_size": 8})
    with running_server(root, http_port=None, grpc_max_message_bytes=1 << 20) as server:
        yield server


@pytest.fixture(scope="module")
def stub(grpc_server):
    channel = grpc.insecure_channel(grpc_server.grpc_address)
    yield pb_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def infer_request(x: np.ndarray, **fields) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="mlp", **fields)
    request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(x.astype("<f4").tobytes())
    return request


def test_health_and_metadata(stub):
    assert stub.ServerLive(pb.ServerLiveRequest(), timeout=5).live
    assert stub.ServerReady(pb.ServerReadyRequest(), timeout=5).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="mlp"), timeout=5).ready
    assert not stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="3"), timeout=5).ready
    meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"), timeout=5)
    assert meta.versions == ["1"] and meta.inputs[0].name == "x" and list(meta.inputs[0].shape) == [-1, 4]
    assert "binary_tensor_data" in stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=5).extensions


def test_infer_raw_and_typed_contents(stub, mlp):
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    reply = stub.ModelInfer(infer_request(x, id="abc"), timeout=10)
    assert reply.id == "abc" and reply.model_version == "1"
    assert reply.outputs[0].name == "probs" and list(reply.outputs[0].shape) == [5, 3]
    got = np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(5, 3)
    np.testing.assert_allclose(got, mlp(x), rtol=1e-5)
    typed = pb.ModelInferRequest(model_name="mlp")
    typed.inputs.add(name="x", datatype="FP32", shape=[5, 4]).contents.fp32_contents.extend(x.ravel().tolist())
    reply = stub.ModelInfer(typed, timeout=10)
    np.testing.assert_allclose(np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(5, 3), mlp(x), rtol=1e-5)


@pytest.mark.parametrize(
    "mutate, code, message",
    [
        (lambda r: r.inputs.__getitem__(0).__setattr__("datatype", "INT64"), grpc.StatusCode.INVALID_ARGUMENT, "input 'x'"),
        (lambda r: r.raw_input_contents.__setitem__(0, b"\x00" * 7), grpc.StatusCode.INVALID_ARGUMENT, "needs 80 bytes, got 7"),
        (lambda r: r.inputs.__getitem__(0).shape.__setitem__(0, 1 << 40), grpc.StatusCode.INVALID_ARGUMENT, "more than the limit"),
        (lambda r: r.__setattr__("model_name", "ghost"), grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'ghost' is not found"),
        (lambda r: r.__setattr__("model_version", "9"), grpc.StatusCode.NOT_FOUND, "version 9"),
        (lambda r: r.inputs.__getitem__(0).__setattr__("name", "y"), grpc.StatusCode.INVALID_ARGUMENT, "unknown input 'y'"),
        (lambda r: r.outputs.add(name="nope"), grpc.StatusCode.INVALID_ARGUMENT, "unknown output"),
        (lambda r: [r.outputs.add(name="probs") for _ in range(2)], grpc.StatusCode.INVALID_ARGUMENT,
         "output(s) ['probs'] requested more than once"),
    ],
)
def test_bad_requests_are_invalid_argument(stub, mutate, code, message):
    request = infer_request(np.zeros((5, 4), np.float32))
    mutate(request)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request, timeout=10)
    assert info.value.code() == code
    assert message in info.value.details()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.inputs[0].__setattr__("name", "n" * 100_000), "unknown input 'nnn"),
        (lambda r: r.inputs[0].__setattr__("datatype", "D" * 100_000), "input 'x': unknown datatype 'DDD"),
        (lambda r: r.__setattr__("model_name", "m" * 100_000), "invalid model name 'mmm"),
        (lambda r: r.__setattr__("model_version", "9" * 100_000), "invalid model version '999"),
        (lambda r: r.outputs.add(name="o" * 100_000), "unknown output(s) ['ooo"),
        # More dimensions than NumPy has: an INTERNAL error before.
        (lambda r: r.inputs[0].shape.extend([1] * 100_000), "input 'x': shape [5, 4, 1, 1,"),
        (lambda r: r.inputs[0].shape.extend([1 << 62] * 30), "input 'x': shape [5, 4, 4611686018427387904,"),
    ],
    ids=["input-name", "datatype", "model-name", "version", "output-name", "rank", "element-count"],
)
def test_error_messages_clip_echoed_values(stub, mutate, message):
    request = infer_request(np.zeros((5, 4), np.float32))
    mutate(request)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()[:2000]
    assert message in info.value.details() and len(info.value.details()) < 500


def test_message_size_limit(stub):
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(infer_request(np.zeros((70000, 4), np.float32)), timeout=10)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_health_service(grpc_server):
    with grpc.insecure_channel(grpc_server.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "inference.GRPCInferenceService"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:
            health.Check(health_pb2.HealthCheckRequest(service="other.Service"), timeout=5)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        watch = health.Watch(health_pb2.HealthCheckRequest(service="other.Service"), timeout=5)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        watch.cancel()


def test_reflection_lists_the_services_served(grpc_server):
    with grpc.insecure_channel(grpc_server.grpc_address) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        assert set(database.get_services()) == {
            "inference.GRPCInferenceService", "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}
        found = database.FindFileContainingSymbol("inference.GRPCInferenceService")  # what grpcurl describes
        (service,) = [s for s in found.service if s.name == "GRPCInferenceService"]
        assert "ModelInfer" in {method.name for method in service.method}


def test_tritonclient_grpc(grpc_server, mlp):
    report = client_report("triton_grpc_client.py", grpc_server.grpc_address, timeout=60)
    assert report["live"] and report["ready"] and report["model_ready"] and report["server_name"] == "flowstack"
    assert report["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["-1", "4"]}]
    np.testing.assert_allclose(np.array(report["probs"]), mlp(np.array(report["x"], np.float32)), rtol=1e-5)
    assert report["id"] == "g1"
    assert report["error_status"] == "StatusCode.INVALID_ARGUMENT"
    assert "input 'x': dimension 1 must be 4, got 5" in report["error_message"]


def test_grpc_bearer_token(repo):
    with running_server(repo, http_port=None, auth_token="tok") as server:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"), timeout=5,
                                  metadata=[("authorization", "Bearer tok")]).name == "mlp"
        # Probes need no token, as HTTP's /v2/health/live and /ready (one rule for both protocols).
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=5).ready
        assert stub.ServerLive(pb.ServerLiveRequest(), timeout=5).live
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelReady(pb.ModelReadyRequest(name="mlp"), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:  # what the server serves is listed to its clients only
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        channel.close()
