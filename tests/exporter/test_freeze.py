"""Freeze: trained graphs become inference models that match the trainer on the edge runtime and in
onnxruntime; what cannot be frozen is refused naming the tensor, file or op."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import edge_runtime
import trainer as T
from exporter import FreezeError, check_trainer_parity, export_trained, freeze, optimize, write_repository
from exporter.freeze import trainer_outputs
from flowstack_cli import digits

IO = dict(inputs={"image": "images"}, outputs={"probs": "probabilities"})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The demo's digits CNN (batch norm, dropout), trained briefly, checkpointed."""
    (xtr, ytr), (xte, _) = digits.load_digits()
    graph, handles = digits.build_cnn()
    directory = tmp_path_factory.mktemp("ckpt")
    session, path = digits.train_cnn(graph, handles, (xtr[:640], ytr[:640]), str(directory), epochs=2, progress=False)
    return session, directory, path, xte[:40]


def edge_run(model, feeds):
    from exporter import flow_writer

    return edge_runtime.load(flow_writer.to_bytes(model)).run(feeds)


def test_frozen_cnn_matches_trainer_and_drops_training_ops(trained) -> None:
    session, _, _, images = trained
    frozen = freeze(session, **IO)
    ops = [n.op_type for n in frozen.graph.nodes]
    assert "BatchNormalization" in ops and all(n.domain == "" for n in frozen.graph.nodes)
    assert not {"BatchNormTraining", "DropoutMask", "Placeholder", "Variable", "Assign"} & set(ops)
    want = trainer_outputs(session, {"image": images}, **IO)["probs"]
    np.testing.assert_allclose(edge_run(frozen, {"image": images})["probs"], want, rtol=1e-5, atol=1e-6)
    optimized, report = optimize(frozen)
    assert report.nodes_after < report.nodes_before
    assert "BatchNormalization" not in report.ops_after
    check_trainer_parity(optimized, session, {"image": images}, **IO)


def test_checkpoint_dir_freezes_like_the_session(trained) -> None:
    session, directory, _, images = trained
    a = edge_run(freeze(session, **IO), {"image": images})["probs"]
    from_dir = freeze(directory, **IO)
    np.testing.assert_array_equal(edge_run(from_dir, {"image": images})["probs"], a)
    meta = from_dir.metadata
    assert meta["producer"] == "flowstack trainer" and meta["training_step"] == "20"
    assert json.loads(meta["inputs"]) == {"image": "FP32 [?, 1, 8, 8]"}
    assert json.loads(meta["outputs"]) == {"probs": "FP32 [?, 10]"} and "created" in meta


def test_export_trained_writes_a_verified_file(trained, tmp_path: Path) -> None:
    _, directory, _, images = trained
    out = tmp_path / "m.flow"
    report = export_trained(directory, out, **IO, samples={"image": images}, labels=[str(i) for i in range(10)])
    assert report.trainer_parity.ok and report.parity.ok and out.stat().st_size == report.size
    model = edge_runtime.load(out)
    assert model.definition.metadata["labels"].split("\n")[3] == "3"
    assert int(model.definition.metadata["frozen_ops"]) == report.passes.nodes_before


def test_trainer_benchmark_mlp_and_cnn_match(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 1, 12, 12), name="x")
        y = T.placeholder(np.int64, (None,), name="y")
        h = T.layers.conv2d(x, 8, 3, padding="valid", activation="relu", name="c1")
        h = T.layers.flatten(T.layers.max_pooling2d(h, 2))
        h = T.layers.dense(h, 32, activation="relu", name="fc")
        logits = T.layers.dense(h, 10, name="out")
        flat = T.placeholder(np.float32, (None, 20), name="flat")
        mlp = T.layers.dense(T.layers.dense(flat, 16, activation="relu", name="m1"), 4, name="m2")
        loss = T.losses.sparse_softmax_cross_entropy(y, logits)
        train = T.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    xs = rng.standard_normal((8, 1, 12, 12)).astype(np.float32)
    s.run(train, {x: xs, y: rng.integers(0, 10, 8)})
    for inputs, outputs, feeds in (({"x": x}, {"logits": logits}, {"x": xs}),
                                   ({"flat": flat}, {"out": mlp}, {"flat": rng.standard_normal((5, 20)).astype(np.float32)})):
        report = export_trained(s, tmp_path / "m.flow", inputs, outputs, samples=feeds)
        assert report.trainer_parity.ok and report.passes.nodes_after < report.passes.nodes_before


