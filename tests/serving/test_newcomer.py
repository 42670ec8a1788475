"""What a newcomer trips on, each answered as a TF Serving or Triton user expects or with a
one-line error naming the fix: busy ports, a model.flow outside a version folder, defaults in
--help, TF Serving's :classify and :regress and its dtype names."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from serving import ModelRepository
from tests.serving.conftest import add_version, running_server

ROOT = Path(__file__).resolve().parents[2]
X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


@pytest.mark.parametrize("flag", ["--http-port", "--grpc-port"])
def test_a_busy_port_is_a_one_line_error_naming_the_flag(tmp_path, mlp, flag):
    add_version(tmp_path, "mlp", 1, mlp)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        other = "--grpc-port" if flag == "--http-port" else "--http-port"
        run = subprocess.run([sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(tmp_path), flag, str(port),
                              other, "0", "--poll-interval", "0"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("flowstack serve: error:")]
    assert len(errors) == 1 and flag in errors[0] and "0: any free port" in errors[0], run.stderr
    assert "Traceback" not in run.stderr


def test_a_model_file_outside_a_version_folder_is_reported(tmp_path, mlp, caplog):
    source = add_version(tmp_path / "staging", "mlp", 1, mlp)
    repo = tmp_path / "repo"
    (repo / "mlp").mkdir(parents=True)
    shutil.copyfile(source, repo / "mlp" / "model.flow")
    repository = ModelRepository(repo)
    with caplog.at_level(logging.WARNING, logger="flowstack.serving"):
        repository.poll()
        repository.poll()
    messages = [r.getMessage() for r in caplog.records if "mlp/1/model.flow" in r.getMessage()]
    assert len(messages) == 1 and "lies directly in the model directory" in messages[0]  # logged once, not per poll
    (row,) = repository.index()
    assert row["state"] == "UNAVAILABLE" and "move it to mlp/1/model.flow" in row["reason"]
    repository.close()


def test_serve_help_shows_the_defaults():
    run = subprocess.run([sys.executable, "-m", "flowstack_cli.serve", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    text = " ".join(run.stdout.split())
    for default in ("(default 8000)", "(default 8001)", "(default 30)", "(default 64 MiB)", "(default 5)", "(default poll)"):
        assert default in text, default


def test_tf_serving_classify_regress_and_dtype_names(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp)
    with running_server(tmp_path) as server:
        url = server.http_url
        examples = {"examples": [{"x": row} for row in X.tolist()]}
        r = httpx.post(f"{url}/v1/models/mlp:classify", json=examples)
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [[label for label, _ in row] for row in results] == [["0", "1", "2"]] * 2
        np.testing.assert_allclose([[score for _, score in row] for row in results], mlp(X), rtol=1e-5)
        r = httpx.post(f"{url}/v1/models/mlp/versions/1:regress", json=examples)
        assert r.status_code == 400 and ":regress needs one value per example" in r.json()["error"]
        r = httpx.post(f"{url}/v1/models/mlp:classify", json={"examples": []})
        assert r.status_code == 400 and "'examples', a non-empty list" in r.json()["error"]
        meta = httpx.get(f"{url}/v1/models/mlp/metadata").json()
        signature = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        assert signature["inputs"]["x"]["dtype"] == "DT_FLOAT" and signature["outputs"]["probs"]["dtype"] == "DT_FLOAT"


def test_tf_serving_regress_on_a_one_value_model(tmp_path):
    from onnx import TensorProto

    from tests.serving.conftest import write_passthrough_model

    write_passthrough_model(tmp_path / "id" / "1" / "model.flow", {"x": (TensorProto.FLOAT, ["n", 1])}, {"y": "x"})
    with running_server(tmp_path) as server:
        r = httpx.post(f"{server.http_url}/v1/models/id:regress",
                       json={"examples": [{"x": [1.5]}, {"x": [-2.0]}]})
        assert r.status_code == 200, r.text
        assert r.json() == {"results": [1.5, -2.0]}
