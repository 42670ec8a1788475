"""The HTTP front end: KServe v2 REST (with the binary tensor extension), TensorFlow Serving REST
and Prometheus ``/metrics``, as one Starlette app built by ``create_app`` (behind ``InferFirst``,
which hands KServe inference requests straight to their handler).

Handlers only translate between the wire and ``InferenceCore``; every failure becomes
``{"error": "..."}`` with the status of its ``ServingError`` class.
"""

from __future__ import annotations

import base64
import functools
import hmac
import json
import logging
import zlib
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sized

import numpy as np
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from serving import datatypes
from serving.classification import class_count
from serving import settings as log_and_trace
from serving.core import InferenceCore, InferInput, InferRequest, InferResponse
from serving.errors import InvalidRequest, ModelNotFound, PayloadTooLarge, ServingError, clipped, shown
from serving.json_body import FLOAT_DATATYPES, load_infer_body, load_json_object
from serving.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from serving.shared_memory import region_ref
from serving.tf_examples import class_labels, examples_request, is_example_records_input, results_per_example

log = logging.getLogger("flowstack.serving")

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
HEADER_LENGTH = b"inference-header-content-length"
# Probes must work without credentials.
OPEN_PATHS = frozenset({"/v2/health/live", "/v2/health/ready"})


@dataclass(frozen=True)
class HttpSettings:
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    auth_token: str | None = None

    @property
    def max_elements(self) -> int:
        # No tensor can hold more elements than the body has bytes (plus JSON's worst case of
        # a few bytes per element); anything declaring more is refused before allocation.
        return self.max_request_bytes


# One encoder for every response: json.dumps with non-default separators builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _dumps(doc: Any, *, finite: bool = True) -> bytes:
    """``doc`` as JSON: orjson's writing (15x faster: 0.4 us against 6.8 us for a 10-float answer)
    unless ``finite`` is False. orjson writes NaN and the infinities as null, where the standard
    library writes the NaN/Infinity literals clients of tensor data read back, so documents that
    may hold them say so and take the standard library; so does anything orjson cannot write
    (integers past 64 bits). Either way the same values come out; only number formatting differs
    (orjson writes 6.4e-5 as 0.000064)."""
    if finite:
        try:
            return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # orjson.JSONEncodeError is one
            pass
    return _encode(doc).encode()


def _json(doc: Any, status: int = 200, headers: dict[str, str] | None = None, *, finite: bool = True) -> Response:
    return Response(_dumps(doc, finite=finite), status_code=status, media_type="application/json", headers=headers)


def _error(exc: Exception) -> Response:
    if isinstance(exc, PayloadTooLarge):
        # Refused before its body was read: what remains of the body would be read as the next
        # request (a stray 431 or 400 followed the 413), so the connection ends with this answer.
        return _json({"error": str(exc)}, exc.http_status, {"Connection": "close"})
    if isinstance(exc, ServingError):
        headers = {"Retry-After": str(exc.retry_after_s)} if hasattr(exc, "retry_after_s") else None
        return _json({"error": str(exc)}, exc.http_status, headers)
    if isinstance(exc, ClientDisconnect):
        # The client left mid-body: nobody reads this answer, and it is no server error to log.
        return _json({"error": "client disconnected before sending the whole body"}, 400)
    log.exception("unexpected error while handling a request")
    return _json({"error": f"internal error: {type(exc).__name__}: {clipped(str(exc))}"}, 500)


Handler = Callable[[Request], Awaitable[Response]]
Method = Callable[[Any, Request], Awaitable[Response]]


def _endpoint(handler: Method) -> Method:
    """Turn every exception a handler method raises into an error response: a request never
    takes the server down."""

    @functools.wraps(handler)
    async def wrapped(self: Any, request: Request) -> Response:
        try:
            return await handler(self, request)
        except Exception as exc:
            return _error(exc)

    return wrapped


def _headers(request: Request) -> dict[bytes, bytes]:
    """The raw request headers by lower-case name (the first of repeated ones, as Starlette's
    ``Headers.get``), without Starlette's KeyError per absent header."""
    return dict(reversed(request.scope["headers"]))


