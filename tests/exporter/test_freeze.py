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
from exporter import (
    FreezeError,
    check_trainer_parity,
    export_trained,
    freeze,
    optimize,
    write_repository,
)
from exporter.freeze import trainer_outputs
from flowstack_cli import digits

IO = {"inputs": {"image": "images"}, "outputs": {"probs": "probabilities"}}


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


def test_a_checkpoint_prefix_freezes_like_the_session(trained) -> None:
    """TF's way of naming one checkpoint: the prefix Saver.save returned (its graph: <prefix>.meta)."""
    session, directory, path, images = trained
    assert path == f"{directory}/model-20" and Path(path + ".meta").is_file()
    a = edge_run(freeze(session, **IO), {"image": images})["probs"]
    np.testing.assert_array_equal(edge_run(freeze(path, **IO), {"image": images})["probs"], a)
    with pytest.raises(FreezeError, match="model-21: no such checkpoint directory or checkpoint prefix"):
        freeze(f"{directory}/model-21", **IO)


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
        h = T.layers.conv2d(x, 8, 3, padding="valid", activation="relu", name="c1", data_format="channels_first")
        h = T.layers.flatten(T.layers.max_pooling2d(h, 2, data_format="channels_first"))
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
    io = {"inputs": {"x": x, "h": h0, "c": c0}, "outputs": {"h_out": h, "c_out": c}}
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
    with pytest.raises(FreezeError, match=r"output 'loss' depends on placeholder 'labels'.*add it to the inputs"):
        freeze(session, inputs={"image": "images"}, outputs={"loss": target})


def test_op_without_edge_kernel_is_refused_naming_it(trained) -> None:
    session, _, _, _ = trained
    xent = next(n for n in session.graph.nodes if n.op_type == "SparseSoftmaxCrossEntropyWithLogits")
    with pytest.raises(FreezeError, match=r"SparseSoftmaxCrossEntropyWithLogits \(node '.*'\) has no edge runtime kernel"):
        freeze(session, inputs={"image": "images", "labels": "labels"}, outputs={"xent": xent.outputs[0]})


def test_a_cycle_in_a_damaged_graph_is_refused_naming_it() -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 2), name="x")
        a = T.add(x, 1.0, name="a")
        b = T.multiply(a, 2.0, name="b")
        c = T.add(b, x, name="c")
    a.node.inputs[1] = b  # a reads b, which reads a: no trainer builds this, a damaged graph.npz could
    with pytest.raises(FreezeError, match=r"output 'y': the graph has a cycle: b:0 reads itself through a:0"):
        freeze(T.Session(g), inputs={"x": x}, outputs={"y": c})


def test_a_diamond_is_no_cycle() -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 2), name="x")
        a = T.add(x, 1.0, name="a")
        y = T.add(T.multiply(a, a), T.add(a, T.multiply(a, 3.0)), name="y")
    frozen = freeze(T.Session(g), inputs={"x": x}, outputs={"y": y})
    feed = np.ones((1, 2), np.float32)
    np.testing.assert_allclose(edge_run(frozen, {"x": feed})["y"], (feed + 1) ** 2 + 4 * (feed + 1))


def _check_control_flow(g, inputs, outputs, feeds, tmp_path: Path, op: str) -> None:
    s = T.Session(g)
    if T.global_variables(g):
        with g.as_default():
            s.run(T.global_variables_initializer())
    frozen = freeze(s, inputs, outputs)
    assert op in {n.op_type for n in frozen.graph.nodes}
    assert all(n.domain == "" for n in frozen.graph.nodes)
    report = export_trained(s, tmp_path / "m.flow", inputs, outputs, samples=feeds)
    assert report.trainer_parity.ok
    ort = pytest.importorskip("onnxruntime")
    from exporter import to_onnx

    got = ort.InferenceSession(to_onnx(frozen).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    want = trainer_outputs(s, feeds, inputs, outputs)
    for name, value in zip(outputs, got):
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6)
    return s


def test_while_loop_becomes_loop(tmp_path: Path) -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (3,), name="x")
        n = T.placeholder(np.int64, (), name="n")
        w = T.Variable(np.float32([0.5, 1.0, 2.0]), name="w")
        i0 = T.constant(np.asarray(0, np.int64))
        _, out = T.while_loop(lambda i, v: T.less(i, n), lambda i, v: [i + np.int64(1), v * w + 1.0], [i0, x])
    _check_control_flow(g, {"x": x, "n": n}, {"y": out}, {"x": np.float32([1, 2, 3]), "n": np.asarray(4, np.int64)},
                        tmp_path, "Loop")


