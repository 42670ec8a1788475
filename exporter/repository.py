"""The model repository layout serving reads: ``<repo>/<name>/<version>/model.flow``, plus the
model's optional ``config.json`` and, when the model's metadata carries labels, ``labels.txt``
beside its ``model.flow``.

    report = write_repository(model, "models", "digits", config={"max_batch_size": 64})
    # models/digits/1/model.flow (the next free version), models/digits/config.json
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from exporter import ir
from exporter.atomic import atomic_write
from exporter.pipeline import ExportReport, export

MODEL_FILE = "model.flow"
CONFIG_FILE = "config.json"
LABELS_FILE = "labels.txt"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def write_repository(
    model: ir.Model,
    repository: str | Path,
    name: str,
    version: int | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    optimize_graph: bool = True,
    verify: bool = True,
    samples: Mapping[str, np.ndarray] | None = None,
    verbose: bool = False,
) -> ExportReport:
    """Export ``model`` (optimize, verify, write) as version ``version`` (default: the next free
    one) of ``name`` in ``repository``; write ``config.json`` when ``config`` is given.

    Files appear complete or not at all (temp file, then rename), so a server polling the
    repository never loads half a model.
    """
    if not _NAME.match(name):
        raise ValueError(f"model name {name!r}: use letters, digits, '_', '.', '-' (it becomes a directory and a URL part)")
    model_dir = Path(repository) / name
    if version is None:
        version = next_version(model_dir)
    if int(version) < 1:
        raise ValueError(f"version {version}: versions are integers >= 1")
    version_dir = model_dir / str(int(version))
    report = export(model, version_dir / MODEL_FILE, optimize_graph=optimize_graph, verify=verify,
                    samples=samples, verbose=verbose)
    labels = model.metadata.get("labels")
    if labels:
        atomic_write(version_dir / LABELS_FILE, [(labels + "\n").encode()])
    if config is not None:
        atomic_write(model_dir / CONFIG_FILE, [(json.dumps(dict(config), indent=1) + "\n").encode()])
    return report


def next_version(model_dir: str | Path) -> int:
    """One more than the highest numeric version directory under ``model_dir`` (1 when none)."""
    model_dir = Path(model_dir)
    versions = [int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()] if model_dir.is_dir() else []
    return max(versions, default=0) + 1