async def _read_body(request: Request, limit: int, headers: dict[bytes, bytes]) -> bytes:
    declared = headers.get(b"content-length", b"").decode("latin-1") or None
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes is over the limit of {limit} bytes")
    # ASGI messages read directly: Request.stream() is an async generator, which asyncio
    # registers and finalizes per request (measurable at thousands of requests/s).
    chunks, size = [], 0
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    encoding = headers.get(b"content-encoding", b"").decode("latin-1").lower()
    if encoding in ("gzip", "deflate"):
        return _decompress(body, encoding, limit)
    if encoding not in ("", "identity"):
        raise InvalidRequest(f"unsupported Content-Encoding {shown(encoding)}; use gzip or deflate")
    return body


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """A gzip or deflate body, decompressed to at most ``limit`` bytes. The compressed stream must
    end where the body does (a truncated one would read as a shorter body), except that a gzip
    body may be several members one after another (RFC 1952)."""
    parts, size = [], 0
    while True:
        decompressor = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
        try:
            part = decompressor.decompress(body, limit + 1 - size)
        except zlib.error as exc:
            raise InvalidRequest(f"request body is not valid {encoding} data: {exc}") from None
        size += len(part)
        if size > limit or decompressor.unconsumed_tail:
            raise PayloadTooLarge(f"decompressed request body is over the limit of {limit} bytes")
        if not decompressor.eof:
            raise InvalidRequest(f"request body is not valid {encoding} data: it ends inside the compressed stream")
        parts.append(part)
        body = decompressor.unused_data
        if not body:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if encoding != "gzip":
            raise InvalidRequest(f"request body has {len(body)} bytes after the end of its deflate data")


# -- KServe v2 ---------------------------------------------------------------------------------
def _header_length(value: str, body_size: int) -> int:
    """The Inference-Header-Content-Length ``value``, or InvalidRequest. ASCII digits only:
    ``str.isdigit`` also takes '²' (a latin-1 header byte), which ``int`` refuses; and ``int``
    refuses strings past 4,300 digits, so no more digits than the body's size has are converted."""
    digits = value.lstrip("0") or "0"  # int() counts leading zeros against its limit too
    if value.isascii() and value.isdigit() and len(digits) <= len(str(body_size)):
        length = int(digits)
        if length <= body_size:
            return length
    raise InvalidRequest(f"Inference-Header-Content-Length {shown(value)} is not a length within the {body_size}-byte body")


def parse_kserve_request(
    body: bytes, header_length: str | None, name: str, version: str, max_elements: int
) -> tuple[InferRequest, dict[str, bool]]:
    """Decode a v2 infer request (JSON, or JSON header plus binary tensors); returns the request
    and, per requested output, whether to answer it as binary data."""
    binary = memoryview(b"")
    what = "request body"
    if header_length is not None:
        length = _header_length(header_length, len(body))
        binary = memoryview(body)[length:]
        body = body[:length]
        what = f"JSON header (the first {length} bytes of the body, per Inference-Header-Content-Length)"
    doc = load_infer_body(body, what)
    items = doc.get("inputs")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("request needs a non-empty 'inputs' list")
    inputs, offset, shared = [], 0, False
    for position, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InvalidRequest(f"inputs[{position}] must be an object with a string 'name'")
        tensor = item["name"]
        datatype = item.get("datatype")
        if not isinstance(datatype, str):
            raise InvalidRequest(f"input {shown(tensor)}: missing 'datatype'")
        datatypes.to_numpy(datatype, tensor)
        shape = datatypes.check_shape(tensor, item.get("shape"), max_elements)
        params = item.get("parameters") or {}
        if not isinstance(params, dict):
            raise InvalidRequest(f"input {shown(tensor)}: 'parameters' must be an object")
        size = params.get("binary_data_size")
        ref = region_ref(tensor, params) if "shared_memory_region" in params else None
        if ref is not None:
            if size is not None or "data" in item:
                raise InvalidRequest(f"input {shown(tensor)}: give its data, binary data or a shared-memory region, one only")
            array, shared = ref, True
        elif size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidRequest(f"input {shown(tensor)}: binary_data_size must be a non-negative integer, got {shown(size)}")
            if offset + size > len(binary):
                raise InvalidRequest(
                    f"input {shown(tensor)}: binary_data_size {size} runs past the end of the request "
                    f"({len(binary) - offset} bytes of binary data left)"
                )
            array = datatypes.from_raw(tensor, datatype, shape, binary[offset : offset + size])
            offset += size
        else:
            array = datatypes.from_json(tensor, datatype, shape, item.get("data"))
        inputs.append(InferInput(tensor, datatype, shape, array))
    if offset != len(binary):
        raise InvalidRequest(f"{len(binary) - offset} bytes of binary data after the last input are not claimed by any binary_data_size")
    parameters = doc.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidRequest("'parameters' must be an object")
    default_binary = parameters.get("binary_data_output") is True
    outputs, binary_flags, output_regions, class_counts = None, {}, {}, {}
    requested = doc.get("outputs")
    if requested is not None:
        if not isinstance(requested, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in requested):
            raise InvalidRequest("'outputs' must be a list of objects with a string 'name'")
        # An empty list asks for every output, as no list does (and as gRPC, which cannot tell them apart).
        outputs = [o["name"] for o in requested] or None
        for o in requested:
            params = o.get("parameters") or {}
            if not isinstance(params, dict):
                raise InvalidRequest(f"output {shown(o['name'])}: 'parameters' must be an object")
            binary_flags[o["name"]] = params.get("binary_data", default_binary) is True
            ref = region_ref(o["name"], params) if "shared_memory_region" in params else None
            if ref is not None:
                output_regions[o["name"]] = ref
            count = class_count(o["name"], params)
            if count is not None:
                class_counts[o["name"]] = count
    request_id = doc.get("id", "")
    request = InferRequest(name, inputs, version, request_id if isinstance(request_id, str) else str(request_id),
                           outputs, parameters, protocol="http", output_regions=output_regions,
                           shared_memory=shared or bool(output_regions), class_counts=class_counts)
    return request, binary_flags or {"*": default_binary}


