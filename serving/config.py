"""Per-model configuration (``<repo>/<name>/config.json``), validated with messages naming the field."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serving.ensemble import ENSEMBLE_FIELDS, ENSEMBLE_PLATFORM, EnsembleConfig
from serving.errors import ConfigError

DEFAULT_MAX_BATCH_SIZE = 32
DEFAULT_MAX_QUEUE_SIZE = 256
MAX_CONFIG_BYTES = 1 << 20
MODEL_FIELDS = frozenset({"name", "max_batch_size", "max_queue_delay_us", "preferred_batch_sizes", "instances",
                          "max_queue_size", "version_policy", "warmup", "version_labels"})


@dataclass(frozen=True)
class VersionPolicy:
    """Which versions to serve: the latest N, all, or a specific list (Triton's three kinds)."""

    kind: str = "latest"  # "latest" | "all" | "specific"
    num_versions: int = 1
    versions: tuple[int, ...] = ()

    def select(self, available: list[int]) -> list[int]:
        """Versions to try, most preferred first (the caller skips ones that fail to load)."""
        newest_first = sorted(available, reverse=True)
        if self.kind == "specific":
            return [v for v in newest_first if v in self.versions]
        return newest_first

    def wanted(self) -> int | None:
        """How many versions to serve at most (None: every selected one)."""
        return self.num_versions if self.kind == "latest" else None

    def to_json(self) -> dict:
        if self.kind == "latest":
            return {"latest": {"num_versions": self.num_versions}}
        if self.kind == "all":
            return {"all": {}}
        return {"specific": {"versions": list(self.versions)}}


@dataclass(frozen=True)
class ModelConfig:
    """Batching and loading settings for one model.

    ``max_batch_size`` 0 turns dynamic batching off (each request runs alone); otherwise requests
    are grouped up to that many rows, waiting at most ``max_queue_delay_us`` for more to arrive.
    When None, batching is on with ``DEFAULT_MAX_BATCH_SIZE`` if the model has a dynamic batch
    dimension on every input and output, and off otherwise.
    """

    max_batch_size: int | None = None
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    instances: int = 1
    max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE
    version_policy: VersionPolicy = field(default_factory=VersionPolicy)
    warmup: tuple[dict, ...] = ({"batch_size": 1},)
    # TensorFlow Serving's version labels: {"stable": 1, "canary": 2}, for /v1/models/{name}/labels/{label}.
    version_labels: tuple[tuple[str, int], ...] = ()
    # A pipeline of other models ("platform": "ensemble"), or None for a model of its own.
    ensemble: EnsembleConfig | None = None

    @classmethod
    def from_file(cls, path: Path, root: Path | None = None, where: str | None = None, model: str | None = None) -> "ModelConfig":
        """The config at ``path`` (defaults where there is none). With ``root`` (resolved), the
        file must resolve inside it; it must be a regular file of at most ``MAX_CONFIG_BYTES``:
        a config.json linked to a secret outside the repository, a FIFO (which blocked the scan,
        and shutdown, forever) or /dev/zero (gigabytes a poll) is refused. Errors say ``where``
        (the model's own path, never the machine's)."""
        where = where or str(path)
        if not os.path.lexists(path):
            return cls()
        try:
            real = path.resolve()
            if root is not None and not real.is_relative_to(root):
                raise ConfigError(f"{where}: refused: it resolves outside the model repository")
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise ConfigError(f"{where}: refused: not a regular file")
                if info.st_size > MAX_CONFIG_BYTES:
                    raise ConfigError(f"{where}: {info.st_size} bytes is over the {MAX_CONFIG_BYTES}-byte limit for a config")
                data = os.read(fd, MAX_CONFIG_BYTES + 1)
            finally:
                os.close(fd)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
            raise ConfigError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{where}: over the {MAX_CONFIG_BYTES}-byte limit for a config")
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{where}: not valid JSON: {exc}") from None
        return cls.from_dict(raw, where, model)

    @classmethod
    def from_dict(cls, raw: Any, where: str = "config", model: str | None = None) -> "ModelConfig":
        """The config in ``raw`` (config.json's object); ``model``, if given, is the model's name,
        which a ``name`` field must repeat (Triton's configs carry one)."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(raw).__name__}")
        if model is not None and raw.get("name", model) != model:
            raise ConfigError(f"{where}: name {raw['name']!r} is not the model's directory name {model!r}")
        platform = raw.get("platform")
        if platform not in (None, ENSEMBLE_PLATFORM):
            raise ConfigError(f"{where}: unknown platform {platform!r}; a model of its own leaves it out, a pipeline "
                              f"of models says {ENSEMBLE_PLATFORM!r}")
        pipeline = platform == ENSEMBLE_PLATFORM
        known = ENSEMBLE_FIELDS if pipeline else MODEL_FIELDS
        unknown = sorted(set(raw) - known)
        if unknown:
            what = "an ensemble's" if pipeline else "known"
            raise ConfigError(f"{where}: unknown field(s) {unknown}; {what} fields are {sorted(known)}")

        def integer(name: str, default: Any, minimum: int) -> Any:
            value = raw.get(name, default)
            if value is None:
                return None
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"{where}: {name} must be an integer >= {minimum}, got {value!r}")
            return value

        preferred = raw.get("preferred_batch_sizes", [])
        if not isinstance(preferred, list) or not all(isinstance(v, int) and v > 0 for v in preferred):
            raise ConfigError(f"{where}: preferred_batch_sizes must be a list of positive integers, got {preferred!r}")
        warmup = raw.get("warmup", [{"batch_size": 1}])
        if not isinstance(warmup, list) or not all(isinstance(s, dict) for s in warmup):
            raise ConfigError(f"{where}: warmup must be a list of objects like {{\"batch_size\": 1}}")
        config = cls(
            max_batch_size=integer("max_batch_size", None, 0),
            max_queue_delay_us=integer("max_queue_delay_us", 0, 0),
            preferred_batch_sizes=tuple(sorted(preferred)),
            instances=integer("instances", 1, 1),
            max_queue_size=integer("max_queue_size", DEFAULT_MAX_QUEUE_SIZE, 1),
            version_policy=_version_policy(raw.get("version_policy"), where),
            warmup=tuple(warmup),
            version_labels=_version_labels(raw.get("version_labels", {}), where),
            ensemble=EnsembleConfig.from_dict(raw, where) if pipeline else None,
        )
        if config.max_batch_size is not None and any(p > config.max_batch_size for p in preferred):
            raise ConfigError(f"{where}: preferred_batch_sizes {preferred} exceed max_batch_size {config.max_batch_size}")
        return config


LABEL_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


def _version_labels(raw: Any, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: version_labels must be an object of label -> version, like {{\"stable\": 1}}")
    for label, version in raw.items():
        if not LABEL_PATTERN.match(label):
            raise ConfigError(f"{where}: version label {label!r} must be 1-128 letters, digits, '_', '.', '-'")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ConfigError(f"{where}: version_labels.{label} must be a positive version number, got {version!r}")
    return tuple(sorted(raw.items()))


def _version_policy(raw: Any, where: str) -> VersionPolicy:
    if raw is None:
        return VersionPolicy()
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ConfigError(f"{where}: version_policy must be one of {{\"latest\": {{\"num_versions\": N}}}}, "
                          "{\"all\": {}}, {\"specific\": {\"versions\": [...]}}")
    (kind, body), = raw.items()
    body = body or {}
    if kind == "latest":
        n = body.get("num_versions", 1)
        if not isinstance(n, int) or n < 1:
            raise ConfigError(f"{where}: version_policy.latest.num_versions must be a positive integer, got {n!r}")
        return VersionPolicy("latest", num_versions=n)
    if kind == "all":
        return VersionPolicy("all")
    if kind == "specific":
        versions = body.get("versions")
        if not isinstance(versions, list) or not versions or not all(isinstance(v, int) and v > 0 for v in versions):
            raise ConfigError(f"{where}: version_policy.specific.versions must be a list of positive integers")
        return VersionPolicy("specific", versions=tuple(versions))
    raise ConfigError(f"{where}: unknown version_policy {kind!r}; expected latest, all or specific")
