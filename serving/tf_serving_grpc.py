"""TensorFlow Serving's gRPC API, what its own clients call: ``PredictionService``'s Predict (tensors as
``TensorProto``, see serving/tensor_proto.py) and GetModelMetadata on any model, its Classify and
Regress on models fed serialized tf.train.Example records (see serving/tf_examples.py), and
``ModelService``'s GetModelStatus.

The messages are made by protobuf's runtime from a descriptor written here, in a private pool
(nothing clashes with a TensorFlow Serving package installed beside flowstack), with the field
numbers of TensorFlow's and TF Serving's .proto files. An Example is
read as the bytes of its message (a repeated message field and a repeated bytes field are the same
on the wire), so the records go to the model as the client wrote them; a context Example is
merged into each by writing its bytes first (protobuf's merge: the example's own features win).
"""

from __future__ import annotations

from typing import Any, Callable

import grpc
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from serving import datatypes
from serving.core import InferenceCore, InferInput, InferRequest
from serving.errors import InvalidRequest, ModelNotFound, ServingError, clipped
from serving.grpc_server import refusing_undecodable, tolerant
from serving.tensor_proto import DATA_TYPES, decode_tensor, encode_tensor
from serving.tf_examples import class_labels, is_example_records_input, records_request, results_per_example

__all__ = ["MODEL_SERVICE", "PREDICTION_SERVICE", "PredictionServicer", "messages", "prediction_handlers"]

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"
_F = descriptor_pb2.FieldDescriptorProto