def kserve_response(response: InferResponse, binary_flags: dict[str, bool]) -> InferAnswer:
    outputs, blobs, in_json = [], [], []
    for out in response.outputs:
        entry: dict[str, Any] = {"name": out.name, "datatype": out.datatype, "shape": list(out.shape)}
        if out.region is not None:
            entry["parameters"] = {"shared_memory_region": out.region.region, "shared_memory_byte_size": out.region.byte_size,
                                   "shared_memory_offset": out.region.offset}
        elif binary_flags.get(out.name, binary_flags.get("*", False)):
            raw = datatypes.to_raw(out.data)
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            entry["data"] = datatypes.to_json(out.data)
            in_json.append(out.data)
        outputs.append(entry)
    doc: dict[str, Any] = {"model_name": response.model_name, "model_version": response.model_version, "outputs": outputs}
    if response.id:
        doc["id"] = response.id
    header = _dumps(doc)
    # orjson writes NaN and the infinities as null, and tensor data holds no other null: only a
    # document with one pays for the exact check (1.8 us a request otherwise).
    if b"null" in header and not datatypes.all_finite(in_json):
        header = _dumps(doc, finite=False)
    if not blobs:
        return InferAnswer(header, _JSON_TYPE)
    return InferAnswer(header + b"".join(blobs), _BINARY_TYPE, (b"inference-header-content-length", b"%d" % len(header)))


_JSON_TYPE = (b"content-type", b"application/json")
_BINARY_TYPE = (b"content-type", b"application/octet-stream")


class InferAnswer:
    """A 200 answer to an infer request as two ASGI messages, its headers built directly: what
    Starlette's ``Response`` does, less its header parsing and background-task handling (~2 us of
    the ~140 us a batched request costs the server)."""

    __slots__ = ("body", "raw_headers")

    def __init__(self, body: bytes, content_type: tuple[bytes, bytes], *extra: tuple[bytes, bytes]):
        self.body = body
        self.raw_headers = [(b"content-length", b"%d" % len(body)), content_type, *extra]

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})


