"""The gRPC front end: KServe v2 ``inference.GRPCInferenceService`` and ``grpc.health.v1.Health``
on a grpc.aio server built by ``create_grpc_server``.

Tensors come in as ``raw_input_contents`` (what tritonclient sends) or typed ``contents``, and go
out as ``raw_output_contents``. The health service's messages are grpcio-health-checking's, and
grpcio-reflection lists the services served (``grpcurl <address> list``).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable

import grpc
import numpy as np
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from serving import datatypes
from serving.classification import class_count
from serving import settings as log_and_trace
from serving.core import InferenceCore, InferInput, InferRequest
from serving.errors import InvalidRequest, ServingError, clipped, shown
from serving.shared_memory import region_ref

log = logging.getLogger("flowstack.serving")

# HTTP's body limit: a 256 MiB default let one 200 MB message take 866 MB at its peak.
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_IDLE_TIMEOUT_S = 300.0
# Pings on a connection quiet this long find a peer that vanished without a FIN (grpc's default
# is two hours, a dead client's connection held that long); one unanswered this long closes it.
KEEPALIVE_TIME_S = 60.0
KEEPALIVE_TIMEOUT_S = 20.0
# At shutdown: how long no new inference call must have come before the server stops.
QUIET_BEFORE_STOP_S = 0.25

# Which InferTensorContents field holds each datatype (FP16 has none: raw only), and the NumPy
# type of that field's values: read as NumPy would guess, UINT64 values past INT64's range beside
# smaller ones would turn into float64.
_CONTENTS_FIELD = {
    "BOOL": ("bool_contents", np.bool_), "INT8": ("int_contents", np.int32), "INT16": ("int_contents", np.int32),
    "INT32": ("int_contents", np.int32), "INT64": ("int64_contents", np.int64), "UINT8": ("uint_contents", np.uint32),
    "UINT16": ("uint_contents", np.uint32), "UINT32": ("uint_contents", np.uint32), "UINT64": ("uint64_contents", np.uint64),
    "FP32": ("fp32_contents", np.float32), "FP64": ("fp64_contents", np.float64), "BYTES": ("bytes_contents", None),
}


@dataclass(frozen=True)
class GrpcSettings:
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    auth_token: str | None = None
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S  # a connection without calls is closed after this
    handshake_timeout_s: float | None = None  # a connection's time to open (TLS, HTTP/2 preface); grpc's 120 s if None
    tls_cert: bytes | None = None  # PEM; with tls_key, the server speaks TLS
    tls_key: bytes | None = None


def _parameter_value(p: pb.InferParameter) -> Any:
    choice = p.WhichOneof("parameter_choice")
    return getattr(p, choice) if choice else None


def decode_infer_request(request: pb.ModelInferRequest, max_elements: int) -> InferRequest:
    """A protobuf ModelInferRequest as an ``InferRequest`` (raises InvalidRequest naming the input)."""
    raw = request.raw_input_contents
    regions = [region_ref(t.name, {k: _parameter_value(v) for k, v in t.parameters.items()}) if t.parameters else None
               for t in request.inputs]
    sent = len(request.inputs) - sum(r is not None for r in regions)  # inputs whose bytes are in the message
    if raw and len(raw) != sent:
        raise InvalidRequest(f"raw_input_contents has {len(raw)} entries for {sent} inputs not in shared memory")
    if not request.inputs:
        raise InvalidRequest("request has no inputs")
    inputs = []
    position = 0
    for tensor, ref in zip(request.inputs, regions):
        name, datatype = tensor.name, tensor.datatype
        datatypes.to_numpy(datatype, name)
        shape = datatypes.check_shape(name, list(tensor.shape), max_elements)
        if ref is not None:
            if tensor.HasField("contents"):
                raise InvalidRequest(f"input {shown(name)}: set either contents or a shared-memory region, not both")
            inputs.append(InferInput(name, datatype, shape, ref))
            continue
        position += 1
        if raw:
            if tensor.HasField("contents"):
                raise InvalidRequest(f"input {shown(name)}: set either contents or raw_input_contents, not both")
            array = datatypes.from_raw(name, datatype, shape, raw[position - 1])
        else:
            field = _CONTENTS_FIELD.get(datatype)
            if field is None:
                raise InvalidRequest(f"input {shown(name)}: datatype {datatype} must be sent in raw_input_contents")
            values = getattr(tensor.contents, field[0])
            data = list(values) if field[1] is None else np.asarray(values, dtype=field[1])
            array = datatypes.from_json(name, datatype, shape, data)
        inputs.append(InferInput(name, datatype, shape, array))
    output_regions, class_counts = {}, {}
    for o in request.outputs:
        if not o.parameters:
            continue
        params = {k: _parameter_value(v) for k, v in o.parameters.items()}
        ref = region_ref(o.name, params) if "shared_memory_region" in params else None
        if ref is not None:
            output_regions[o.name] = ref
        count = class_count(o.name, params)
        if count is not None:
            class_counts[o.name] = count
    return InferRequest(
        model_name=request.model_name,
        inputs=inputs,
        model_version=request.model_version,
        id=request.id,
        outputs=[o.name for o in request.outputs] or None,
        parameters={k: _parameter_value(v) for k, v in request.parameters.items()},
        protocol="grpc",
        output_regions=output_regions,
        shared_memory=sent < len(request.inputs) or bool(output_regions),
        class_counts=class_counts,
        wire_bytes=sum(len(r) for r in raw),
    )


class Undecodable:
    """What ``tolerant`` deserializers give for bytes that are no valid request message.

    A deserializer that raises makes grpc answer UNKNOWN ("Unexpected <class DecodeError>") and
    log a traceback; this lets the method answer INVALID_ARGUMENT instead (``refusing_undecodable``)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def tolerant(message_type: Any) -> Callable[[bytes], Any]:
    """``message_type.FromString``, giving an ``Undecodable`` where that raises."""
    parse = message_type.FromString

    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return Undecodable(f"request is not a valid {message_type.DESCRIPTOR.full_name} message: {exc}")

    return deserialize