class _ProtoFile:
    """A FileDescriptorProto written message by message; a field's ``type`` is a message name in
    this file's package, or a full name (with a dot) in another; ``map`` makes a map<string, type>."""

    def __init__(self, name: str, package: str, *dependencies: str):
        self.fd = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                                     dependency=list(dependencies))

    def message(self, name: str, *fields: tuple, oneof: str | None = None, parent=None):
        m = (parent.nested_type if parent is not None else self.fd.message_type).add(name=name)
        if oneof:
            m.oneof_decl.add(name=oneof)
        for field_name, number, kind, extra in fields:
            repeated = extra.get("repeated") or "map" in extra
            f = m.field.add(name=field_name, number=number, type=kind,
                            label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if "map" in extra:
                entry = "".join(part.capitalize() for part in field_name.split("_")) + "Entry"
                nested = self.message(entry, ("key", 1, _F.TYPE_STRING, {}), ("value", 2, _F.TYPE_MESSAGE,
                                                                              {"type": extra["map"]}), parent=m)
                nested.options.map_entry = True
                f.type_name = f".{self.fd.package}.{name}.{entry}"
            elif "type" in extra:
                t = extra["type"]
                f.type_name = f".{t}" if "." in t else f".{self.fd.package}.{t}"
            if "oneof" in extra:
                f.oneof_index = 0
        return m


def _tensor_file() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow/core/framework/{tensor,tensor_shape}.proto and meta_graph.proto's SignatureDef, with
    their field numbers; enums (DataType) travel as the int32 they are on the wire."""
    pf = _ProtoFile("flowstack/tf_tensor.proto", "tensorflow")
    dim = pf.message("TensorShapeProto", ("dim", 2, _F.TYPE_MESSAGE, {"type": "tensorflow.TensorShapeProto.Dim", "repeated": True}),
                     ("unknown_rank", 3, _F.TYPE_BOOL, {}))
    pf.message("Dim", ("size", 1, _F.TYPE_INT64, {}), ("name", 2, _F.TYPE_STRING, {}), parent=dim)
    pf.message("TensorProto", ("dtype", 1, _F.TYPE_INT32, {}), ("tensor_shape", 2, _F.TYPE_MESSAGE, {"type": "TensorShapeProto"}),
               ("version_number", 3, _F.TYPE_INT32, {}), ("tensor_content", 4, _F.TYPE_BYTES, {}),
               ("float_val", 5, _F.TYPE_FLOAT, {"repeated": True}), ("double_val", 6, _F.TYPE_DOUBLE, {"repeated": True}),
               ("int_val", 7, _F.TYPE_INT32, {"repeated": True}), ("string_val", 8, _F.TYPE_BYTES, {"repeated": True}),
               ("scomplex_val", 9, _F.TYPE_FLOAT, {"repeated": True}), ("int64_val", 10, _F.TYPE_INT64, {"repeated": True}),
               ("bool_val", 11, _F.TYPE_BOOL, {"repeated": True}), ("dcomplex_val", 12, _F.TYPE_DOUBLE, {"repeated": True}),
               ("half_val", 13, _F.TYPE_INT32, {"repeated": True}), ("uint32_val", 16, _F.TYPE_UINT32, {"repeated": True}),
               ("uint64_val", 17, _F.TYPE_UINT64, {"repeated": True}))
    pf.message("TensorInfo", ("name", 1, _F.TYPE_STRING, {}), ("dtype", 2, _F.TYPE_INT32, {}),
               ("tensor_shape", 3, _F.TYPE_MESSAGE, {"type": "TensorShapeProto"}))
    pf.message("SignatureDef", ("inputs", 1, _F.TYPE_MESSAGE, {"map": "tensorflow.TensorInfo"}),
               ("outputs", 2, _F.TYPE_MESSAGE, {"map": "tensorflow.TensorInfo"}), ("method_name", 3, _F.TYPE_STRING, {}))
    return pf.fd


def _apis_file() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow_serving/apis/{model,input,classification,regression,predict,get_model_metadata,
    get_model_status}.proto, with their field numbers."""
    pf = _ProtoFile("flowstack/tf_serving_apis.proto", "tensorflow.serving", "flowstack/tf_tensor.proto")
    message = pf.message
    message("Int64Value", ("value", 1, _F.TYPE_INT64, {}))  # google.protobuf.Int64Value's wire form
    message("Any", ("type_url", 1, _F.TYPE_STRING, {}), ("value", 2, _F.TYPE_BYTES, {}))  # google.protobuf.Any's
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
    message("PredictRequest", ("model_spec", 1, _F.TYPE_MESSAGE, {"type": "ModelSpec"}),
            ("inputs", 2, _F.TYPE_MESSAGE, {"map": "tensorflow.TensorProto"}),
            ("output_filter", 3, _F.TYPE_STRING, {"repeated": True}))
    message("PredictResponse", ("outputs", 1, _F.TYPE_MESSAGE, {"map": "tensorflow.TensorProto"}),
            ("model_spec", 2, _F.TYPE_MESSAGE, {"type": "ModelSpec"}))
    message("SignatureDefMap", ("signature_def", 1, _F.TYPE_MESSAGE, {"map": "tensorflow.SignatureDef"}))
    message("GetModelMetadataRequest", ("model_spec", 1, _F.TYPE_MESSAGE, {"type": "ModelSpec"}),
            ("metadata_field", 2, _F.TYPE_STRING, {"repeated": True}))
    message("GetModelMetadataResponse", ("model_spec", 1, _F.TYPE_MESSAGE, {"type": "ModelSpec"}),
            ("metadata", 2, _F.TYPE_MESSAGE, {"map": "Any"}))
    message("StatusProto", ("error_code", 1, _F.TYPE_INT32, {}), ("error_message", 2, _F.TYPE_STRING, {}))
    message("ModelVersionStatus", ("version", 1, _F.TYPE_INT64, {}), ("state", 2, _F.TYPE_INT32, {}),
            ("status", 3, _F.TYPE_MESSAGE, {"type": "StatusProto"}))
    message("GetModelStatusRequest", ("model_spec", 1, _F.TYPE_MESSAGE, {"type": "ModelSpec"}))
    message("GetModelStatusResponse", ("model_version_status", 1, _F.TYPE_MESSAGE,
                                       {"type": "ModelVersionStatus", "repeated": True}))
    return pf.fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_tensor_file())