# -- TensorFlow Serving REST -------------------------------------------------------------------
def parse_tf_predict(doc: dict, specs, name: str, version: str, max_elements: int) -> tuple[InferRequest, bool]:
    """Decode a TF Serving predict body (row ``instances`` or columnar ``inputs``); returns the
    request and whether the answer goes back in row format. A string value may be given as
    ``{"b64": "<base64>"}``, TF Serving's form for binary values; such an object is a value, never
    an object keyed by input name."""
    if ("instances" in doc) == ("inputs" in doc):
        raise InvalidRequest("request must have exactly one of 'instances' (row format) or 'inputs' (columnar format)")
    names = [s.name for s in specs]
    row = "instances" in doc
    if row:
        instances = doc["instances"]
        if not isinstance(instances, list) or not instances:
            raise InvalidRequest("'instances' must be a non-empty list")
        if all(isinstance(i, dict) and not _is_b64(i) for i in instances):
            for position, instance in enumerate(instances):
                if set(instance) != set(names):
                    raise InvalidRequest(f"instances[{position}] has keys {shown(sorted(instance))}; the model's inputs are {names}")
            columns = {n: [i[n] for i in instances] for n in names}
        elif len(names) == 1:
            columns = {names[0]: instances}
        else:
            raise InvalidRequest(f"the model has inputs {names}: each instance must be an object keyed by input name")
    else:
        value = doc["inputs"]
        if isinstance(value, dict) and not _is_b64(value):
            columns = value
        elif len(names) == 1:
            columns = {names[0]: value}
        else:
            raise InvalidRequest(f"the model has inputs {names}: 'inputs' must be an object keyed by input name")
    inputs = []
    by_name = {s.name: s for s in specs}
    for tensor, value in columns.items():
        spec = by_name.get(tensor)
        if spec is None:
            raise InvalidRequest(f"unknown input {shown(tensor)}; the model's inputs are {names}")
        datatype = datatypes.from_numpy(spec.dtype)
        if datatype == "BYTES":
            array = datatypes.bytes_from_json(tensor, value, b64=True)
            shape = datatypes.check_shape(tensor, list(array.shape), max_elements)
        else:
            try:
                shape = np.shape(value)
            except (ValueError, TypeError) as exc:
                raise InvalidRequest(f"input {shown(tensor)}: not a regular array: {exc}") from None
            shape = datatypes.check_shape(tensor, list(shape), max_elements)
            if datatype in FLOAT_DATATYPES:
                value = np.asarray(value, dtype=np.float64) if _is_numeric(value) else value
            array = datatypes.from_json(tensor, datatype, shape, value)
        inputs.append(InferInput(tensor, datatype, shape, array))
    check_signature(doc)
    return InferRequest(name, inputs, version, protocol="tfserving"), row


def check_signature(doc: dict) -> None:
    """A TF Serving body's ``signature_name``: a .flow serves one signature, ``serving_default``."""
    signature = doc.get("signature_name", "serving_default")
    if signature != "serving_default":
        raise InvalidRequest(f"unknown signature_name {shown(signature)}; the model serves 'serving_default'")


def _is_b64(value: dict) -> bool:
    # TF Serving takes an object whose one key is "b64" for a binary value (its string-valued check
    # is left to the decoder, whose error says what is wrong with it).
    return len(value) == 1 and "b64" in value


def _is_numeric(value: Any) -> bool:
    try:
        return np.asarray(value).dtype.kind in "iuf"  # booleans are left for from_json to refuse
    except (ValueError, TypeError):
        return False


def tf_predict_response(response: InferResponse, row: bool) -> dict:
    outputs = {o.name: _tf_json(o.name, o.data) for o in response.outputs}
    if len(outputs) == 1:
        (value,) = outputs.values()
        return {"predictions" if row else "outputs": value}
    if not row:
        return {"outputs": outputs}
    rows = {o.data.shape[0] if o.data.ndim else None for o in response.outputs}
    if len(rows) != 1 or None in rows:
        # TF Serving refuses such a model's row answer the same way (each prediction is one row of
        # every output); the columnar format can carry it.
        shapes = {o.name: list(o.data.shape) for o in response.outputs}
        raise InvalidRequest(f"the row format ('instances') needs every output to have the same first dimension, "
                             f"got shapes {shapes}; send 'inputs' (the columnar format) instead")
    (count,) = rows
    return {"predictions": [{n: v[i] for n, v in outputs.items()} for i in range(count)]}


def _tf_json(name: str, array: np.ndarray) -> Any:
    """An output as nested lists, as TF Serving writes it. A string output whose name ends in
    ``_bytes`` is binary to TF Serving: each value goes out as ``{"b64": "<base64>"}``. Other
    strings go out as text, except values that are not UTF-8, which no JSON string can hold
    (TF Serving writes their bytes as they are, making the body invalid JSON): those go out as
    ``{"b64": ...}`` too, so every answer reads as JSON and every value comes back exactly."""
    if array.dtype.kind not in "OSU":
        return array.tolist()
    encode = _b64_object if name.endswith("_bytes") else _text_or_b64
    return np.vectorize(encode, otypes=[object])(array).tolist()


def _b64_object(value: Any) -> dict:
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")
    return {"b64": base64.b64encode(raw).decode("ascii")}


def _text_or_b64(value: Any) -> Any:
    if not isinstance(value, bytes):
        return str(value)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return _b64_object(value)