def test_cond_becomes_if(tmp_path: Path) -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 2), name="x")
        p = T.placeholder(np.bool_, (), name="p")
        y = T.cond(p, lambda: T.tanh(x) * 2.0, lambda: x - 1.0)
    for flag in (True, False):
        _check_control_flow(g, {"x": x, "p": p}, {"y": y}, {"x": np.float32([[1, 2], [3, 4]]), "p": np.asarray(flag)},
                            tmp_path, "If")


def test_lstm_dynamic_rnn_becomes_loop_of_onnx_ops(tmp_path: Path) -> None:
    g = T.Graph()
    with g.as_default():
        xs = T.placeholder(np.float32, (5, 3, 4), name="xs")
        cell = T.layers.MultiRNNCell([T.layers.LSTMCell(6, 4, name="l1"), T.layers.LSTMCell(6, 6, name="l2")])
        out, _ = T.layers.dynamic_rnn(cell, xs, cell.zero_state(3))
        target = T.placeholder(np.float32, (3, 6), name="target")
        T.train.AdamOptimizer(1e-2).minimize(T.losses.mean_squared_error(target, out))
    feeds = {"xs": np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)}
    _check_control_flow(g, {"xs": xs}, {"h": out}, feeds, tmp_path, "Loop")


def test_loop_freezes_from_a_checkpoint_dir(tmp_path: Path) -> None:
    # Forward only: trainer.import_graph cannot yet re-import a graph holding a loop's gradient
    # (a control edge to a later StackPush), so this graph has no optimizer.
    g = T.Graph()
    with g.as_default():
        xs = T.placeholder(np.float32, (5, 3, 4), name="xs")
        cell = T.layers.LSTMCell(6, 4)
        out, _ = T.layers.dynamic_rnn(cell, xs, cell.zero_state(3))
        init, saver = T.global_variables_initializer(), T.Saver()
    session = T.Session(g)
    session.run(init)
    saver.save(session, str(tmp_path / "ckpt" / "model"), global_step=0)
    feeds = {"xs": np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)}
    from_dir = freeze(tmp_path / "ckpt", {"xs": "xs"}, {"h": out.name})  # the loop records stored with the graph
    want = trainer_outputs(session, feeds, {"xs": xs}, {"h": out})["h"]
    np.testing.assert_allclose(edge_run(from_dir, feeds)["h"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["missing", "corrupt", "no_graph"])
def test_damaged_checkpoint_is_refused_naming_the_file(trained, tmp_path: Path, damage: str) -> None:
    _, directory, path, _ = trained
    copy = tmp_path / "ckpt"
    copy.mkdir()
    for f in os.listdir(directory):
        (copy / f).write_bytes((Path(directory) / f).read_bytes())
    shard = copy / (Path(path).name + ".ckpt")  # the file of the prefix Saver.save returned
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


def test_a_checkpoint_holding_slots_under_their_old_names_still_freezes(tmp_path):
    # Slots were saved as w/Adam/m, w/Adam/v before they took TF's names (w/Adam, w/Adam_1).
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 2), name="x")
        w = T.Variable(np.asarray([[1.0], [2.0]], np.float32), name="w")
        y = T.identity(T.matmul(x, w), name="y")
        opt = T.train.AdamOptimizer(0.1)
        train = opt.minimize(T.reduce_sum(y))
        old_names = {opt.get_slot(w, "m"): "w/Adam/m", opt.get_slot(w, "v"): "w/Adam/v"}
        saver = T.train.Saver({old_names.get(v, v.op.name): v for v in T.global_variables()})
        init = T.global_variables_initializer()
    session = T.Session(g)
    session.run(init)
    session.run(train, {x: np.ones((1, 2), np.float32)})
    saver.save(session, str(tmp_path / "ckpt" / "model"), global_step=1)
    frozen = freeze(tmp_path / "ckpt", {"x": "x"}, {"y": "y"})
    feeds = {"x": np.asarray([[1.0, -1.0]], np.float32)}
    np.testing.assert_allclose(edge_run(frozen, feeds)["y"], session.run(y, {x: feeds["x"]}), rtol=1e-6)