_POOL.Add(_apis_file())
_TENSOR_INFO = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.TensorInfo"))
_TF_NUMBERS = {name: number for number, name in DATA_TYPES.items()}


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


_VERSION_STATES = {"LOADING": 20, "READY": 30, "UNLOADING": 40}  # ModelVersionStatus.State; any other: END (50)
_ERROR_UNKNOWN = 2  # tensorflow.error.Code UNKNOWN, for a version that failed


def _version(repository, spec) -> str:
    """The version a ModelSpec asks for ("" for the newest), checking its signature name."""
    if spec.signature_name not in ("", "serving_default"):
        raise InvalidRequest(f"unknown signature_name {spec.signature_name!r}; the model serves 'serving_default'")
    chosen = spec.WhichOneof("version_choice")
    if chosen is None:
        return ""
    return str(spec.version.value) if chosen == "version" else repository.version_for_label(spec.name, spec.version_label)


def _answered_spec(name: str, version: str):
    answered = messages("ModelSpec")(name=name, signature_name="serving_default")
    answered.version.value = int(version)
    return answered


def _tensor_info(spec):
    info = _TENSOR_INFO(name=spec.name, dtype=_TF_NUMBERS[datatypes.from_numpy(spec.dtype)])
    for size in spec.shape:
        info.tensor_shape.dim.add(size=size if isinstance(size, int) and size >= 0 else -1)
    return info


