"""TF Serving's gRPC Predict, GetModelMetadata and GetModelStatus, called as its clients call them.

Request tensors are made by ``make_tensor_proto`` and answers read by ``make_ndarray``: TensorFlow's own
TensorProto code, as tensorboard carries it (an independent definition of the messages' wire form)."""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest

from serving.tf_serving_grpc import messages
from tests.serving.conftest import IN_DIM, running_server, write_passthrough_model

tensor_util = pytest.importorskip("tensorboard.util.tensor_util")
from tensorboard.compat.proto import tensor_pb2  # noqa: E402 - after the skip

TIMEOUT = 30


def call(channel, service: str, method: str, request, response: str):
    rpc = channel.unary_unary(f"/tensorflow.serving.{service}/{method}",
                              request_serializer=type(request).SerializeToString,
                              response_deserializer=messages(response).FromString)
    return rpc(request, timeout=TIMEOUT)


def predict(channel, model: str, output_filter=(), **tensors):
    request = messages("PredictRequest")()
    request.model_spec.name = model
    request.output_filter.extend(output_filter)
    for name, value in tensors.items():
        proto = value if isinstance(value, tensor_pb2.TensorProto) else tensor_util.make_tensor_proto(value)
        request.inputs[name].ParseFromString(proto.SerializeToString())
    answer = call(channel, "PredictionService", "Predict", request, "PredictResponse")
    return answer, {name: tensor_util.make_ndarray(tensor_pb2.TensorProto.FromString(t.SerializeToString()))
                    for name, t in answer.outputs.items()}


