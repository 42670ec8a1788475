"""``ModelRepository``: the models under ``<root>/<name>/<version>/model.flow`` (or ``model.onnx``), kept in sync by polling.

A scan loads new or changed versions off to the side (load, then warm up) and only then swaps
them in; versions no longer wanted are swapped out and their batchers drained in the background.
A version that fails to load is reported (``statuses``) and never replaces one that serves; it is
retried only when its files change. Names are validated and nothing outside the root is followed.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edge_runtime.example_records import example_inputs
from serving import datatypes
from serving.backends import EdgeRuntimeBackend
from serving.batcher import DynamicBatcher
from serving.config import DEFAULT_MAX_BATCH_SIZE, ConfigError, ModelConfig
from serving.ensemble import Ensemble, Step
from serving.errors import InvalidRequest, ModelNotFound, ServingError, ShuttingDown, shown
from serving.memory import FreedMemoryReturner
from serving.metrics import ServingMetrics

log = logging.getLogger("flowstack.serving")

CONTROL_MODES = frozenset({"poll", "explicit"})
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
MODEL_FILE = "model.flow"
# Served as Triton serves ONNX: converted to a .flow when it loads (where there is no model.flow).
ONNX_FILE = "model.onnx"
CONFIG_FILE = "config.json"
# Ensembles may run ensembles; this deep, it is a cycle made by reloading one of them.
MAX_ENSEMBLE_DEPTH = 8

# Called (path, device); for a converted model.onnx also flow=<the .flow's bytes>.
BackendFactory = Callable[..., Any]


def validate_name(name: str, what: str = "model") -> str:
    """A model name from a URL or the file system: letters, digits, ``_ . -``, no path tricks."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or name in (".", ".."):
        raise InvalidRequest(f"invalid {what} name {shown(name)}: use 1-128 letters, digits, '_', '.', '-'")
    return name


def parse_version(version: str | None) -> int | None:
    """A version from a request: empty means 'pick by policy', else a positive integer."""
    if version in (None, ""):
        return None
    # isascii: str.isdigit also takes digits such as '²' that int() refuses.
    if not isinstance(version, str) or not (version.isascii() and version.isdigit()) or len(version) > 18 or int(version) < 1:
        raise InvalidRequest(f"invalid model version {shown(version)}: expected a positive integer")
    return int(version)


