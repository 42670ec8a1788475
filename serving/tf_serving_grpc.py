"""TensorFlow Serving's gRPC ``PredictionService`` Classify and Regress, for models fed serialized
tf.train.Example records (see serving/tf_examples.py): what TF Serving's own clients call.

The messages are made by protobuf's runtime from a descriptor written here, in a private pool
(nothing clashes with a TensorFlow Serving package installed beside flowstack), with the field
numbers of tensorflow_serving/apis/{model,input,classification,regression}.proto. An Example is
read as the bytes of its message (a repeated message field and a repeated bytes field are the same
on the wire), so the records go to the model as the client wrote them; a context Example is
merged into each by writing its bytes first (protobuf's merge: the example's own features win).
"""

from __future__ import annotations

from typing import Any, Callable

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from serving.core import InferenceCore
from serving.errors import InvalidRequest, ServingError, clipped
from serving.grpc_server import refusing_undecodable, tolerant
from serving.tf_examples import class_labels, is_example_records_input, records_request, results_per_example

__all__ = ["PREDICTION_SERVICE", "PredictionServicer", "messages", "prediction_handler"]

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="flowstack/tf_serving_apis.proto", package="tensorflow.serving",
                                            syntax="proto3")

    def message(name: str, *fields: tuple, oneof: str | None = None):
        m = fd.message_type.add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for field_name, number, kind, extra in fields:
            f = m.field.add(name=field_name, number=number, type=kind,
                            label=_F.LABEL_REPEATED if extra.get("repeated") else _F.LABEL_OPTIONAL)
            if "type" in extra:
                f.type_name = f".tensorflow.serving.{extra['type']}"
            if "oneof" in extra:
                f.oneof_index = 0
        return m

    message("Int64Value", ("value", 1, _F.TYPE_INT64, {}))  # google.protobuf.Int64Value's wire form
    message("ModelSpec", ("name", 1, _F.TYPE_STRING, {}),
            ("version", 2, _F.TYPE_MESSAGE, {"type": "Int64Value", "oneof": True}),
            ("signature_name", 3, _F.TYPE_STRING, {}), ("version_label", 4, _F.TYPE_STRING, {"oneof": True}),
            oneof="version_choice")
    message("ExampleList", ("examples", 1, _F.TYPE_BYTES, {"repeated": True}))
    message("ExampleListWithContext", ("examples", 1, _F.TYPE_BYTES, {"repeated": True}),
            ("context", 2, _F.TYPE_BYTES, {}))
    message("Input", ("example_list", 1, _F.TYPE_MESSAGE, {"type": "ExampleList", "oneof": True}),
            ("example_list_with_context", 2, _F.TYPE_MESSAGE, {"type": "ExampleListWithContext", "oneof": True}),
            oneof="kind")
    message("Class", ("label", 1, _F.TYPE_STRING, {}), ("score", 2, _F.TYPE_FLOAT, {}))
    message("Classifications", ("classes", 1, _F.TYPE_MESSAGE, {"type": "Class", "repeated": True}))
    message("ClassificationResult", ("classifications", 1, _F.TYPE_MESSAGE,
                                     {"type": "Classifications", "repeated": True}))
    message("Regression", ("value", 1, _F.TYPE_FLOAT, {}))
    message("RegressionResult", ("regressions", 1, _F.TYPE_MESSAGE, {"type": "Regression", "repeated": True}))
    for call in ("Classification", "Regression"):
        message(f"{call}Request", ("model_spec", 1, _F.TYPE_MESSAGE, {"type": "ModelSpec"}),
                ("input", 2, _F.TYPE_MESSAGE, {"type": "Input"}))
        message(f"{call}Response", ("result", 1, _F.TYPE_MESSAGE, {"type": f"{call}Result"}),
                ("model_spec", 2, _F.TYPE_MESSAGE, {"type": "ModelSpec"}))
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def messages(name: str):
    """The message class ``tensorflow.serving.<name>`` of this module's pool (for clients and tests)."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"tensorflow.serving.{name}"))


def _records(request) -> np.ndarray:
    kind = request.input.WhichOneof("kind")
    if kind is None:
        raise InvalidRequest("request.input has neither example_list nor example_list_with_context")
    listed = getattr(request.input, kind)
    context = listed.context if kind == "example_list_with_context" else b""
    if not listed.examples:
        raise InvalidRequest(f"request.input.{kind}.examples is empty")
    records = np.empty(len(listed.examples), dtype=object)
    records[:] = [context + example for example in listed.examples]
    return records


class PredictionServicer:
    """Classify and Regress over ``InferenceCore``; a ``ServingError`` becomes its gRPC status."""

    def __init__(self, core: InferenceCore, max_elements: int):
        self.core = core
        self.max_elements = max_elements

    async def _results(self, request, context: grpc.aio.ServicerContext, method: str, call: str):
        """The model spec answered and the per-example results of one call."""
        try:
            spec = request.model_spec
            chosen = spec.WhichOneof("version_choice")
            version = ("" if chosen is None else str(spec.version.value) if chosen == "version"
                       else self.core.repository.version_for_label(spec.name, spec.version_label))
            if spec.signature_name not in ("", "serving_default"):
                raise InvalidRequest(f"unknown signature_name {spec.signature_name!r}; the model serves "
                                     "'serving_default'")
            mv = self.core.repository.get(spec.name, version)
            if not is_example_records_input(mv.inputs, mv.backend.metadata) or len(mv.outputs) != 1:
                raise InvalidRequest(f"{call} needs a model whose one input is serialized tf.Examples and which has "
                                     f"one output; {spec.name!r} takes {[s.name for s in mv.inputs]} and gives "
                                     f"{[s.name for s in mv.outputs]} (use the KServe ModelInfer)")
            records = _records(request)
            response = await self.core.infer(records_request(records, mv.inputs[0], spec.name, version,
                                                             self.max_elements))
            flat = results_per_example(response.outputs[0], len(records), method, call)
        except ServingError as exc:
            await context.abort(exc.grpc_code, str(exc))
        except Exception as exc:  # noqa: BLE001 - any other failure is the server's, reported as such
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {clipped(str(exc))}")
        answered = messages("ModelSpec")(name=spec.name, signature_name="serving_default")
        answered.version.value = int(mv.version)
        return answered, flat, mv

    async def Classify(self, request, context):
        spec, scores, mv = await self._results(request, context, "classify", "Classify")
        labels = class_labels(mv.backend.metadata, scores.shape[1])
        result = messages("ClassificationResult")()
        for row in scores.tolist():
            result.classifications.add().classes.extend(
                messages("Class")(label=label, score=score) for label, score in zip(labels, row))
        return messages("ClassificationResponse")(result=result, model_spec=spec)

    async def Regress(self, request, context):
        spec, values, _ = await self._results(request, context, "regress", "Regress")
        result = messages("RegressionResult")()
        result.regressions.extend(messages("Regression")(value=v) for v in values[:, 0].tolist())
        return messages("RegressionResponse")(result=result, model_spec=spec)


def _handler(method: Callable, request: str, response: str) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(refusing_undecodable(method), request_deserializer=tolerant(messages(request)),
                                               response_serializer=messages(response).SerializeToString)


def prediction_handler(core: InferenceCore, max_elements: int) -> Any:
    """The generic handler serving ``tensorflow.serving.PredictionService``'s Classify and Regress."""
    servicer = PredictionServicer(core, max_elements)
    return grpc.method_handlers_generic_handler(PREDICTION_SERVICE, {
        "Classify": _handler(servicer.Classify, "ClassificationRequest", "ClassificationResponse"),
        "Regress": _handler(servicer.Regress, "RegressionRequest", "RegressionResponse"),
    })
