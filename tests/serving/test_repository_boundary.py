"""Every file the server reads is a regular file inside the repository, read with a size cap; one
bad config.json never stops the others loading, nor SIGTERM; errors name the model, never the
machine's paths; a failed load is a metric."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from serving import ModelRepository
from serving.config import MAX_CONFIG_BYTES
from tests.serving.conftest import add_version

ROOT = Path(__file__).resolve().parents[2]


def bad_configs(root: Path, outside: Path) -> dict[str, str]:
    """Models whose config.json is each kind of bad file, and the words their refusal must hold."""
    secret = outside / "secret.json"
    secret.write_text(json.dumps({"AWS_SECRET_ACCESS_KEY": "x"}))
    (root / "leak" / "config.json").symlink_to(secret)
    os.mkfifo(root / "fifo" / "config.json")
    (root / "zero" / "config.json").symlink_to("/dev/zero")
    (root / "huge" / "config.json").write_text(" " * (MAX_CONFIG_BYTES + 1) + "{}")
    return {"leak": "resolves outside the model repository", "fifo": "not a regular file",
            "zero": "resolves outside the model repository", "huge": "-byte limit for a config"}


@pytest.fixture
def repo(tmp_path, mlp):
    root, outside = tmp_path / "models", tmp_path / "outside"
    outside.mkdir()
    for name in ("good", "leak", "fifo", "zero", "huge"):
        add_version(root, name, 1, mlp)
    return root, bad_configs(root, outside)


def test_bad_config_files_are_refused_and_the_others_load(repo):
    root, expected = repo
    repository = ModelRepository(root)
    try:
        started = time.monotonic()
        repository.poll()
        assert time.monotonic() - started < 30  # the FIFO blocked the scan forever
        assert repository.versions("good") == [1]
        index = {row["name"]: row["reason"] for row in repository.index() if row["reason"]}
        for name, words in expected.items():
            assert repository.versions(name) == [] and words in index[name], (name, index.get(name))
            assert index[name].startswith(f"{name}/config.json: ")
        text = json.dumps(repository.index())
        assert "AWS_SECRET_ACCESS_KEY" not in text and str(root) not in text
        failures = repository.metrics.render()
        assert 'flowstack_model_load_failures_total{model="fifo"} 1.0' in failures
    finally:
        repository.close()


@pytest.mark.slow
def test_sigterm_exits_with_a_fifo_config(repo):
    root, _ = repo
    process = subprocess.Popen(
        [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(root), "--http-port", "0", "--grpc-port", "-1",
         "--poll-interval", "0.2", "--lame-duck", "0", "--drain-timeout", "5"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            event = json.loads(process.stderr.readline() or "{}")
            port = event.get("http_port") if event.get("event") == "serving" else None
        assert port is not None
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/v2/models/good/ready").status_code != 200:
            assert time.monotonic() < deadline, "the good model never loaded"
            time.sleep(0.05)
        missing = httpx.post(f"http://127.0.0.1:{port}/v2/models/leak/infer", json={"inputs": []}).json()["error"]
        assert "AWS_SECRET_ACCESS_KEY" not in missing and str(root) not in missing
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        process.stderr.close()


def test_served_metadata_carries_no_machine_path(tmp_path, mlp):
    from tests.serving.conftest import running_server

    add_version(tmp_path, "mlp", 1, mlp)
    with running_server(tmp_path) as server:
        # What `flowstack export` records: the checkpoint it read, by its path on that machine.
        server.repository.get("mlp").backend.metadata["source"] = "/home/alice/runs/ckpt-1200/model.ckpt"
        config = httpx.get(f"{server.http_url}/v2/models/mlp/config").json()
        assert config["parameters"]["source"] == {"string_value": "model.ckpt"}
