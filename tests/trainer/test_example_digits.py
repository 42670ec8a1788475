"""The digits example trains to >= 97% test accuracy and leaves a checkpoint directory an
exporter can work from (graph.npz + checkpoints) plus TensorBoard events."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import trainer as T

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_train_digits_reaches_97_percent(tmp_path):
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("train_digits", ROOT / "examples" / "train_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    acc = mod.main(["--logdir", str(tmp_path)])
    assert acc >= 0.97
    files = os.listdir(tmp_path)
    assert "graph.npz" in files and "checkpoint" in files
    assert any(f.startswith("events.out.tfevents") for f in files)
    g = T.import_graph(str(tmp_path))
    assert g.node("probabilities").op_type == "Softmax"