# -- the app -------------------------------------------------------------------------------------
class BearerTokenMiddleware:
    """Refuse requests without ``Authorization: Bearer <token>`` (health probes excepted)."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = _json({"error": "missing or invalid bearer token"}, 401, {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CloseWhileDraining:
    """ASGI: once the server is shutting down, every response carries ``Connection: close``, so a
    client takes its next request to a new connection (another server's, once this one is out of
    its load balancer) instead of one this server is about to close. Costs one attribute read a
    request until then."""

    def __init__(self, app: Callable, core: InferenceCore):
        self.app = app
        self.core = core

    def __call__(self, scope, receive, send) -> Awaitable[None]:
        # Not a coroutine function: serving, it hands back the app's own coroutine, adding no frame
        # to every request (uvicorn is told the interface is ASGI 3).
        if not self.core.draining or scope["type"] != "http":
            return self.app(scope, receive, send)
        return self._closing(scope, receive, send)

    async def _closing(self, scope, receive, send) -> None:
        async def closing(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing)


class InferFirst:
    """ASGI: POST requests on the KServe infer routes go straight to their handler; everything else
    to ``app``, the Starlette app that also holds those routes (for their 405s and for the record).

    Starlette's router, its two exception middlewares and the request/response wrapper cost about
    15 us a request, a fifth of the app's own time per inference (in-process, 64 concurrent
    requests: 89-95 -> 74-75 us). The handler needs none of them: ``_endpoint`` already turns every
    exception into an error response.
    """

    def __init__(self, app: Callable, routes: list[Route], handler: Handler):
        self.app = app
        self.patterns = [route.path_regex for route in routes]
        self.handler = handler

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            for pattern in self.patterns:
                match = pattern.match(scope["path"])
                if match is not None:
                    scope["path_params"] = match.groupdict()
                    response = await self.handler(Request(scope, receive))
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class HttpHandlers:
    """One method per endpoint, each translating between HTTP and ``core`` (``route_table`` maps
    paths to them)."""

    def __init__(self, core: InferenceCore, settings: HttpSettings, requests_in_progress: Sized | None = None):
        self.core = core
        self.settings = settings
        # The requests the HTTP server has received and not yet answered, this one included
        # (uvicorn's task set), where known: one alone need not wait for company (``InferRequest.alone``).
        self.requests_in_progress = requests_in_progress

    def alone(self) -> bool:
        """Whether the request being handled is the only one the HTTP server holds."""
        in_progress = self.requests_in_progress
        return in_progress is not None and len(in_progress) == 1

    def version_of(self, request: Request) -> str:
        label = request.path_params.get("label")
        if label is not None:  # TF Serving's /labels/{label}
            return self.core.repository.version_for_label(request.path_params["name"], label)
        return request.path_params.get("version", "")

    @_endpoint
    async def live(self, request: Request) -> Response:
        return _json({"live": self.core.live()})

    @_endpoint
    async def ready(self, request: Request) -> Response:
        ok = self.core.ready()
        return _json({"ready": ok}, 200 if ok else 503)

    @_endpoint
    async def server_metadata(self, request: Request) -> Response:
        return _json(self.core.server_metadata())

    @_endpoint
    async def model_metadata(self, request: Request) -> Response:
        return _json(self.core.model_metadata(request.path_params["name"], self.version_of(request)))

    @_endpoint
    async def model_ready(self, request: Request) -> Response:
        ok = self.core.model_ready(request.path_params["name"], self.version_of(request))
        return _json({"name": request.path_params["name"], "ready": ok}, 200 if ok else 400)

    @_endpoint
    async def model_config(self, request: Request) -> Response:
        return _json(self.core.model_config(request.path_params["name"], self.version_of(request)))

    @_endpoint
    async def model_stats(self, request: Request) -> Response:
        return _json(self.core.model_stats(request.path_params.get("name", ""), self.version_of(request)))

    async def optional_json(self, request: Request) -> dict:
        body = await _read_body(request, self.settings.max_request_bytes, _headers(request))
        return load_json_object(body) if body.strip() else {}

    @_endpoint
    async def repository_index(self, request: Request) -> Response:
        doc = await self.optional_json(request) if request.method == "POST" else {}
        return _json(self.core.repository_index(ready_only=doc.get("ready") is True))

    @_endpoint
    async def repository_load(self, request: Request) -> Response:
        doc = await self.optional_json(request)
        parameters = doc.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise InvalidRequest("'parameters' must be an object")
        await self.core.load_model(request.path_params["name"], parameters)
        return Response(b"", status_code=200)

    @_endpoint
    async def shm_register(self, request: Request) -> Response:
        doc = await self.optional_json(request)
        self.core.shared_memory.register(request.path_params["region"], doc.get("key"), doc.get("offset", 0), doc.get("byte_size"))
        return Response(b"", status_code=200)

    @_endpoint
    async def shm_unregister(self, request: Request) -> Response:
        self.core.shared_memory.unregister(request.path_params.get("region", ""))
        return Response(b"", status_code=200)

    @_endpoint
    async def shm_status(self, request: Request) -> Response:
        return _json(self.core.shared_memory.status(request.path_params.get("region", "")))

    @_endpoint
    async def cuda_shm_register(self, request: Request) -> Response:
        self.core.cuda_shared_memory_register(request.path_params["region"])
        return Response(b"", status_code=200)

    @_endpoint
    async def cuda_shm_unregister(self, request: Request) -> Response:
        self.core.cuda_shared_memory_unregister(request.path_params.get("region", ""))
        return Response(b"", status_code=200)

    @_endpoint
    async def cuda_shm_status(self, request: Request) -> Response:
        return _json(self.core.cuda_shared_memory_status(request.path_params.get("region", "")))

    @_endpoint
    async def logging_settings(self, request: Request) -> Response:
        if request.method == "POST":
            return _json(log_and_trace.update_log_settings(await self.optional_json(request)))
        return _json(log_and_trace.log_settings())

    @_endpoint
    async def trace_settings(self, request: Request) -> Response:
        model = request.path_params.get("name", "")
        if request.method == "POST":
            changes = {k: (v if isinstance(v, list) else [v]) for k, v in (await self.optional_json(request)).items()}
            current = log_and_trace.update_trace_settings(changes, model)
        else:
            current = log_and_trace.trace_settings(model)
        # Triton's HTTP form: trace_level a list, every other setting one string.
        return _json({k: (v if k == "trace_level" else (v[0] if v else "")) for k, v in current.items()})

    @_endpoint
    async def repository_unload(self, request: Request) -> Response:
        await self.optional_json(request)  # {"parameters": {"unload_dependents": ...}}: no model depends on another
        await self.core.unload_model(request.path_params["name"])
        return Response(b"", status_code=200)

    @_endpoint
    async def infer(self, request: Request) -> Response:
        headers = _headers(request)
        try:
            body = await _read_body(request, self.settings.max_request_bytes, headers)
            header_length = headers.get(HEADER_LENGTH)
            infer_request, binary_flags = parse_kserve_request(
                body, None if header_length is None else header_length.decode("latin-1"), request.path_params["name"],
                self.version_of(request), self.settings.max_elements,
            )
            infer_request.wire_bytes = len(body)
            infer_request.alone = self.alone()
        except ServingError as exc:
            self.core.count_refused("http", exc)
            raise
        return kserve_response(await self.core.infer(infer_request), binary_flags)

    @_endpoint
    async def tf_status(self, request: Request) -> Response:
        name, wanted = request.path_params["name"], self.version_of(request)
        if name not in self.core.repository.model_names():
            self.core.repository.get(name)  # raises ModelNotFound naming the models there are
        statuses = [s for s in self.core.repository.statuses(name) if not wanted or str(s.version) == wanted]
        if wanted and not statuses:
            raise ModelNotFound(f"model {name!r} has no version {shown(wanted)}")
        return _json({"model_version_status": [
            {
                "version": str(s.version),
                "state": {"READY": "AVAILABLE", "LOADING": "LOADING"}.get(s.state, "END"),
                "status": {"error_code": "OK" if s.state == "READY" else "UNKNOWN", "error_message": s.reason},
            }
            for s in statuses
        ]})

    @_endpoint
    async def tf_metadata(self, request: Request) -> Response:
        meta = self.core.model_metadata(request.path_params["name"], self.version_of(request))

        def info(tensors):
            return {t["name"]: {"dtype": datatypes.TF_TYPE_NAMES.get(t["datatype"], t["datatype"]),
                                "tensor_shape": {"dim": [{"size": str(d)} for d in t["shape"]]},
                                "name": t["name"]} for t in tensors}

        return _json({
            "model_spec": {"name": meta["name"], "version": meta["versions"][-1] if meta["versions"] else ""},
            "metadata": {"signature_def": {"signature_def": {"serving_default": {
                "inputs": info(meta["inputs"]), "outputs": info(meta["outputs"]), "method_name": "tensorflow/serving/predict",
            }}}},
        })

    @_endpoint
    async def tf_predict(self, request: Request) -> Response:
        name, version = request.path_params["name"], self.version_of(request)
        try:
            mv = self.core.repository.get(name, version)
            doc = load_json_object(await _read_body(request, self.settings.max_request_bytes, _headers(request)))
            infer_request, row = parse_tf_predict(doc, mv.inputs, name, version, self.settings.max_elements)
            infer_request.alone = self.alone()
        except ServingError as exc:
            self.core.count_refused("tfserving", exc)
            raise
        response = await self.core.infer(infer_request)
        return _json(tf_predict_response(response, row), finite=datatypes.all_finite(o.data for o in response.outputs))

    async def tf_examples(self, request: Request, method: str) -> Response:
        """TF Serving's :classify and :regress over a predict model: each of ``examples`` (merged
        with ``context``) is one row of inputs, or one serialized tf.Example for a model whose one
        input is a batch of them (serving/tf_examples.py); the model's one output gives each row's scores
        (classify: [label, score] pairs, labels from the model's ``labels`` metadata, else the
        class index) or value (regress)."""
        name, version = request.path_params["name"], self.version_of(request)
        try:
            mv = self.core.repository.get(name, version)
            doc = load_json_object(await _read_body(request, self.settings.max_request_bytes, _headers(request)))
            examples, context = doc.get("examples"), doc.get("context") or {}
            if not isinstance(examples, list) or not examples or not all(isinstance(e, dict) for e in examples):
                raise InvalidRequest(f":{method} needs 'examples', a non-empty list of objects of feature -> value")
            if not isinstance(context, dict):
                raise InvalidRequest("'context' must be an object of feature -> value")
            if len(mv.outputs) != 1:
                raise InvalidRequest(f":{method} needs a model with one output; {name!r} has {[s.name for s in mv.outputs]} "
                                     "(use :predict)")
            if is_example_records_input(mv.inputs, mv.backend.metadata):  # as TF Serving feeds such a model
                check_signature(doc)
                infer_request = examples_request(examples, context, mv.inputs[0], name, version,
                                                 self.settings.max_elements)
            else:
                predict = {"instances": [{**context, **example} for example in examples]}
                if "signature_name" in doc:
                    predict["signature_name"] = doc["signature_name"]
                infer_request, _ = parse_tf_predict(predict, mv.inputs, name, version, self.settings.max_elements)
        except ServingError as exc:
            self.core.count_refused("tfserving", exc)
            raise
        response = await self.core.infer(infer_request)
        flat = results_per_example(response.outputs[0], len(examples), method, f":{method}")
        if method == "regress":
            return _json({"results": flat[:, 0].tolist()}, finite=bool(np.isfinite(flat).all()))
        labels = class_labels(mv.backend.metadata, flat.shape[1])
        results = [[[label, score] for label, score in zip(labels, row)] for row in flat.tolist()]
        return _json({"results": results}, finite=bool(np.isfinite(flat).all()))

    @_endpoint
    async def tf_classify(self, request: Request) -> Response:
        return await self.tf_examples(request, "classify")

    @_endpoint
    async def tf_regress(self, request: Request) -> Response:
        return await self.tf_examples(request, "regress")

    @_endpoint
    async def metrics(self, request: Request) -> Response:
        return Response(self.core.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})


async def not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    where = clipped(f"{request.method} {request.url.path}")
    return _json({"error": f"{where}: {getattr(exc, 'detail', 'not found')}"}, status)


def route_table(h: HttpHandlers) -> list[Route]:
    """Every HTTP route. The router tries them in order, so the inference routes come first: a
    request for one then pays for one path match instead of ten (``InferFirst`` takes the first two
    without the router)."""
    return [
        # KServe v2 inference
        Route("/v2/models/{name}/infer", h.infer, methods=["POST"]),
        Route("/v2/models/{name}/versions/{version}/infer", h.infer, methods=["POST"]),
        # TensorFlow Serving predict, classify and regress
        Route("/v1/models/{name}:predict", h.tf_predict, methods=["POST"]),
        Route("/v1/models/{name}/versions/{version}:predict", h.tf_predict, methods=["POST"]),
        Route("/v1/models/{name}/labels/{label}:predict", h.tf_predict, methods=["POST"]),
        Route("/v1/models/{name}:classify", h.tf_classify, methods=["POST"]),
        Route("/v1/models/{name}:regress", h.tf_regress, methods=["POST"]),
        Route("/v1/models/{name}/versions/{version}:classify", h.tf_classify, methods=["POST"]),
        Route("/v1/models/{name}/versions/{version}:regress", h.tf_regress, methods=["POST"]),
        Route("/v1/models/{name}/labels/{label}:classify", h.tf_classify, methods=["POST"]),
        Route("/v1/models/{name}/labels/{label}:regress", h.tf_regress, methods=["POST"]),
        # KServe v2 health and server metadata
        Route("/v2/health/live", h.live, methods=["GET"]),
        Route("/v2/health/ready", h.ready, methods=["GET"]),
        Route("/v2", h.server_metadata, methods=["GET"]),
        Route("/v2/models/stats", h.model_stats, methods=["GET"]),
        # Triton's model repository extension
        Route("/v2/repository/index", h.repository_index, methods=["GET", "POST"]),
        Route("/v2/repository/models/{name}/load", h.repository_load, methods=["POST"]),
        Route("/v2/repository/models/{name}/unload", h.repository_unload, methods=["POST"]),
        # Triton's system and CUDA shared memory extensions
        Route("/v2/systemsharedmemory/status", h.shm_status, methods=["GET"]),
        Route("/v2/systemsharedmemory/region/{region}/status", h.shm_status, methods=["GET"]),
        Route("/v2/systemsharedmemory/region/{region}/register", h.shm_register, methods=["POST"]),
        Route("/v2/systemsharedmemory/region/{region}/unregister", h.shm_unregister, methods=["POST"]),
        Route("/v2/systemsharedmemory/unregister", h.shm_unregister, methods=["POST"]),
        Route("/v2/cudasharedmemory/status", h.cuda_shm_status, methods=["GET"]),
        Route("/v2/cudasharedmemory/region/{region}/status", h.cuda_shm_status, methods=["GET"]),
        Route("/v2/cudasharedmemory/region/{region}/register", h.cuda_shm_register, methods=["POST"]),
        Route("/v2/cudasharedmemory/region/{region}/unregister", h.cuda_shm_unregister, methods=["POST"]),
        Route("/v2/cudasharedmemory/unregister", h.cuda_shm_unregister, methods=["POST"]),
        # Triton's logging and trace extensions
        Route("/v2/logging", h.logging_settings, methods=["GET", "POST"]),
        Route("/v2/trace/setting", h.trace_settings, methods=["GET", "POST"]),
        Route("/v2/models/{name}/trace/setting", h.trace_settings, methods=["GET", "POST"]),
        # KServe v2 model metadata, readiness; Triton's config and statistics
        Route("/v2/models/{name}", h.model_metadata, methods=["GET"]),
        Route("/v2/models/{name}/ready", h.model_ready, methods=["GET"]),
        Route("/v2/models/{name}/config", h.model_config, methods=["GET"]),
        Route("/v2/models/{name}/stats", h.model_stats, methods=["GET"]),
        Route("/v2/models/{name}/versions/{version}", h.model_metadata, methods=["GET"]),
        Route("/v2/models/{name}/versions/{version}/ready", h.model_ready, methods=["GET"]),
        Route("/v2/models/{name}/versions/{version}/config", h.model_config, methods=["GET"]),
        Route("/v2/models/{name}/versions/{version}/stats", h.model_stats, methods=["GET"]),
        # TensorFlow Serving metadata and status
        Route("/v1/models/{name}/metadata", h.tf_metadata, methods=["GET"]),
        Route("/v1/models/{name}/versions/{version}/metadata", h.tf_metadata, methods=["GET"]),
        Route("/v1/models/{name}/labels/{label}/metadata", h.tf_metadata, methods=["GET"]),
        Route("/v1/models/{name}", h.tf_status, methods=["GET"]),
        Route("/v1/models/{name}/versions/{version}", h.tf_status, methods=["GET"]),
        Route("/v1/models/{name}/labels/{label}", h.tf_status, methods=["GET"]),
        # Prometheus
        Route("/metrics", h.metrics, methods=["GET"]),
    ]


def create_app(core: InferenceCore, settings: HttpSettings | None = None, requests_in_progress: Sized | None = None) -> Callable:
    """The ASGI app serving ``core`` over HTTP; ``requests_in_progress``, where given, holds one
    item per request its server has received and not yet answered (uvicorn's ``ServerState.tasks``).

    >>> import tempfile
    >>> from serving.repository import ModelRepository
    >>> models = tempfile.TemporaryDirectory()
    >>> core = InferenceCore(ModelRepository(models.name))
    >>> app = create_app(core, HttpSettings(auth_token="s3cret"))  # what uvicorn serves
    >>> [route.path for route in route_table(HttpHandlers(core, HttpSettings()))][:3]
    ['/v2/models/{name}/infer', '/v2/models/{name}/versions/{version}/infer', '/v1/models/{name}:predict']
    >>> models.cleanup()
    """
    settings = settings or HttpSettings()
    handlers = HttpHandlers(core, settings, requests_in_progress)
    routes = route_table(handlers)
    app = InferFirst(Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found}), routes[:2], handlers.infer)
    if settings.auth_token:
        app = BearerTokenMiddleware(app, token=settings.auth_token)
    return CloseWhileDraining(app, core)