def refused(fn, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        fn(*args, **kwargs)
    return caught.value


@pytest.fixture
def typed_repo(repo: Path) -> Path:
    from onnx import TensorProto

    write_passthrough_model(repo / "typed" / "1" / "model.flow",
                            {"words": (TensorProto.STRING, ["n", 2]), "ids": (TensorProto.INT64, ["n"]),
                             "flags": (TensorProto.BOOL, ["n"]), "half": (TensorProto.FLOAT16, ["n", 3])},
                            {"words_out": "words", "ids_out": "ids", "flags_out": "flags", "half_out": "half"})
    return repo


def test_predict_answers_tensor_content_and_typed_values_as_tf_serving_does(server, mlp) -> None:
    x = np.random.default_rng(3).standard_normal((5, IN_DIM)).astype(np.float32)
    with grpc.insecure_channel(server.grpc_address) as channel:
        answer, outputs = predict(channel, "mlp", x=x)
        np.testing.assert_allclose(outputs["probs"], mlp(x), rtol=1e-5, atol=1e-6)
        assert answer.model_spec.name == "mlp" and answer.model_spec.version.value == 1
        assert answer.model_spec.signature_name == "serving_default"
        # clients read the typed field directly, as TF Serving writes it
        assert len(answer.outputs["probs"].float_val) == 5 * 3 and not answer.outputs["probs"].tensor_content

        # a hand-built proto with float_val; one value fills the whole shape (TensorFlow's rule)
        proto = tensor_pb2.TensorProto(dtype=1, float_val=[0.5])
        proto.tensor_shape.dim.add(size=2)
        proto.tensor_shape.dim.add(size=IN_DIM)
        _, outputs = predict(channel, "mlp", x=proto)
        np.testing.assert_allclose(outputs["probs"], mlp(np.full((2, IN_DIM), 0.5, np.float32)), rtol=1e-5)

        # the version asked for, by number
        request = messages("PredictRequest")()
        request.model_spec.name = "mlp"
        request.model_spec.version.value = 1
        request.inputs["x"].ParseFromString(tensor_util.make_tensor_proto(x).SerializeToString())
        assert call(channel, "PredictionService", "Predict", request, "PredictResponse").model_spec.version.value == 1


def test_predict_round_trips_strings_integers_booleans_and_halves(typed_repo) -> None:
    words = np.array([[b"a", b"bc"], [b"", b"\xff\x00"]], dtype=object)
    ids = np.array([2**40, -7], np.int64)
    flags = np.array([True, False])
    half = np.array([[1.5, -2.25, 65504], [0, 1e-3, -0.0]], np.float16)
    with running_server(typed_repo) as server, grpc.insecure_channel(server.grpc_address) as channel:
        _, outputs = predict(channel, "typed", words=words, ids=ids, flags=flags, half=half)
        assert outputs["words_out"].tolist() == words.tolist()
        np.testing.assert_array_equal(outputs["ids_out"], ids)
        np.testing.assert_array_equal(outputs["flags_out"], flags)
        assert outputs["half_out"].dtype == np.float16
        np.testing.assert_array_equal(outputs["half_out"], half)

        _, only = predict(channel, "typed", output_filter=["ids_out"], words=words, ids=ids, flags=flags, half=half)
        assert set(only) == {"ids_out"}


def test_predict_refuses_bad_requests_naming_what_and_where(server) -> None:
    x = np.zeros((2, IN_DIM), np.float32)
    with grpc.insecure_channel(server.grpc_address) as channel:
        error = refused(predict, channel, "mlp", y=x)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "'y'" in error.details()
        error = refused(predict, channel, "mlp", x=x.astype(np.float64))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "input 'x': expects DT_FLOAT, got DT_DOUBLE" in error.details()
        error = refused(predict, channel, "nope", x=x)
        assert error.code() == grpc.StatusCode.NOT_FOUND and "nope" in error.details()
        error = refused(predict, channel, "mlp")
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "inputs is empty" in error.details()

        too_many = tensor_pb2.TensorProto(dtype=1, float_val=[1.0] * 9)
        too_many.tensor_shape.dim.add(size=2)
        too_many.tensor_shape.dim.add(size=IN_DIM)
        error = refused(predict, channel, "mlp", x=too_many)
        assert "9 values in float_val" in error.details() and "'x'" in error.details()

        short = tensor_util.make_tensor_proto(x)
        short.tensor_content = short.tensor_content[:-4]
        error = refused(predict, channel, "mlp", x=short)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "needs 32 bytes, got 28" in error.details()

        complex_input = tensor_util.make_tensor_proto(np.zeros((2, IN_DIM), np.complex64))
        error = refused(predict, channel, "mlp", x=complex_input)
        assert "DataType 8 is not served" in error.details()

        unknown_rank = tensor_pb2.TensorProto(dtype=1, float_val=[1.0])
        unknown_rank.tensor_shape.unknown_rank = True
        assert "unknown_rank" in refused(predict, channel, "mlp", x=unknown_rank).details()

        request = messages("PredictRequest")()
        request.model_spec.name = "mlp"
        request.model_spec.signature_name = "classify"
        request.inputs["x"].ParseFromString(tensor_util.make_tensor_proto(x).SerializeToString())
        error = refused(call, channel, "PredictionService", "Predict", request, "PredictResponse")
        assert "signature_name 'classify'" in error.details()

        garbage = channel.unary_unary("/tensorflow.serving.PredictionService/Predict")
        error = refused(garbage, b"\x0a\x05\x0a", timeout=TIMEOUT)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "PredictRequest" in error.details()


def test_metadata_gives_the_signature_and_status_the_versions(server) -> None:
    with grpc.insecure_channel(server.grpc_address) as channel:
        request = messages("GetModelMetadataRequest")()
        request.model_spec.name = "mlp"
        request.metadata_field.append("signature_def")
        answer = call(channel, "PredictionService", "GetModelMetadata", request, "GetModelMetadataResponse")
        packed = answer.metadata["signature_def"]
        assert packed.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
        signature = messages("SignatureDefMap").FromString(packed.value).signature_def["serving_default"]
        assert signature.method_name == "tensorflow/serving/predict"
        assert signature.inputs["x"].dtype == 1  # DT_FLOAT
        assert [d.size for d in signature.inputs["x"].tensor_shape.dim] == [-1, IN_DIM]
        assert [d.size for d in signature.outputs["probs"].tensor_shape.dim] == [-1, 3]
        assert answer.model_spec.version.value == 1

        request.ClearField("metadata_field")
        error = refused(call, channel, "PredictionService", "GetModelMetadata", request, "GetModelMetadataResponse")
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "metadata_field" in error.details()

        status_request = messages("GetModelStatusRequest")()
        status_request.model_spec.name = "mlp"
        status = call(channel, "ModelService", "GetModelStatus", status_request, "GetModelStatusResponse")
        assert [(s.version, s.state, s.status.error_code) for s in status.model_version_status] == [(1, 30, 0)]
        status_request.model_spec.version.value = 7
        error = refused(call, channel, "ModelService", "GetModelStatus", status_request, "GetModelStatusResponse")
        assert error.code() == grpc.StatusCode.NOT_FOUND and "7" in error.details()