class VersionStats:
    """Triton-style statistics of one model version (counts and total nanoseconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.durations = {k: [0, 0] for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")}
        self.inference_count = 0
        self.execution_count = 0
        self.last_inference_ms = 0
        self.batches: dict[int, list[int]] = {}

    def request(self, ok: bool, seconds: float, rows: int) -> None:
        entry = self.durations["success" if ok else "fail"]
        ns, now_ms = int(seconds * 1e9), int(time.time() * 1000)
        with self._lock:
            entry[0] += 1
            entry[1] += ns
            if ok:
                self.inference_count += rows
            self.last_inference_ms = now_ms

    def batch(self, rows: int, waits: list[float], compute_s: float) -> None:
        requests, compute_ns = len(waits), int(compute_s * 1e9)
        queue_ns = int(sum(waits) * 1e9)
        queue, infer = self.durations["queue"], self.durations["compute_infer"]
        with self._lock:
            self.execution_count += 1
            queue[0] += requests
            queue[1] += queue_ns
            infer[0] += requests
            infer[1] += compute_ns * requests
            entry = self.batches.get(rows)
            if entry is None:
                entry = self.batches[rows] = [0, 0]
            entry[0] += 1
            entry[1] += compute_ns

    def to_json(self, name: str, version: int) -> dict:
        with self._lock:
            return {
                "name": name,
                "version": str(version),
                "last_inference": self.last_inference_ms,
                "inference_count": self.inference_count,
                "execution_count": self.execution_count,
                "inference_stats": {k: {"count": c, "ns": ns} for k, (c, ns) in self.durations.items()},
                "batch_stats": [
                    {"batch_size": rows, "compute_infer": {"count": c, "ns": ns}}
                    for rows, (c, ns) in sorted(self.batches.items())
                ],
            }


class BatchObserver:
    """What the batcher reports after each batch, recorded in a version's statistics and metrics.

    A closure over the ``ModelVersion`` made a cycle (version -> batcher -> observer -> version)
    that kept every unloaded version, and its model's memory, until the cyclic collector ran;
    this holds only what it records into."""

    __slots__ = ("stats", "batch_size", "compute_seconds", "queue_seconds")

    def __init__(self, stats: VersionStats, metrics: ServingMetrics, name: str, version: int):
        labels = {"model": name, "version": str(version)}
        self.stats = stats
        self.batch_size = metrics.batch_size.labels(**labels)
        self.compute_seconds = metrics.compute_seconds.labels(**labels)
        self.queue_seconds = metrics.queue_seconds.labels(**labels)

    def __call__(self, rows: int, waits: list[float], compute_s: float) -> None:
        self.stats.batch(rows, waits, compute_s)
        self.batch_size.observe(rows)
        self.compute_seconds.observe(compute_s)
        self.queue_seconds.observe_many(waits)


@dataclass(eq=False)
class ModelVersion:
    """One loaded, warmed-up version: its backend, its batcher and its statistics.

    Nothing it holds refers back to it, so it (and its model's memory) is freed as soon as the
    repository and the requests running on it let go, without the cyclic garbage collector."""

    name: str
    version: int
    path: Path
    config: ModelConfig
    backend: Any
    max_batch_size: int
    fingerprint: tuple
    batcher: DynamicBatcher | None = None
    stats: VersionStats = field(default_factory=VersionStats)
    # Bound request-metric series by (protocol, status), filled by ``InferenceCore``: they go with
    # the version, where a cache in the core grew by every version ever served.
    request_series: dict = field(default_factory=dict, repr=False)

    @property
    def inputs(self):
        return self.backend.inputs

    @property
    def outputs(self):
        return self.backend.outputs

    @functools.cached_property
    def input_checks(self) -> dict[str, tuple[Any, str, tuple[tuple[int, int], ...]]]:
        """Per input name: its spec, the protocol datatype it must be sent as, and its fixed
        (axis, size) pairs. Every request is checked against these, so they are built once."""
        return {
            s.name: (s, datatypes.from_numpy(s.dtype), tuple((axis, d) for axis, d in enumerate(s.shape) if d != -1))
            for s in self.inputs
        }

    @functools.cached_property
    def output_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.outputs)

    @functools.cached_property
    def version_label(self) -> str:
        return str(self.version)

    @property
    def pipeline(self) -> Ensemble | None:
        """The steps it runs, for an ensemble (which has no batcher of its own); else None."""
        return self.backend if isinstance(self.backend, Ensemble) else None


@dataclass
class VersionStatus:
    version: int
    state: str  # LOADING, READY, UNAVAILABLE (failed or not selected), UNLOADING
    reason: str = ""


@dataclass
class _ModelEntry:
    serving: dict[int, ModelVersion] = field(default_factory=dict)
    failed: dict[int, tuple] = field(default_factory=dict)  # version -> fingerprint that failed
    statuses: dict[int, VersionStatus] = field(default_factory=dict)
    config: ModelConfig = field(default_factory=ModelConfig)
    error: str = ""  # a model-level problem (bad config.json), reported alongside the versions
    reported_empty: str = ""  # the no-version problem last logged, so that a poll logs it once


class ModelRepository:
    """Loads and serves the models of one directory; ``start()`` begins loading and polling."""

    def __init__(
        self,
        root: str | Path,
        *,
        device: str = "cpu",
        poll_interval_s: float | None = None,
        backend_factory: BackendFactory = EdgeRuntimeBackend,
        metrics: ServingMetrics | None = None,
        control_mode: str = "poll",
        startup_models: tuple[str, ...] = (),
        onnx_converter: Callable[[bytes], bytes] | None = None,
    ):
        if control_mode not in CONTROL_MODES:
            raise ValueError(f"unknown model control mode {control_mode!r}; expected one of {sorted(CONTROL_MODES)}")
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"model repository {self.root} is not a directory")
        self._real_root = self.root.resolve()
        self.device = device
        self.poll_interval_s = poll_interval_s
        self._backend_factory = backend_factory
        # A model.onnx's bytes -> a .flow's (the exporter's ONNX import, which serving may not
        # import: the CLI passes it in).
        self._onnx_converter = onnx_converter
        self.metrics = metrics or ServingMetrics()
        self._models: dict[str, _ModelEntry] = {}
        self.control_mode = control_mode
        # Explicit control: the models loaded on request, each with its config override (or None),
        # and those to load at start ("*": every one).
        self._wanted: dict[str, dict | None] = {}
        self._startup_models = tuple(startup_models)
        self._problems: dict[str, str] = {}  # directory entries that are not valid models
        self._scan_lock = threading.Lock()
        self._stop = threading.Event()
        self._scanned = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._retiring: list[threading.Thread] = []
        self.memory = FreedMemoryReturner()
        self.metrics.add_gauge("flowstack_queue_depth", "Requests waiting in each model version's queue.", self._queue_depths)
        self.metrics.add_gauge("flowstack_model_ready", "1 for each model version ready to serve.", self._ready_versions)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Load everything in a background thread, then poll every ``poll_interval_s`` (if set)."""
        self._thread = threading.Thread(target=self._run, name="model-repository", daemon=True)
        self._thread.start()

    def wait_scanned(self, timeout: float | None = None) -> bool:
        return self._scanned.wait(timeout)

    def _run(self) -> None:
        if self.control_mode == "explicit":
            self._load_startup_models()
            return
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # a scan must never kill the poller
                log.exception("model repository scan failed")
            if self.poll_interval_s is None or self._stop.wait(self.poll_interval_s):
                return

    def close(self, timeout: float | None = 30.0) -> None:
        """Stop polling and unload every version, letting queued requests finish."""
        self._closing = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._scan_lock:
            versions = [mv for entry in self._models.values() for mv in entry.serving.values()]
            for entry in self._models.values():
                entry.serving = {}
        for mv in versions:
            if mv.batcher is not None:
                mv.batcher.close(timeout)
        for thread in list(self._retiring):
            thread.join(timeout)
        self.memory.close()

    def wait_retired(self, timeout: float | None = None) -> bool:
        """Wait for the versions being unloaded to finish draining; True if all did."""
        for thread in list(self._retiring):
            thread.join(timeout)
        return not any(t.is_alive() for t in self._retiring)

    # -- explicit model control --------------------------------------------------------------
    def _load_startup_models(self) -> None:
        try:
            names = self._startup_models
            if "*" in names:
                names = tuple(d.name for d in sorted(self.root.iterdir()) if d.is_dir() and NAME_PATTERN.match(d.name))
            for name in names:
                try:
                    self.load_model(name)
                except ServingError as exc:
                    log.error("model %r not loaded at start: %s", name, exc)
        finally:
            self._scanned.set()

    def load_model(self, name: str, config: dict | None = None) -> None:
        """Load (or reload) model ``name`` from the repository, with ``config`` in place of its
        config.json if given (Triton's model repository extension). Blocks while it loads;
        ``InvalidRequest`` if it cannot be loaded, naming why; a version already served keeps
        serving if its reload fails."""
        self._check_explicit("load")
        validate_name(name)
        if config is not None:
            try:
                ModelConfig.from_dict(config, f"config override for model {name!r}")
            except ConfigError as exc:
                raise InvalidRequest(str(exc)) from None
        with self._scan_lock:
            if self._closing:
                raise ShuttingDown("server is shutting down")
            if not self._has_directory(name):
                raise InvalidRequest(f"failed to load model {name!r}: no model directory {name!r} in the model repository")
            self._load_requested(name, config, set())
            entry = self._models[name]
        if not entry.serving:
            raise InvalidRequest(f"failed to load model {name!r}: {self._reasons(entry)}")

    def _has_directory(self, name: str) -> bool:
        directory = self.root / name
        return bool(NAME_PATTERN.match(name)) and directory.is_dir() and self._inside_root(directory)

    def _load_requested(self, name: str, override: dict | None, loading: set[str]) -> None:
        """Load ``name``; for an ensemble, first the models its steps run that are not loaded
        (as Triton does), those the repository has: a missing one is the ensemble's error."""
        directory = self.root / name
        self._wanted[name] = override
        loading.add(name)
        try:
            read = self._read_config(name, directory, override)
            if read is None:
                return
            for step in read[0].ensemble.steps if read[0].ensemble is not None else ():
                if step.model_name not in self._models and step.model_name not in loading and self._has_directory(step.model_name):
                    self._load_requested(step.model_name, None, loading)
            self._sync_versions(name, directory, *read)
        except OSError as exc:
            self._unreadable(name, exc)

    def unload_model(self, name: str) -> None:
        """Stop serving model ``name``: lookups fail at once; requests already queued or running
        on it finish, then its memory is returned. Unloading a model not loaded is no error."""
        self._check_explicit("unload")
        validate_name(name)
        with self._scan_lock:
            self._wanted.pop(name, None)
            entry = self._models.pop(name, None)
            if entry is not None:
                log.info("model %r unloading on request", name)
                for mv in entry.serving.values():
                    self._retire(mv)
            self._forget_retired_metrics()

    def _check_explicit(self, action: str) -> None:
        if self.control_mode != "explicit":
            raise InvalidRequest(f"explicit model {action} is not allowed while the repository is polled; "
                                 "start the server with --model-control-mode explicit")

    # -- queries -----------------------------------------------------------------------------
    def ready(self) -> bool:
        """True once the first scan is done and every model has a ready version; polled, the
        repository must hold a model, under explicit control none need be loaded."""
        if self._closing or not self._scanned.is_set():
            return False
        models = list(self._models.values())
        return (bool(models) or self.control_mode == "explicit") and all(entry.serving for entry in models)

    def model_names(self) -> list[str]:
        return sorted(self._models)

    def get(self, name: str, version: str | None = None) -> ModelVersion:
        """The version to run: the one asked for, or the newest ready one."""
        if self._closing:
            raise ShuttingDown("server is shutting down")
        entry = self._models.get(name) if isinstance(name, str) else None
        if entry is None:
            validate_name(name)  # a name being served is valid: no regex per request
        wanted = parse_version(version)
        if entry is None:
            # Triton's words, which clients test for; naming no other model (a caller that may not
            # know of them learns nothing of the repository).
            raise ModelNotFound(f"Request for unknown model: {name!r} is not found")
        serving = entry.serving
        if wanted is None:
            if not serving:
                raise ModelNotFound(f"model {name!r} has no version ready: {self._reasons(entry)}")
            return serving[max(serving)]
        found = serving.get(wanted)
        if found is None:
            status = entry.statuses.get(wanted)
            detail = f" ({status.state}: {status.reason})" if status and status.reason else ""
            raise ModelNotFound(f"model {name!r} version {wanted} is not being served{detail}; ready versions: {sorted(serving)}")
        return found

    def version_for_label(self, name: str, label: str) -> str:
        """The version a TensorFlow Serving version label of model ``name`` points at."""
        entry = self._models.get(name)
        if entry is None:
            self.get(name)  # raises naming the models there are
        labels = dict(entry.config.version_labels)
        version = labels.get(label)
        if version is None:
            raise ModelNotFound(f"model {name!r} has no version label {shown(label)}; its labels: {sorted(labels)}")
        return str(version)

    def is_ready(self, name: str, version: str | None = None, depth: int = 0) -> bool:
        """Whether the version would serve; an ensemble's, whether every step's model would too."""
        try:
            mv = self.get(name, version)
        except (ModelNotFound, InvalidRequest, ShuttingDown):
            return False
        pipeline = mv.pipeline
        return pipeline is None or (depth < MAX_ENSEMBLE_DEPTH and all(
            self.is_ready(step.model_name, step.version, depth + 1) for step in pipeline.steps))

    def versions(self, name: str) -> list[int]:
        entry = self._models.get(name)
        return sorted(entry.serving) if entry else []

    def statuses(self, name: str) -> list[VersionStatus]:
        entry = self._models.get(name)
        return [entry.statuses[v] for v in sorted(entry.statuses)] if entry else []

    def index(self) -> list[dict]:
        """Every model and version with its state and reason (Triton's repository index)."""
        rows = []
        for name in self.model_names():
            entry = self._models[name]
            if entry.error:
                rows.append({"name": name, "version": "", "state": "UNAVAILABLE", "reason": entry.error})
            for status in self.statuses(name):
                rows.append({"name": name, "version": str(status.version), "state": status.state, "reason": status.reason})
        for name, problem in sorted(self._problems.items()):
            rows.append({"name": name, "version": "", "state": "UNAVAILABLE", "reason": problem})
        if self.control_mode == "explicit":  # the models there to load, as Triton lists them
            loaded = set(self._models)
            for directory in sorted(self.root.iterdir()):
                if directory.is_dir() and NAME_PATTERN.match(directory.name) and directory.name not in loaded:
                    rows.append({"name": directory.name, "version": "", "state": "UNAVAILABLE", "reason": "not loaded"})
        return rows

    def _reasons(self, entry: _ModelEntry) -> str:
        parts = [entry.error] if entry.error else []
        parts += [f"version {s.version} {s.state}: {s.reason}" for s in entry.statuses.values() if s.reason]
        return "; ".join(parts) or "no version directory with a model.flow"

    def _queue_depths(self) -> dict:
        return {
            (("model", name), ("version", str(v))): mv.batcher.queue_depth
            for name, entry in list(self._models.items())
            for v, mv in list(entry.serving.items())
            if mv.batcher is not None
        }

    def _ready_versions(self) -> dict:
        return {
            (("model", name), ("version", str(v))): 1
            for name, entry in list(self._models.items())
            for v in list(entry.serving)
        }

    # -- scanning ----------------------------------------------------------------------------
    def _inside_root(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self._real_root)
        except (OSError, RuntimeError):
            return False

    def poll(self) -> None:
        """Scan the repository once and bring the served versions in line with it."""
        try:
            self._scan()
        finally:
            self._scanned.set()  # even a failed first scan: readiness then says what is there

    def _scan(self) -> None:
        with self._scan_lock:
            if self._closing:
                return
            found: set[str] = set()
            problems: dict[str, str] = {}
            ensembles: list[tuple[str, Path, ModelConfig, tuple]] = []  # synced once the models they run are
            for directory in sorted(self.root.iterdir()):
                if not directory.is_dir() or directory.name.startswith("."):
                    continue
                name = directory.name
                if not NAME_PATTERN.match(name):
                    problems[name] = "invalid model name; use letters, digits, '_', '.', '-'"
                    continue
                if not self._inside_root(directory):
                    problems[name] = "refused: the directory resolves outside the model repository"
                    continue
                if self.control_mode == "explicit" and name not in self._wanted:
                    continue  # loaded on request only
                found.add(name)
                try:
                    read = self._read_config(name, directory, self._wanted.get(name))
                    if read is not None and read[0].ensemble is not None:
                        ensembles.append((name, directory, *read))
                    elif read is not None:
                        self._sync_versions(name, directory, *read)
                except OSError as exc:
                    # The directory changed under the scan (deleted, replaced, unreadable): report
                    # it, keep what this model serves, and go on to the other models.
                    self._unreadable(name, exc)
            for name, directory, config, config_stamp in ensembles:
                try:
                    self._sync_versions(name, directory, config, config_stamp)
                except OSError as exc:
                    self._unreadable(name, exc)
            for name, problem in problems.items():
                if self._problems.get(name) != problem:
                    log.error("model repository entry %r: %s", name, problem)
            self._problems = problems
            for name in set(self._models) - found:
                log.info("model %r removed from the repository; unloading", name)
                entry = self._models.pop(name)
                for mv in entry.serving.values():
                    self._retire(mv)
            self._forget_retired_metrics()

    def _unreadable(self, name: str, exc: OSError) -> None:
        entry = self._models.setdefault(name, _ModelEntry())
        error = f"could not read the model directory: {type(exc).__name__}: {exc} (keeping the versions already served)"
        if entry.error != error:
            log.error("model %r: %s", name, error)
        entry.error = error

    def _available_versions(self, directory: Path) -> tuple[dict[int, Path], dict[int, str]]:
        """Version directories with a model file, and those refused (with why)."""
        versions, refused = {}, {}
        for sub in directory.iterdir():
            if not sub.name.isdigit() or sub.name.startswith("0") or not sub.is_dir():
                continue
            path = next((sub / f for f in (MODEL_FILE, ONNX_FILE) if (sub / f).is_file()), None)
            if path is None:
                continue  # not written yet (a directory may appear before its file)
            if self._inside_root(path):
                versions[int(sub.name)] = path
            else:
                refused[int(sub.name)] = f"refused: {directory.name}/{sub.name}/{path.name} resolves outside the model repository"
        return versions, refused

    def _read_config(self, name: str, directory: Path, override: dict | None) -> tuple[ModelConfig, tuple] | None:
        """The model's config and what tells it changed; None (reported) where it cannot be used."""
        entry = self._models.setdefault(name, _ModelEntry())
        config_path = directory / CONFIG_FILE
        config_stamp = _stamp(config_path) if override is None else ("override", json.dumps(override, sort_keys=True))
        try:
            if override is None:
                config = ModelConfig.from_file(config_path, self._real_root, f"{name}/{CONFIG_FILE}", name)
            else:
                config = ModelConfig.from_dict(override, f"config override for model {name!r}", name)
        except ConfigError as exc:
            if entry.error != str(exc):
                log.error("model %r: %s (keeping the versions already served)", name, exc)
                self.metrics.load_failures.inc(model=name)
            entry.error = str(exc)
            return None
        return config, config_stamp

    def _sync_versions(self, name: str, directory: Path, config: ModelConfig, config_stamp: tuple) -> None:
        entry = self._models[name]
        if config.ensemble is not None:
            available, refused = _ensemble_versions(directory), {}
            config_stamp = (config_stamp, self._steps_stamp(config))
        else:
            available, refused = self._available_versions(directory)
        entry.error = ""
        if not available and not refused:
            entry.error = _no_version_reason(name, directory)
            if entry.error != entry.reported_empty:
                log.warning("model %r: %s", name, entry.error)
            entry.reported_empty = entry.error
        entry.config = config
        limit = config.version_policy.wanted()
        keep: dict[int, ModelVersion] = {}
        statuses: dict[int, VersionStatus] = {}
        for version in config.version_policy.select(list(available)):
            if limit is not None and len(keep) >= limit:
                break
            fingerprint = (_stamp(available[version]), config_stamp)
            current = entry.serving.get(version)
            if current is not None and current.fingerprint == fingerprint:
                keep[version] = current
                statuses[version] = VersionStatus(version, "READY")
                continue
            if entry.failed.get(version) == fingerprint:
                statuses[version] = entry.statuses[version]
                if current is not None:
                    keep[version] = current
                continue
            entry.statuses[version] = VersionStatus(version, "LOADING")
            try:
                loaded = self._load(name, version, available[version], config, fingerprint)
            except Exception as exc:  # any load or warmup failure is reported, never raised
                if config.ensemble is not None and isinstance(exc, ConfigError):
                    reason = f"failed to load ensemble {name!r} version {version}: {exc}"
                else:
                    reason = f"failed to load {name}/{version}/{available[version].name}: {type(exc).__name__}: {exc}"
                log.error("model %r version %d: %s", name, version, reason)
                self.metrics.load_failures.inc(model=name)
                entry.failed[version] = fingerprint
                statuses[version] = VersionStatus(version, "UNAVAILABLE", reason)
                if current is not None:
                    keep[version] = current
                    statuses[version].reason += " (still serving the previously loaded copy)"
                continue
            entry.failed.pop(version, None)
            keep[version] = loaded
            statuses[version] = VersionStatus(version, "READY")
            log.info("model %r version %d loaded and warmed up from %s", name, version, available[version])
        for version in available:
            statuses.setdefault(version, VersionStatus(version, "UNAVAILABLE", "not selected by the version policy"))
        for version, reason in refused.items():
            if entry.statuses.get(version, VersionStatus(version, "")).reason != reason:
                log.error("model %r version %d: %s", name, version, reason)
            statuses[version] = VersionStatus(version, "UNAVAILABLE", reason)
        retired = [mv for version, mv in entry.serving.items() if keep.get(version) is not mv]
        entry.serving = keep  # one assignment: readers see the old set or the new one
        entry.statuses = statuses
        for mv in retired:
            log.info("model %r version %d unloading (draining its queue)", name, mv.version)
            self._retire(mv)

    def _steps_stamp(self, config: ModelConfig) -> tuple:
        """What the versions an ensemble's steps run are: a step model loaded, reloaded or
        unloaded makes the ensemble be checked against it again."""
        stamps = []
        for step in config.ensemble.steps:
            try:
                mv = self.get(step.model_name, step.version)
            except ServingError:
                stamps.append(None)
                continue
            stamps.append((mv.version, mv.fingerprint))
        return tuple(stamps)

    def _load_ensemble(self, name: str, version: int, path: Path, config: ModelConfig, fingerprint: tuple) -> ModelVersion:
        where = f"{name}/{CONFIG_FILE}"

        def step_version(step: Step) -> ModelVersion:
            if step.model_name == name:
                raise ConfigError(f"{where}: {step.where} runs the ensemble itself")
            try:
                return self.get(step.model_name, step.version)
            except ServingError as exc:
                raise ConfigError(f"{where}: {step.where}: {exc}") from None

        pipeline = Ensemble.resolve(config.ensemble, config.max_batch_size, step_version, where)
        return ModelVersion(name, version, path, config, pipeline, pipeline.max_batch_size, fingerprint)

    def _load(self, name: str, version: int, path: Path, config: ModelConfig, fingerprint: tuple) -> ModelVersion:
        if config.ensemble is not None:
            return self._load_ensemble(name, version, path, config, fingerprint)
        if path.name == ONNX_FILE:
            if self._onnx_converter is None:
                raise RuntimeError(f"{ONNX_FILE} needs an ONNX converter (flowstack serve has one: the exporter's ONNX "
                                   "import); convert it to model.flow with flowstack convert, or serve with flowstack serve")
            backend = self._backend_factory(path, self.device, flow=self._onnx_converter(path.read_bytes()))
        else:
            backend = self._backend_factory(path, self.device)
        batched = getattr(backend, "batched", False)
        max_batch_size = config.max_batch_size
        if max_batch_size is None:
            max_batch_size = DEFAULT_MAX_BATCH_SIZE if batched else 0
        elif max_batch_size > 0 and not batched:
            raise ConfigError(
                f"max_batch_size {max_batch_size} needs dimension 0 of every input and output to be dynamic (-1); "
                "set max_batch_size to 0"
            )
        # Freed (its model with it) when the last reference goes, in whatever thread lets go:
        # then the trimming thread gives the pages back. A load that fails frees it too.
        try:
            weakref.finalize(backend, self.memory.request).atexit = False
        except TypeError:  # a backend that takes no weak references: no trim when it goes
            pass
        mv = ModelVersion(name, version, path, config, backend, max_batch_size, fingerprint)
        for sample in config.warmup:
            backend.infer_batch([_warmup_feeds(backend.inputs, sample, max_batch_size,
                                               example_inputs(getattr(backend, "metadata", {})))])
        mv.batcher = DynamicBatcher(
            backend.infer_batch,
            max_batch_size=max_batch_size,
            max_queue_delay_us=config.max_queue_delay_us,
            preferred_batch_sizes=config.preferred_batch_sizes,
            instances=config.instances,
            max_queue_size=config.max_queue_size,
            on_batch=BatchObserver(mv.stats, self.metrics, name, version),
            name=f"{name}-{version}",
        )
        return mv

    def _retire(self, mv: ModelVersion) -> None:
        """Drain ``mv``'s queue in a thread of its own, then drop its metric series (unless the
        same version number is still served: a reloaded copy)."""
        if mv.batcher is None:
            return
        thread = threading.Thread(target=self._drain_retired, args=(mv.batcher,), name=f"retire-{mv.name}-{mv.version}", daemon=True)
        thread.start()
        self._retiring = [t for t in self._retiring if t.is_alive()] + [thread]

    def _drain_retired(self, batcher: DynamicBatcher) -> None:
        batcher.close()
        self._forget_retired_metrics()

    def _forget_retired_metrics(self) -> None:
        served = {(name, str(v)) for name, entry in list(self._models.items()) for v in list(entry.serving)}
        self.metrics.keep_versions(served)


def _ensemble_versions(directory: Path) -> dict[int, Path]:
    """An ensemble's versions: its numbered folders (empty, as Triton's), else version 1."""
    versions = {int(sub.name): sub for sub in directory.iterdir()
                if sub.name.isdigit() and not sub.name.startswith("0") and sub.is_dir()}
    return versions or {1: directory}


def _no_version_reason(name: str, directory: Path) -> str:
    """Why a model directory gives no version, saying where the file must go."""
    if (directory / MODEL_FILE).is_file():
        return (f"{MODEL_FILE} lies directly in the model directory; versions live in numbered folders: "
                f"move it to {name}/1/{MODEL_FILE}")
    return f"no version folder (a positive number, like {name}/1/) holding a {MODEL_FILE}"


def _stamp(path: Path) -> tuple | None:
    """What tells a changed file from the one last tried. The ctime too: fixing a file's
    permissions (chmod, chown) changes only that, and a version that failed for want of them
    must be tried again."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _warmup_feeds(specs, sample: dict, max_batch_size: int, records: dict[str, bytes]) -> dict[str, np.ndarray]:
    """Inputs for one warmup run: explicit ``inputs`` from the sample, else zeros of a valid shape
    (empty strings for a string input; the export's record for one of serialized tf.Examples)."""
    rows = int(sample.get("batch_size", 1))
    given = sample.get("inputs", {})
    feeds = {}
    for spec in specs:
        if spec.name in given:
            feeds[spec.name] = np.asarray(given[spec.name], dtype=spec.dtype)
            continue
        shape = [rows if (axis == 0 and max_batch_size > 0) else (1 if d == -1 else d) for axis, d in enumerate(spec.shape)]
        if spec.dtype == object:
            feeds[spec.name] = np.full(shape, records.get(spec.name, b""), dtype=object)
        else:
            feeds[spec.name] = np.zeros(shape, dtype=spec.dtype)
    return feeds
