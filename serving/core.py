"""``InferenceCore``: the one data plane behind every protocol.

Front ends translate their wire format into an ``InferRequest`` (arrays already decoded) and call
``await core.infer(request)``; validation against the model, batching, statistics and metrics
all happen here, so REST, gRPC and TensorFlow Serving REST can never disagree.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable

import numpy as np

from serving import datatypes, handoff
from serving.errors import InvalidRequest, ServingError, ShuttingDown, Unsupported, VersionRetired, shown
from serving.classification import labels_of, top_classes
from serving.ensemble import Step
from serving.repository import MAX_ENSEMBLE_DEPTH, ModelRepository, ModelVersion, parse_version, validate_name
from serving.shared_memory import RegionRef, SharedMemoryRegistry

SERVER_NAME = "flowstack"
SERVER_VERSION = "0.1.0"
# A request this large leaves its buffers' pages with malloc: the server trims them back to the
# system a moment after answering it (``FreedMemoryReturner``), once the front end has let go.
LARGE_REQUEST_BYTES = 16 << 20
LARGE_REQUEST_TRIM_DELAY_S = 0.5
# The protocols whose lone requests may run in the event loop (``DynamicBatcher.run_alone``). Not
# gRPC: grpc.aio hands the loop one call a turn, so under load each came alone, and ran in the
# loop that is its bottleneck (concurrency 64: mean batch 1.5 -> 1.1, CPU a request 414 -> 500 us).
RUN_ALONE_PROTOCOLS = frozenset({"http", "tfserving"})
EXTENSIONS = ["binary_tensor_data", "model_repository", "model_repository(unload_dependents)", "statistics",
              "system_shared_memory", "logging", "tensorflow_serving_rest"]


@dataclass
class InferInput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray | RegionRef  # a RegionRef: read from system shared memory by the core


@dataclass
class InferOutput:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray
    region: RegionRef | None = None  # written there (its byte_size: the bytes written), not sent


@dataclass
class InferRequest:
    model_name: str
    inputs: list[InferInput]
    model_version: str = ""
    id: str = ""
    outputs: list[str] | None = None  # None: every output
    parameters: dict[str, Any] = field(default_factory=dict)
    protocol: str = "http"
    output_regions: dict[str, RegionRef] = field(default_factory=dict)  # outputs to write to shared memory
    shared_memory: bool = False  # some input or output is a shared-memory region (set by the front end)
    class_counts: dict[str, int] = field(default_factory=dict)  # outputs answered as their top classes
    wire_bytes: int = 0  # the request's size as received (set by the front end)
    # The front end holds no other request (received and not yet answered), so that one which
    # may run alone need not wait a loop iteration for company (``handoff.submit``'s ``alone``).
    alone: bool = False


@dataclass
class InferResponse:
    model_name: str
    model_version: str
    outputs: list[InferOutput]
    id: str = ""


def tensor_metadata(spec) -> dict:
    return {"name": spec.name, "datatype": datatypes.from_numpy(spec.dtype), "shape": list(spec.shape)}


class InferenceCore:
    """Health, metadata and inference over one ``ModelRepository``."""

    def __init__(self, repository: ModelRepository):
        self.repository = repository
        self.metrics = repository.metrics
        # (protocol, status) -> bound metric series of requests that reached no model; those of a
        # model version live on its ``request_series``, and go with it.
        self._series: dict[tuple, tuple] = {}
        # Set when shutdown begins: readiness turns false while in-flight requests finish.
        self.draining = False
        self.shared_memory = SharedMemoryRegistry()

    # -- health and metadata -------------------------------------------------------------------
    def live(self) -> bool:
        return True

    def ready(self) -> bool:
        return not self.draining and self.repository.ready()

    def model_ready(self, name: str, version: str = "") -> bool:
        """Whether the model (version) is ready; a name or version no model could have is an
        ``InvalidRequest`` (HTTP 400, gRPC INVALID_ARGUMENT), not a plain no."""
        if name not in self.repository.model_names():
            validate_name(name)
        parse_version(version)
        return not self.draining and self.repository.is_ready(name, version)

    def server_metadata(self) -> dict:
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": EXTENSIONS}

    def model_metadata(self, name: str, version: str = "") -> dict:
        mv = self.repository.get(name, version)
        return {
            "name": name,
            "versions": [str(v) for v in self.repository.versions(name)],
            "platform": mv.backend.platform,
            "inputs": [tensor_metadata(s) for s in mv.inputs],
            "outputs": [tensor_metadata(s) for s in mv.outputs],
        }

    def model_config(self, name: str, version: str = "") -> dict:
        """The model's configuration in Triton's JSON form (what perf_analyzer reads)."""
        mv = self.repository.get(name, version)
        batched = mv.max_batch_size > 0

        def tensors(specs):
            return [
                {
                    "name": s.name,
                    "data_type": datatypes.CONFIG_TYPE_NAMES[datatypes.from_numpy(s.dtype)],
                    "dims": list(s.shape[1:] if batched else s.shape),
                }
                for s in specs
            ]

        config = {
            "name": name,
            "platform": mv.backend.platform,
            "version_policy": mv.config.version_policy.to_json(),
            "max_batch_size": mv.max_batch_size,
            "input": tensors(mv.inputs),
            "output": tensors(mv.outputs),
        }
        if mv.pipeline is not None:  # Triton's ensemble: its steps, no backend or instances of its own
            return {**config, **mv.pipeline.config_json()}
        config.update({
            "backend": "flowstack",
            "instance_group": [{"count": mv.config.instances, "kind": "KIND_GPU" if self.repository.device == "gpu" else "KIND_CPU"}],
            # The exporter's "source" is a path on the machine that exported the model: only its name is served.
            "parameters": {k: {"string_value": os.path.basename(v) if k == "source" else v} for k, v in mv.backend.metadata.items()},
        })
        if batched:
            config["dynamic_batching"] = {
                "preferred_batch_size": list(mv.config.preferred_batch_sizes),
                "max_queue_delay_microseconds": mv.config.max_queue_delay_us,
                "default_queue_policy": {"max_queue_size": mv.config.max_queue_size},
            }
        return config

    def model_stats(self, name: str = "", version: str = "") -> dict:
        names = [name] if name else self.repository.model_names()
        stats = []
        if name and name not in self.repository.model_names():
            self.repository.get(name)  # raises ModelNotFound naming the models there are
        for model in names:
            if version:
                targets = [self.repository.get(model, version)]
            else:
                targets = [self.repository.get(model, str(v)) for v in self.repository.versions(model)]
            stats.extend(mv.stats.to_json(model, mv.version) for mv in targets)
        return {"model_stats": stats}

    # -- model repository (explicit control) ----------------------------------------------------
    def repository_index(self, ready_only: bool = False) -> list[dict]:
        rows = self.repository.index()
        return [row for row in rows if row["state"] == "READY"] if ready_only else rows

    async def load_model(self, name: str, parameters: dict[str, Any] | None = None) -> None:
        """Triton's load: ``parameters`` may hold ``config``, a JSON string of config.json's fields
        that replaces the file's for this load."""
        config = _config_override(name, parameters or {})
        await asyncio.get_running_loop().run_in_executor(None, self.repository.load_model, name, config)

    async def unload_model(self, name: str) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.repository.unload_model, name)

    # -- inference -----------------------------------------------------------------------------
    async def infer(self, request: InferRequest) -> InferResponse:
        """Validate, queue, run and answer one request; raises a ``ServingError`` subclass."""
        start = time.perf_counter()
        status = "success"
        mv: ModelVersion | None = None
        rows = 1
        try:
            if request.shared_memory:
                self._read_regions(request)
            for attempt in range(3):
                mv = self.repository.get(request.model_name, request.model_version)
                feeds, rows = self._validate(mv, request)
                try:
                    timeout_s = _timeout_s(request.parameters) if request.parameters else None
                    outputs = await self._execute(mv, feeds, rows, timeout_s,
                                                  may_run_alone=request.protocol in RUN_ALONE_PROTOCOLS,
                                                  alone=request.alone)
                except VersionRetired:
                    continue  # swapped out between lookup and submit: the new version takes it
                break
            else:
                raise ShuttingDown(f"model {request.model_name!r} is being unloaded")
            return self._response(mv, request, outputs)
        except ServingError as exc:
            status = type(exc).__name__
            raise
        except ValueError as exc:  # the runtime's own checks, e.g. a shape a kernel cannot take
            status = "InvalidRequest"
            raise InvalidRequest(str(exc)) from None
        except asyncio.CancelledError:
            # The caller went away (a gRPC deadline or cancellation) while the request was queued
            # or running: neither a success nor a server error.
            status = "Cancelled"
            raise
        except Exception:
            status = "InternalError"
            raise
        finally:
            elapsed = time.perf_counter() - start
            if request.wire_bytes >= LARGE_REQUEST_BYTES:
                self.repository.memory.request(delay_s=LARGE_REQUEST_TRIM_DELAY_S)
            count, seconds = self._request_series(mv, request.protocol, status)
            count.inc()
            if mv is not None:
                seconds.observe(elapsed)
                # rows as validated (only a success counts them): recomputing them here from the
                # request failed on a scalar input, and its IndexError replaced the request's error.
                mv.stats.request(status == "success", elapsed, rows)

    def _execute(self, mv: ModelVersion, feeds: dict[str, np.ndarray], rows: int, timeout_s: float | None,
                 depth: int = 0, may_run_alone: bool = True, alone: bool = False) -> Awaitable[dict[str, np.ndarray]]:
        """``mv``'s outputs for validated ``feeds``: through its batcher, or an ensemble's steps.

        The caller awaits it without a name: a local holding the future would keep it, and the
        exception it may carry, in that frame, which that exception's traceback holds: a cycle
        keeping the model version until the cyclic collector ran."""
        pipeline = mv.pipeline
        if pipeline is None:
            return handoff.submit(mv.batcher, feeds, rows, timeout_s, may_run_alone, alone)
        if depth >= MAX_ENSEMBLE_DEPTH:
            raise InvalidRequest(f"ensemble {mv.name!r} runs ensembles nested over {MAX_ENSEMBLE_DEPTH} deep: "
                                 "a cycle through its steps' models")
        return pipeline.run(feeds, functools.partial(self._run_step, mv.name, timeout_s=timeout_s, depth=depth + 1,
                                                     may_run_alone=may_run_alone))

    async def _run_step(self, ensemble: str, step: Step, feeds: dict[str, np.ndarray], *, timeout_s: float | None,
                        depth: int, may_run_alone: bool) -> dict[str, np.ndarray]:
        """One step of ensemble ``ensemble``: its model's version looked up now (so a step model
        swapped for a new version runs the new one), the feeds checked against it, run through its
        batcher. Counted in the step model's statistics, as Triton counts composing models; errors
        name the ensemble and the step."""
        start = time.perf_counter()
        mv: ModelVersion | None = None
        ok, rows = False, 1
        try:
            for attempt in range(3):
                mv = self.repository.get(step.model_name, step.version)
                inputs = [InferInput(name, datatypes.from_numpy(array.dtype), array.shape, array) for name, array in feeds.items()]
                step_feeds, rows = self._validate(mv, InferRequest(step.model_name, inputs))
                try:
                    outputs = await self._execute(mv, step_feeds, rows, timeout_s, depth, may_run_alone)
                except VersionRetired:
                    continue
                ok = True
                return outputs
            raise ShuttingDown(f"model {step.model_name!r} is being unloaded")
        except ServingError as exc:
            raise type(exc)(f"ensemble {ensemble!r} {step.where}: {exc}") from None
        except ValueError as exc:  # the runtime's own checks
            raise InvalidRequest(f"ensemble {ensemble!r} {step.where}: {exc}") from None
        finally:
            if mv is not None:
                mv.stats.request(ok, time.perf_counter() - start, rows)

    def count_refused(self, protocol: str, error: ServingError) -> None:
        """Count a request its front end refused before it reached ``infer`` (a body that does not
        decode, or over the size limit), so that every request is counted once. Such a request
        counts under no model, as one naming an unknown model does."""
        self._request_series(None, protocol, type(error).__name__)[0].inc()

    def _request_series(self, mv: ModelVersion | None, protocol: str, status: str) -> tuple:
        cache = self._series if mv is None else mv.request_series
        key = (protocol, status)
        series = cache.get(key)
        if series is None:
            model, version = (mv.name, mv.version_label) if mv is not None else ("", "")
            series = cache[key] = (
                self.metrics.requests.labels(model=model, version=version, protocol=protocol, status=status),
                self.metrics.request_seconds.labels(model=model, version=version),
            )
        return series

    def _validate(self, mv: ModelVersion, request: InferRequest) -> tuple[dict[str, np.ndarray], int]:
        checks = mv.input_checks
        feeds: dict[str, np.ndarray] = {}
        for tensor in request.inputs:
            name, shape = tensor.name, tuple(tensor.shape)
            check = checks.get(name)
            if check is None:
                raise InvalidRequest(f"unknown input {shown(name)} for model {mv.name!r}; expected inputs {sorted(checks)}")
            if name in feeds:
                raise InvalidRequest(f"input {name!r} is given more than once")
            spec, expected, fixed = check
            if tensor.datatype != expected:
                raise InvalidRequest(f"input {name!r}: expected datatype {expected}, got {tensor.datatype}")
            if len(shape) != len(spec.shape):
                raise InvalidRequest(
                    f"input {name!r}: expected rank {len(spec.shape)} (shape {list(spec.shape)}), got shape {shown(list(shape))}"
                )
            for axis, want in fixed:
                if shape[axis] != want:
                    raise InvalidRequest(
                        f"input {name!r}: dimension {axis} must be {want}, got {shape[axis]} "
                        f"(expected shape {list(spec.shape)}, got {list(shape)})"
                    )
            feeds[name] = tensor.data
        if len(feeds) != len(checks):  # every feed is a distinct known input, so some are missing
            raise InvalidRequest(f"missing input(s) {sorted(set(checks) - set(feeds))} for model {mv.name!r}")
        rows = 1
        if mv.max_batch_size > 0:
            rows = next(iter(feeds.values())).shape[0]
            if len(feeds) > 1:
                batch_sizes = {name: a.shape[0] for name, a in feeds.items()}
                if len(set(batch_sizes.values())) > 1:
                    raise InvalidRequest(f"inputs disagree on the batch size (dimension 0): {batch_sizes}")
            if rows < 1 or rows > mv.max_batch_size:
                raise InvalidRequest(f"batch size {rows} is outside 1..{mv.max_batch_size} (max_batch_size of {mv.name!r})")
        if request.outputs is not None:
            unknown = [n for n in request.outputs if n not in mv.output_names]
            if unknown:
                raise InvalidRequest(f"unknown output(s) {shown(unknown)} requested; model {mv.name!r} has {sorted(mv.output_names)}")
            if len(request.outputs) > 1 and len(set(request.outputs)) != len(request.outputs):  # as Triton refuses them
                twice = sorted(n for n, count in Counter(request.outputs).items() if count > 1)
                raise InvalidRequest(f"output(s) {twice} requested more than once")
        return feeds, rows

    def _response(self, mv: ModelVersion, request: InferRequest, outputs: dict[str, np.ndarray]) -> InferResponse:
        names = request.outputs if request.outputs is not None else mv.output_names
        tensors = []
        for name in names:
            array = np.asarray(outputs[name])
            count = request.class_counts.get(name) if request.class_counts else None
            if count is not None:
                array = top_classes(name, array, count, labels_of(mv.backend.metadata), mv.max_batch_size > 0)
            tensors.append(InferOutput(name, datatypes.from_numpy(array.dtype), array.shape, array))
        for tensor in tensors:
            ref = request.output_regions.get(tensor.name)
            if ref is not None:
                raw = datatypes.to_raw(tensor.data)
                self.shared_memory.write(ref.region, ref.offset, ref.byte_size, tensor.name, raw)
                tensor.region = RegionRef(ref.region, ref.offset, len(raw))
        return InferResponse(mv.name, mv.version_label, tensors, request.id)

    def _read_regions(self, request: InferRequest) -> None:
        """Inputs given as shared-memory regions, read into arrays; output regions checked to exist
        and fit before anything runs."""
        for tensor in request.inputs:
            ref = tensor.data
            if type(ref) is RegionRef:
                raw = self.shared_memory.read(ref.region, ref.offset, ref.byte_size, tensor.name)
                tensor.data = datatypes.from_raw(tensor.name, tensor.datatype, tensor.shape, raw)
        for name, ref in request.output_regions.items():
            if request.outputs is None or name not in request.outputs:
                raise InvalidRequest(f"output {shown(name)}: a shared-memory region is given for an output not requested")
            self.shared_memory.check_output(ref.region, ref.offset, ref.byte_size, name)

    # -- CUDA shared memory: refused ------------------------------------------------------------
    def cuda_shared_memory_status(self, name: str = "") -> list[dict]:
        if name:
            raise InvalidRequest(f"CUDA shared-memory region {shown(name)} is not registered")
        return []

    def cuda_shared_memory_register(self, name: str) -> None:
        where = "this server runs on the CPU" if self.repository.device != "gpu" else "this server does not map CUDA IPC handles"
        raise Unsupported(f"CUDA shared memory (region {shown(name)}): {where}; register a system shared-memory region instead")

    def cuda_shared_memory_unregister(self, name: str = "") -> None:
        """Nothing is ever registered: unregistering is no error, as for an unknown system region."""


def _timeout_s(parameters: dict[str, Any]) -> float | None:
    """KServe's ``timeout`` request parameter, in microseconds."""
    value = parameters.get("timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:  # NaN too
        raise InvalidRequest(f"parameter 'timeout' must be a non-negative number of microseconds, got {shown(value)}")
    return value / 1e6 if value > 0 else None


def _config_override(name: str, parameters: dict[str, Any]) -> dict | None:
    """The ``config`` load parameter as a dict (Triton sends it as a JSON string)."""
    unknown = sorted(k for k in parameters if k != "config")
    if unknown:
        raise InvalidRequest(f"load of model {name!r}: unsupported parameter(s) {shown(unknown)}; "
                             "only 'config' (a JSON string of config.json's fields) is taken")
    raw = parameters.get("config")
    if raw is None:
        return None
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise InvalidRequest(f"load of model {name!r}: parameter 'config' must be a JSON string, got {shown(raw)}")
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"load of model {name!r}: parameter 'config' is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise InvalidRequest(f"load of model {name!r}: parameter 'config' must be a JSON object")
    return config