class PredictionServicer:
    """PredictionService over ``InferenceCore``: Predict on any model, Classify and Regress on models fed
    tf.Examples, GetModelMetadata; and ModelService's GetModelStatus. A ``ServingError`` becomes its
    gRPC status, any other failure INTERNAL."""

    def __init__(self, core: InferenceCore, max_elements: int):
        self.core = core
        self.max_elements = max_elements

    async def _answer(self, context: grpc.aio.ServicerContext, work):
        try:
            return await work()
        except ServingError as exc:
            await context.abort(exc.grpc_code, str(exc))
        except Exception as exc:  # noqa: BLE001 - any other failure is the server's, reported as such
            await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {clipped(str(exc))}")

    async def _results(self, request, method: str, call: str):
        """The model spec answered and the per-example results of one call."""
        spec = request.model_spec
        mv = self.core.repository.get(spec.name, _version(self.core.repository, spec))
        if not is_example_records_input(mv.inputs, mv.backend.metadata) or len(mv.outputs) != 1:
            raise InvalidRequest(f"{call} needs a model whose one input is serialized tf.Examples and which has "
                                 f"one output; {spec.name!r} takes {[s.name for s in mv.inputs]} and gives "
                                 f"{[s.name for s in mv.outputs]} (use Predict)")
        records = _records(request)
        response = await self.core.infer(records_request(records, mv.inputs[0], spec.name, mv.version_label,
                                                         self.max_elements))
        flat = results_per_example(response.outputs[0], len(records), method, call)
        return _answered_spec(spec.name, mv.version), flat, mv

    async def Classify(self, request, context):
        async def work():
            spec, scores, mv = await self._results(request, "classify", "Classify")
            labels = class_labels(mv.backend.metadata, scores.shape[1])
            result = messages("ClassificationResult")()
            for row in scores.tolist():
                result.classifications.add().classes.extend(
                    messages("Class")(label=label, score=score) for label, score in zip(labels, row))
            return messages("ClassificationResponse")(result=result, model_spec=spec)
        return await self._answer(context, work)

    async def Regress(self, request, context):
        async def work():
            spec, values, _ = await self._results(request, "regress", "Regress")
            result = messages("RegressionResult")()
            result.regressions.extend(messages("Regression")(value=v) for v in values[:, 0].tolist())
            return messages("RegressionResponse")(result=result, model_spec=spec)
        return await self._answer(context, work)

    async def Predict(self, request, context):
        async def work():
            spec = request.model_spec
            version = _version(self.core.repository, spec)
            if not request.inputs:
                raise InvalidRequest("request.inputs is empty; it maps each of the model's input names to a TensorProto")
            expected = {t.name: datatypes.from_numpy(t.dtype) for t in self.core.repository.get(spec.name, version).inputs}
            inputs = []
            for name, proto in request.inputs.items():
                datatype, shape, array = decode_tensor(name, proto, self.max_elements)
                if name in expected and datatype != expected[name]:  # TF Serving's words for the mismatch
                    raise InvalidRequest(f"input {name!r}: expects {datatypes.TF_TYPE_NAMES[expected[name]]}, got "
                                         f"{datatypes.TF_TYPE_NAMES[datatype]}")
                inputs.append(InferInput(name, datatype, shape, array))
            response = await self.core.infer(InferRequest(spec.name, inputs, version, protocol="tfserving",
                                                          outputs=list(request.output_filter) or None))
            answer = messages("PredictResponse")(model_spec=_answered_spec(spec.name, response.model_version))
            for output in response.outputs:
                encode_tensor(output.data, answer.outputs[output.name])
            return answer
        return await self._answer(context, work)

    async def GetModelMetadata(self, request, context):
        async def work():
            fields = list(request.metadata_field)
            if fields != ["signature_def"]:
                raise InvalidRequest(f"metadata_field must be ['signature_def'] (the one TF Serving serves), got {fields}")
            spec = request.model_spec
            mv = self.core.repository.get(spec.name, _version(self.core.repository, spec))
            signatures = messages("SignatureDefMap")()
            signature = signatures.signature_def["serving_default"]
            signature.method_name = "tensorflow/serving/predict"
            for tensors, specs in ((signature.inputs, mv.inputs), (signature.outputs, mv.outputs)):
                for s in specs:
                    tensors[s.name].CopyFrom(_tensor_info(s))
            answer = messages("GetModelMetadataResponse")(model_spec=_answered_spec(spec.name, mv.version))
            packed = answer.metadata["signature_def"]
            packed.type_url = f"type.googleapis.com/{signatures.DESCRIPTOR.full_name}"
            packed.value = signatures.SerializeToString()
            return answer
        return await self._answer(context, work)

    async def GetModelStatus(self, request, context):
        async def work():
            spec = request.model_spec
            repository = self.core.repository
            if spec.name not in repository.model_names():
                repository.get(spec.name)  # raises ModelNotFound naming the models there are
            wanted = _version(repository, spec)
            statuses = [s for s in repository.statuses(spec.name) if not wanted or str(s.version) == wanted]
            if wanted and not statuses:
                raise ModelNotFound(f"model {spec.name!r} has no version {wanted}")
            answer = messages("GetModelStatusResponse")()
            for s in statuses:
                failed = s.state not in _VERSION_STATES and bool(s.reason)
                answer.model_version_status.add(
                    version=int(s.version), state=_VERSION_STATES.get(s.state, 50),
                    status=messages("StatusProto")(error_code=_ERROR_UNKNOWN if failed else 0, error_message=s.reason or ""))
            return answer
        return await self._answer(context, work)


def _handler(method: Callable, request: str, response: str) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(refusing_undecodable(method), request_deserializer=tolerant(messages(request)),
                                               response_serializer=messages(response).SerializeToString)


def prediction_handlers(core: InferenceCore, max_elements: int) -> tuple[Any, Any]:
    """The generic handlers serving ``tensorflow.serving.PredictionService`` and ``ModelService``'s GetModelStatus."""
    servicer = PredictionServicer(core, max_elements)
    prediction = grpc.method_handlers_generic_handler(PREDICTION_SERVICE, {
        call: _handler(getattr(servicer, call), f"{message}Request", f"{message}Response")
        for call, message in (("Classify", "Classification"), ("Regress", "Regression"), ("Predict", "Predict"),
                              ("GetModelMetadata", "GetModelMetadata"))
    })
    model = grpc.method_handlers_generic_handler(MODEL_SERVICE, {
        "GetModelStatus": _handler(servicer.GetModelStatus, "GetModelStatusRequest", "GetModelStatusResponse"),
    })
    return prediction, model
