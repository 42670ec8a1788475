"""ModelRepository: versions and policies, polling, failed and corrupt versions, names, readiness."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from serving import ModelRepository
from serving.backends import EdgeRuntimeBackend
from serving.errors import InvalidRequest, ModelNotFound
from tests.serving.conftest import add_version


def loaded(root: Path, **kwargs) -> ModelRepository:
    repository = ModelRepository(root, **kwargs)
    repository.poll()
    return repository


def run(repository: ModelRepository, version: str | None = None, x=None) -> np.ndarray:
    mv = repository.get("mlp", version)
    x = np.ones((1, 4), np.float32) if x is None else x
    return mv.batcher.submit({"x": x}, rows=len(x)).result(10)["probs"]


def test_latest_version_serves_and_policy_all_keeps_both(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp)
    add_version(tmp_path, "mlp", 2, mlp_v2)
    repository = loaded(tmp_path)
    x = np.ones((1, 4), np.float32)
    assert repository.versions("mlp") == [2]
    np.testing.assert_allclose(run(repository), mlp_v2(x), rtol=1e-5)
    with pytest.raises(ModelNotFound, match="version 1 is not being served.*not selected by the version policy"):
        repository.get("mlp", "1")
    repository.close()
    (tmp_path / "mlp" / "config.json").write_text(json.dumps({"version_policy": {"all": {}}}))
    repository = loaded(tmp_path)
    assert repository.versions("mlp") == [1, 2]
    np.testing.assert_allclose(run(repository, "1"), mlp(x), rtol=1e-5)
    repository.close()


def test_specific_version_policy(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp, {"version_policy": {"specific": {"versions": [1]}}})
    add_version(tmp_path, "mlp", 2, mlp_v2)
    repository = loaded(tmp_path)
    assert repository.versions("mlp") == [1]
    repository.close()


def test_polling_picks_up_new_and_removed_versions(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp)
    repository = ModelRepository(tmp_path, poll_interval_s=0.05)
    repository.start()
    assert repository.wait_scanned(10)
    add_version(tmp_path, "mlp", 2, mlp_v2)
    deadline = time.time() + 10
    while repository.versions("mlp") != [2] and time.time() < deadline:
        time.sleep(0.02)
    assert repository.versions("mlp") == [2]
    os.rename(tmp_path / "mlp" / "2", tmp_path / "mlp" / ".gone")
    while repository.versions("mlp") != [1] and time.time() < deadline:
        time.sleep(0.02)
    assert repository.versions("mlp") == [1]
    repository.close()


def test_failing_version_never_replaces_a_good_one(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp)
    repository = loaded(tmp_path)
    (tmp_path / "mlp" / "2").mkdir()
    (tmp_path / "mlp" / "2" / "model.flow").write_bytes(b"FLOW but not really a model")
    repository.poll()
    assert repository.versions("mlp") == [1]
    assert repository.ready()
    (status,) = [s for s in repository.statuses("mlp") if s.version == 2]
    assert status.state == "UNAVAILABLE" and "failed to load" in status.reason
    assert any(row["version"] == "2" and "failed to load" in row["reason"] for row in repository.index())
    np.testing.assert_allclose(run(repository), mlp(np.ones((1, 4), np.float32)), rtol=1e-5)
    repository.close()


def test_corrupting_a_served_file_keeps_the_loaded_copy(tmp_path, mlp):
    path = add_version(tmp_path, "mlp", 1, mlp)
    repository = loaded(tmp_path)
    data = bytearray(path.read_bytes())
    data[4:8] = b"XXXX"  # break the file identifier
    path.write_bytes(bytes(data[: len(data) // 2]))
    repository.poll()
    assert repository.versions("mlp") == [1]
    (status,) = repository.statuses("mlp")
    assert "still serving the previously loaded copy" in status.reason
    np.testing.assert_allclose(run(repository), mlp(np.ones((1, 4), np.float32)), rtol=1e-5)
    repository.close()


def test_bad_config_is_reported_and_model_not_ready(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp)
    (tmp_path / "mlp" / "config.json").write_text('{"max_batch_size": -3}')
    repository = loaded(tmp_path)
    assert not repository.ready()
    with pytest.raises(ModelNotFound, match="max_batch_size must be an integer >= 0"):
        repository.get("mlp")
    repository.close()


def test_names_are_validated_and_symlinks_out_of_the_root_refused(tmp_path, mlp):
    root = tmp_path / "models"
    add_version(root, "mlp", 1, mlp)
    outside = tmp_path / "outside"
    add_version(outside, "evil", 1, mlp)
    (root / "evil").symlink_to(outside / "evil")
    (root / "bad name!").mkdir()
    repository = loaded(root)
    assert repository.model_names() == ["mlp"]
    reasons = {row["name"]: row["reason"] for row in repository.index()}
    assert "outside the model repository" in reasons["evil"]
    assert "invalid model name" in reasons["bad name!"]
    for name in ("../outside/evil", "..", "a/b", ""):
        with pytest.raises(InvalidRequest, match="invalid model name"):
            repository.get(name)
    with pytest.raises(InvalidRequest, match="invalid model version"):
        repository.get("mlp", "../1")
    repository.close()


def test_empty_repository_is_not_ready(tmp_path):
    repository = loaded(tmp_path)
    assert not repository.ready()
    repository.close()


def test_not_ready_until_loaded_and_warmed_up(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp, {"warmup": [{"batch_size": 1}, {"batch_size": 4}]})
    release = threading.Event()
    warmups = []

    class SlowBackend(EdgeRuntimeBackend):
        def infer_batch(self, requests):
            warmups.append(len(requests[0]["x"]))
            release.wait(10)
            return super().infer_batch(requests)

    repository = ModelRepository(tmp_path, backend_factory=SlowBackend)
    repository.start()
    time.sleep(0.1)
    assert not repository.ready()
    release.set()
    assert repository.wait_scanned(10)
    assert repository.ready()
    assert warmups == [1, 4]
    repository.close()


def test_batching_config_needs_a_batch_dimension(tmp_path):
    from onnx import TensorProto, helper

    from exporter.onnx_import import convert_onnx

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    )
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "fixed" / "1" / "model.flow")
    repository = loaded(tmp_path)
    assert repository.get("fixed").max_batch_size == 0  # default: batching off for a fixed shape
    repository.close()
    (tmp_path / "fixed" / "config.json").write_text('{"max_batch_size": 4}')
    repository = loaded(tmp_path)
    assert not repository.ready()
    assert "dimension 0 of every input and output to be dynamic" in repository.statuses("fixed")[0].reason
    repository.close()


def test_config_change_reloads_and_removed_model_unloads(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 4})
    repository = loaded(tmp_path)
    first = repository.get("mlp")
    assert first.max_batch_size == 4
    (tmp_path / "mlp" / "config.json").write_text(json.dumps({"max_batch_size": 8, "instances": 2}))
    repository.poll()
    second = repository.get("mlp")
    assert second is not first and second.max_batch_size == 8 and second.config.instances == 2
    np.testing.assert_allclose(run(repository), mlp(np.ones((1, 4), np.float32)), rtol=1e-5)
    os.rename(tmp_path / "mlp", tmp_path / ".mlp-removed")
    repository.poll()
    assert repository.model_names() == [] and not repository.ready()
    with pytest.raises(ModelNotFound, match="Request for unknown model: 'mlp'"):
        repository.get("mlp")
    repository.close()


def test_a_version_with_flipped_weight_bytes_is_refused_and_the_previous_serves(tmp_path, mlp, mlp_v2):
    from edge_runtime.format import read_file

    add_version(tmp_path, "mlp", 1, mlp)
    repository = loaded(tmp_path)
    staged = add_version(tmp_path / "staging", "mlp", 2, mlp_v2)
    model, _ = read_file(staged)
    offset, length, _ = next(c for c in model.buffer_checksums if c[1])
    data = bytearray(staged.read_bytes())
    data[offset + length // 2] ^= 0x01  # one bit of one weight: still a well-formed file
    (tmp_path / "mlp" / "2").mkdir()
    (tmp_path / "mlp" / "2" / "model.flow").write_bytes(bytes(data))
    repository.poll()
    try:
        assert repository.versions("mlp") == [1]
        (status,) = [s for s in repository.statuses("mlp") if s.version == 2]
        assert status.state == "UNAVAILABLE" and "checksum" in status.reason and "weights are corrupt" in status.reason
        x = np.ones((1, 4), np.float32)
        np.testing.assert_allclose(run(repository), mlp(x), rtol=1e-5)
    finally:
        repository.close()


def test_a_model_onnx_version_is_converted_when_it_loads(tmp_path, mlp, mlp_v2):
    """As Triton serves ONNX directly: a version folder holding model.onnx (and no model.flow)."""
    from flowstack_cli.serve import onnx_to_flow

    root = tmp_path / "models"
    (root / "mlp" / "1").mkdir(parents=True)
    (root / "mlp" / "1" / "model.onnx").write_bytes(mlp.onnx().SerializeToString())
    (root / "broken" / "1").mkdir(parents=True)
    (root / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    repository = loaded(root, onnx_converter=onnx_to_flow)
    try:
        x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(run(repository, x=x), mlp(x), rtol=1e-5, atol=1e-6)
        (reason,) = [row["reason"] for row in repository.index() if row["name"] == "broken"]
        assert reason.startswith("failed to load broken/1/model.onnx:")
        # A new version holding a model.onnx is picked up by the poll.
        (root / "mlp" / "2").mkdir()
        (root / "mlp" / "2" / "model.onnx").write_bytes(mlp_v2.onnx().SerializeToString())
        repository.poll()
        np.testing.assert_allclose(run(repository, x=x), mlp_v2(x), rtol=1e-5, atol=1e-6)
    finally:
        repository.close()

    without = loaded(root)
    try:
        (reason,) = [row["reason"] for row in without.index() if row["name"] == "mlp" and row["version"] == "2"]
        assert "model.onnx needs an ONNX converter" in reason and "flowstack serve" in reason
    finally:
        without.close()