def refusing_undecodable(method: Callable) -> Callable:
    """An async unary method that answers INVALID_ARGUMENT for an ``Undecodable`` request."""

    @functools.wraps(method)
    async def call(request, context):
        if type(request) is Undecodable:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        return await method(request, context)

    return call


# (method, its request type, its response type) of inference.GRPCInferenceService served here.
# Every method of inference.GRPCInferenceService is a unary call named after its request and
# response types, except ModelStreamInfer (below).
_INFERENCE_METHODS = [
    "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer", "ModelConfig",
    "ModelStatistics", "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload", "SystemSharedMemoryStatus",
    "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus", "CudaSharedMemoryRegister",
    "CudaSharedMemoryUnregister", "TraceSetting", "LogSettings",
]


def inference_handlers(servicer: InferenceServicer) -> dict[str, grpc.RpcMethodHandler]:
    """What the generated ``add_GRPCInferenceServiceServicer_to_server`` registers, with
    ``tolerant`` deserializers: an undecodable request gets INVALID_ARGUMENT, not UNKNOWN."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            refusing_undecodable(getattr(servicer, name)),
            request_deserializer=tolerant(getattr(pb, name + "Request")),
            response_serializer=getattr(pb, name + "Response").SerializeToString,
        )
        for name in _INFERENCE_METHODS
    }
    handlers["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
        servicer.ModelStreamInfer,
        request_deserializer=tolerant(pb.ModelInferRequest),
        response_serializer=pb.ModelStreamInferResponse.SerializeToString,
    )
    return handlers


def _repository_parameter(p: pb.ModelRepositoryParameter) -> Any:
    choice = p.WhichOneof("parameter_choice")
    return getattr(p, choice) if choice else None


def _setting_value(value: Any) -> Any:
    choice = value.WhichOneof("parameter_choice")
    return getattr(value, choice) if choice else None


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    """Each RPC calls one ``InferenceCore`` method; ``ServingError`` becomes its gRPC status."""

    def __init__(self, core: InferenceCore, settings: GrpcSettings):
        self.core = core
        self.max_elements = settings.max_message_bytes
        # Set while the server prepares to stop (``GrpcFrontEnd.stop``): new inference calls wait
        # on it, started, until grpc has sent its GOAWAY, and are served after.
        self.hold: asyncio.Event | None = None
        self.last_held_at = 0.0  # event-loop time of the last call that came to wait
        self.in_flight = 0  # inference calls being served (not waiting on ``hold``)

    async def _abort(self, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        if isinstance(exc, ServingError):
            await context.abort(exc.grpc_code, str(exc))
        log.exception("unexpected error while handling a gRPC request")
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {clipped(str(exc))}")

    async def _served(self, context: grpc.aio.ServicerContext, compute: Callable[[], Any]) -> Any:
        """``compute()``, awaited where it gives a coroutine; a failure aborts the call with its status."""
        try:
            result = compute()
            return await result if inspect.isawaitable(result) else result
        except Exception as exc:
            await self._abort(context, exc)

    async def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=self.core.live())

    async def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=self.core.ready())

    async def ModelReady(self, request, context):
        ready = await self._served(context, lambda: self.core.model_ready(request.name, request.version))
        return pb.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request, context):
        return pb.ServerMetadataResponse(**self.core.server_metadata())

    async def ModelMetadata(self, request, context):
        meta = await self._served(context, lambda: self.core.model_metadata(request.name, request.version))
        return pb.ModelMetadataResponse(
            name=meta["name"],
            versions=meta["versions"],
            platform=meta["platform"],
            inputs=[pb.ModelMetadataResponse.TensorMetadata(**t) for t in meta["inputs"]],
            outputs=[pb.ModelMetadataResponse.TensorMetadata(**t) for t in meta["outputs"]],
        )

    async def ModelConfig(self, request, context):
        config = await self._served(context, lambda: self.core.model_config(request.name, request.version))
        return pb.ModelConfigResponse(config=json_format.ParseDict(config, pb.ModelConfig(), ignore_unknown_fields=True))

    async def ModelStatistics(self, request, context):
        stats = await self._served(context, lambda: self.core.model_stats(request.name, request.version))
        return json_format.ParseDict(stats, pb.ModelStatisticsResponse(), ignore_unknown_fields=True)

    async def RepositoryIndex(self, request, context):
        rows = self.core.repository_index(ready_only=request.ready)
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**row) for row in rows])

    async def RepositoryModelLoad(self, request, context):
        await self._served(context, lambda: self.core.load_model(
            request.model_name, {k: _repository_parameter(v) for k, v in request.parameters.items()}))
        return pb.RepositoryModelLoadResponse()

    async def RepositoryModelUnload(self, request, context):
        await self._served(context, lambda: self.core.unload_model(request.model_name))
        return pb.RepositoryModelUnloadResponse()

    async def SystemSharedMemoryStatus(self, request, context):
        regions = await self._served(context, lambda: self.core.shared_memory.status(request.name))
        Region = pb.SystemSharedMemoryStatusResponse.RegionStatus
        return pb.SystemSharedMemoryStatusResponse(regions={r["name"]: Region(**r) for r in regions})

    async def SystemSharedMemoryRegister(self, request, context):
        await self._served(context, lambda: self.core.shared_memory.register(
            request.name, request.key, request.offset, request.byte_size))
        return pb.SystemSharedMemoryRegisterResponse()

    async def SystemSharedMemoryUnregister(self, request, context):
        await self._served(context, lambda: self.core.shared_memory.unregister(request.name))
        return pb.SystemSharedMemoryUnregisterResponse()

    async def CudaSharedMemoryStatus(self, request, context):
        await self._served(context, lambda: self.core.cuda_shared_memory_status(request.name))
        return pb.CudaSharedMemoryStatusResponse()

    async def CudaSharedMemoryRegister(self, request, context):
        await self._served(context, lambda: self.core.cuda_shared_memory_register(request.name))
        return pb.CudaSharedMemoryRegisterResponse()

    async def CudaSharedMemoryUnregister(self, request, context):
        await self._served(context, lambda: self.core.cuda_shared_memory_unregister(request.name))
        return pb.CudaSharedMemoryUnregisterResponse()

    async def TraceSetting(self, request, context):
        try:
            changes = {k: list(v.value) for k, v in request.settings.items()}
            current = log_and_trace.update_trace_settings(changes, request.model_name) if changes else log_and_trace.trace_settings(request.model_name)
        except Exception as exc:
            await self._abort(context, exc)
        Value = pb.TraceSettingResponse.SettingValue
        return pb.TraceSettingResponse(settings={k: Value(value=v) for k, v in current.items()})

    async def LogSettings(self, request, context):
        try:
            changes = {k: _setting_value(v) for k, v in request.settings.items()}
            current = log_and_trace.update_log_settings(changes) if changes else log_and_trace.log_settings()
        except Exception as exc:
            await self._abort(context, exc)
        Value = pb.LogSettingsResponse.SettingValue
        kinds = {bool: "bool_param", int: "uint32_param", str: "string_param"}
        return pb.LogSettingsResponse(settings={k: Value(**{kinds[type(v)]: v}) for k, v in current.items()})

    async def ModelStreamInfer(self, request_iterator, context):
        """Each request of the stream answered in order; a failed one as ``error_message`` (the
        stream goes on, as Triton's)."""
        async for request in request_iterator:
            if type(request) is Undecodable:
                yield pb.ModelStreamInferResponse(error_message=request.reason)
                continue
            try:
                infer_request = decode_infer_request(request, self.max_elements)
                infer_request.protocol = "grpc"
                response = await self.core.infer(infer_request)
            except ServingError as exc:
                yield pb.ModelStreamInferResponse(error_message=str(exc))
                continue
            except Exception as exc:
                log.exception("unexpected error while handling a streamed gRPC request")
                yield pb.ModelStreamInferResponse(error_message=f"internal error: {type(exc).__name__}: {clipped(str(exc))}")
                continue
            yield pb.ModelStreamInferResponse(infer_response=encode_infer_response(response))

    async def ModelInfer(self, request, context):
        if self.hold is not None:
            self.last_held_at = asyncio.get_running_loop().time()
            await self.hold.wait()
        try:
            infer_request = decode_infer_request(request, self.max_elements)
        except Exception as exc:
            if isinstance(exc, ServingError):
                self.core.count_refused("grpc", exc)
            await self._abort(context, exc)
        self.in_flight += 1
        try:
            remaining = context.time_remaining()
            if remaining is not None and "timeout" not in infer_request.parameters:
                infer_request.parameters["timeout"] = max(int(remaining * 1e6), 1)
            response = await self.core.infer(infer_request)
        except Exception as exc:
            await self._abort(context, exc)
        finally:
            self.in_flight -= 1
        return encode_infer_response(response)


def encode_infer_response(response) -> pb.ModelInferResponse:
    reply = pb.ModelInferResponse(model_name=response.model_name, model_version=response.model_version, id=response.id)
    for out in response.outputs:
        tensor = reply.outputs.add(name=out.name, datatype=out.datatype, shape=list(out.shape))
        if out.region is not None:
            tensor.parameters["shared_memory_region"].string_param = out.region.region
            tensor.parameters["shared_memory_byte_size"].int64_param = out.region.byte_size
            tensor.parameters["shared_memory_offset"].int64_param = out.region.offset
            reply.raw_output_contents.append(b"")  # keeps each later output at its own index
            continue
        reply.raw_output_contents.append(datatypes.to_raw(out.data))
    return reply


# -- grpc.health.v1.Health and server reflection ----------------------------------------------------
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
INFERENCE_SERVICE = "inference.GRPCInferenceService"
WATCH_POLL_S = 0.5


class HealthServicer(health_pb2_grpc.HealthServicer):
    """SERVING while the core is ready, for the whole server ("") and the inference service;
    NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch) for any other name. The status is read from the
    core on each call rather than kept in grpc_health's own servicer, whose table every change of
    readiness would have to be pushed into."""

    def __init__(self, core: InferenceCore):
        self.core = core

    def status(self, service: str) -> int:
        if service not in ("", INFERENCE_SERVICE):
            return health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        return health_pb2.HealthCheckResponse.SERVING if self.core.ready() else health_pb2.HealthCheckResponse.NOT_SERVING

    async def Check(self, request, context):
        status = self.status(request.service)
        if status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {shown(request.service)}")
        return health_pb2.HealthCheckResponse(status=status)

    async def Watch(self, request, context):
        if type(request) is Undecodable:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
        last = None
        while True:
            status = self.status(request.service)
            if status != last:
                yield health_pb2.HealthCheckResponse(status=status)
                last = status
            await asyncio.sleep(WATCH_POLL_S)


def health_handler(core: InferenceCore) -> grpc.GenericRpcHandler:
    """What ``health_pb2_grpc.add_HealthServicer_to_server`` registers, with ``tolerant``
    deserializers as the inference service's."""
    servicer = HealthServicer(core)
    request, response = tolerant(health_pb2.HealthCheckRequest), health_pb2.HealthCheckResponse.SerializeToString
    return grpc.method_handlers_generic_handler(HEALTH_SERVICE, {
        "Check": grpc.unary_unary_rpc_method_handler(refusing_undecodable(servicer.Check), request_deserializer=request,
                                                     response_serializer=response),
        "Watch": grpc.unary_stream_rpc_method_handler(servicer.Watch, request_deserializer=request,
                                                      response_serializer=response),
    })


# Probes carry no credentials: the health service and the KServe liveness and readiness calls
# are open, as HTTP's /v2/health/live and /v2/health/ready are (``http_app.OPEN_PATHS``).
OPEN_METHODS = frozenset({f"/{INFERENCE_SERVICE}/ServerLive", f"/{INFERENCE_SERVICE}/ServerReady"})


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuse calls without ``authorization: Bearer <token>`` metadata (health probes excepted)."""

    def __init__(self, token: str):
        self.expected = f"Bearer {token}"

        async def deny(request, context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")

        self._deny = grpc.unary_unary_rpc_method_handler(deny, request_deserializer=lambda b: b)

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method in OPEN_METHODS or method.startswith(f"/{HEALTH_SERVICE}/"):
            return await continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        if hmac.compare_digest(str(metadata.get("authorization", "")), self.expected):
            return await continuation(handler_call_details)
        return self._deny


def connection_options(settings: GrpcSettings) -> list[tuple[str, int]]:
    """Channel arguments bounding what an idle, dead or stuck client holds: keepalive pings,
    an idle-connection limit and a handshake limit. Clients may ping as often as every 10 s,
    calls in flight or not (tritonclient's keepalive defaults are within that); faster pingers
    get GOAWAY after grpc's usual strikes."""
    options = [
        ("grpc.keepalive_time_ms", int(KEEPALIVE_TIME_S * 1000)),
        ("grpc.keepalive_timeout_ms", int(KEEPALIVE_TIMEOUT_S * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ]
    if settings.idle_timeout_s is not None:
        options.append(("grpc.max_connection_idle_ms", max(int(settings.idle_timeout_s * 1000), 1)))
    if settings.handshake_timeout_s is not None:
        options.append(("grpc.server_handshake_timeout_ms", max(int(settings.handshake_timeout_s * 1000), 1)))
    return options


class GrpcFrontEnd:
    """The gRPC server, its bound port, and its shutdown: ``await front.server.start()`` inside the
    event loop that will run it; ``await front.stop(deadline)`` to end it."""

    def __init__(self, server: grpc.aio.Server, port: int, servicer: InferenceServicer):
        self.server, self.port, self.servicer = server, port, servicer

    async def stop(self, deadline: float) -> None:
        """Stop by ``deadline`` (event-loop time), cancelling no call a client has sent.

        grpc's ``stop(grace)`` lets the calls under way finish, but cancels those that have arrived
        and not yet started (waiting for the event loop to take them: under load, several a stop)
        and those arriving before its GOAWAY reaches their client. So first every new inference
        call is started and made to wait; once the calls being served have finished and no new
        one has come for a moment (a client waiting for its answer sends no other), the server
        stops, its GOAWAY goes out (clients' later calls find the port closed: sent nowhere), and
        the waiting calls are served within the grace period."""
        loop = asyncio.get_running_loop()
        servicer = self.servicer
        servicer.hold = asyncio.Event()
        servicer.last_held_at = loop.time()
        settle_until = loop.time() + max(0.0, min(2.0, (deadline - loop.time()) / 2))
        while loop.time() < settle_until and (servicer.in_flight or loop.time() - servicer.last_held_at < QUIET_BEFORE_STOP_S):
            await asyncio.sleep(0.005)
        stopping = asyncio.ensure_future(self.server.stop(grace=max(0.0, deadline - loop.time())))
        await asyncio.sleep(0)  # grpc shuts down (no new calls, GOAWAY) in stop's first step
        servicer.hold.set()
        await stopping


def create_grpc_front_end(core: InferenceCore, address: str, settings: GrpcSettings | None = None) -> GrpcFrontEnd:
    """A grpc.aio server for ``core`` bound to ``address`` ("host:port")."""
    settings = settings or GrpcSettings()
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
        *connection_options(settings),
    ]
    interceptors = [BearerTokenInterceptor(settings.auth_token)] if settings.auth_token else []
    server = grpc.aio.server(options=options, interceptors=interceptors)
    servicer = InferenceServicer(core, settings)
    handlers = inference_handlers(servicer)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(INFERENCE_SERVICE, handlers),))
    server.add_registered_method_handlers(INFERENCE_SERVICE, handlers)
    server.add_generic_rpc_handlers((health_handler(core),))
    from serving.tf_serving_grpc import prediction_handlers  # here: that module builds on this one's helpers

    server.add_generic_rpc_handlers(prediction_handlers(core, settings.max_message_bytes))
    reflection.enable_server_reflection((INFERENCE_SERVICE, HEALTH_SERVICE, reflection.SERVICE_NAME), server)
    if settings.tls_cert and settings.tls_key:
        credentials = grpc.ssl_server_credentials([(settings.tls_key, settings.tls_cert)])
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    return GrpcFrontEnd(server, port, servicer)


def create_grpc_server(core: InferenceCore, address: str, settings: GrpcSettings | None = None) -> tuple[grpc.aio.Server, int]:
    """A grpc.aio server for ``core`` bound to ``address`` ("host:port"); returns it and the port.

    Call ``await server.start()`` inside the event loop that will run it.
    """
    front = create_grpc_front_end(core, address, settings)
    return front.server, front.port