def test_lstm_block_cell_is_spelled_in_onnx_ops() -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 6), name="x")
        h0 = T.placeholder(np.float32, (None, 5), name="h")
        c0 = T.placeholder(np.float32, (None, 5), name="c")
        cell = T.layers.LSTMCell(5, 6)
        h, (_, c) = cell(x, (h0, c0))
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    io = dict(inputs={"x": x, "h": h0, "c": c0}, outputs={"h_out": h, "c_out": c})
    frozen = freeze(s, **io)
    assert "LSTMBlockCell" not in {n.op_type for n in frozen.graph.nodes}
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((3, d)).astype(np.float32) for k, d in (("x", 6), ("h", 5), ("c", 5))}
    check_trainer_parity(frozen, s, feeds, **io)


def test_onnx_round_trip_matches_trainer(trained) -> None:
    ort = pytest.importorskip("onnxruntime")
    from exporter import to_onnx

    session, _, _, images = trained
    proto = to_onnx(freeze(session, **IO))
    run = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = run.run(None, {"image": images})[0]
    np.testing.assert_allclose(got, trainer_outputs(session, {"image": images}, **IO)["probs"], rtol=1e-5, atol=1e-6)


def test_unfed_placeholder_is_refused_naming_it(trained) -> None:
    session, _, _, _ = trained
    loss = session.graph.get_collection(T.GraphKeys.LOSSES)
    target = loss[0] if loss else next(n for n in session.graph.nodes if n.op_type == "SparseSoftmaxCrossEntropyWithLogits").outputs[0]
    with pytest.raises(FreezeError, match=r"output 'loss' .* depends on placeholder 'labels'.*add it to the inputs"):
        freeze(session, inputs={"image": "images"}, outputs={"loss": target})


def test_op_without_edge_kernel_is_refused_naming_it(trained) -> None:
    session, _, _, _ = trained
    xent = next(n for n in session.graph.nodes if n.op_type == "SparseSoftmaxCrossEntropyWithLogits")
    with pytest.raises(FreezeError, match=r"SparseSoftmaxCrossEntropyWithLogits \(node '.*'\) has no edge runtime kernel"):
        freeze(session, inputs={"image": "images", "labels": "labels"}, outputs={"xent": xent.outputs[0]})


def test_while_loop_is_refused_with_a_reason() -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (3,), name="x")
        i0 = T.constant(np.asarray(0, np.int64))
        _, out = T.while_loop(lambda i, v: T.less(i, np.int64(3)), lambda i, v: [i + np.int64(1), v * 2.0], [i0, x])
    with pytest.raises(FreezeError, match="while_loop or cond"):
        freeze(T.Session(g), inputs={"x": x}, outputs={"y": out})


@pytest.mark.parametrize("damage", ["missing", "corrupt", "no_graph"])
def test_damaged_checkpoint_is_refused_naming_the_file(trained, tmp_path: Path, damage: str) -> None:
    _, directory, path, _ = trained
    copy = tmp_path / "ckpt"
    copy.mkdir()
    for f in os.listdir(directory):
        (copy / f).write_bytes((Path(directory) / f).read_bytes())
    shard = copy / Path(path).name
    (copy / "checkpoint").write_text(json.dumps({"model_checkpoint_path": str(shard), "all_model_checkpoint_paths": [str(shard)]}))
    if damage == "missing":
        shard.unlink()
    elif damage == "corrupt":
        shard.write_bytes(shard.read_bytes()[:200])
    else:
        (copy / "graph.npz").unlink()
    named = "graph.npz" if damage == "no_graph" else shard.name
    out = tmp_path / "out" / "model.flow"
    with pytest.raises(FreezeError, match=named):
        export_trained(copy, out, **IO)
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))


def test_repository_layout(trained, tmp_path: Path) -> None:
    session, _, _, images = trained
    model = freeze(session, **IO, labels=["zero", "one"])
    write_repository(model, tmp_path, "digits", config={"max_batch_size": 8}, samples={"image": images})
    report = write_repository(model, tmp_path, "digits", verify=False)
    assert report.path == tmp_path / "digits" / "2" / "model.flow"
    assert (tmp_path / "digits" / "1" / "model.flow").exists()
    assert (tmp_path / "digits" / "1" / "labels.txt").read_text() == "zero\none\n"
    assert json.loads((tmp_path / "digits" / "config.json").read_text()) == {"max_batch_size": 8}
    from serving.repository import ModelRepository  # noqa: F401  (the layout serving reads)
