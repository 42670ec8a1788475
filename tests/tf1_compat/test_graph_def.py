"""TF1's freeze-and-ship workflow: ``convert_variables_to_constants``, write the GraphDef, read it
back in a fresh graph with ``import_graph_def`` (with ``input_map`` and ``return_elements``), and
``TFLiteConverter.from_frozen_graph``."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def trained(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, [None, 3], name="input")
    w = tf.Variable(rng.standard_normal((3, 4)).astype(np.float32), name="w")
    b = tf.Variable(rng.standard_normal(4).astype(np.float32), name="b")
    y = tf.nn.softmax(tf.matmul(x, w) + b, name="output")
    loss = tf.reduce_sum(y)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return x, y, train


def test_freeze_write_read_and_run_elsewhere(tmp_path):
    xs = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    x, y, train = trained()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, {x: xs})
        expected = sess.run(y, {x: xs})
        frozen = tf.graph_util.convert_variables_to_constants(sess, sess.graph.as_graph_def(), ["output"])
    ops = {n.op for n in frozen.node}
    assert "Variable" not in ops and "Assign" not in ops  # only what "output" needs, variables as constants
    assert [n.name for n in frozen.node if n.name in ("input", "output")] == ["input", "output"]
    path = tf.train.write_graph(frozen, str(tmp_path), "frozen.pb", as_text=False)

    with tf.Graph().as_default() as g:
        graph_def = tf.GraphDef()
        with tf.gfile.GFile(path, "rb") as f:
            graph_def.ParseFromString(f.read())
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=g) as sess:
            got = sess.run("output:0", {"input:0": xs})  # fetched and fed by name, as frozen-graph scripts do
    np.testing.assert_allclose(got, expected, rtol=1e-6)

    with tf.Graph().as_default() as g:
        fresh = tf.placeholder(tf.float32, [None, 3], name="images")
        (out,) = tf.import_graph_def(graph_def, input_map={"input:0": fresh * 1.0}, return_elements=["output:0"])
        assert out.name == "import/output:0"
        with tf.Session(graph=g) as sess:
            np.testing.assert_allclose(sess.run(out, {fresh: xs}), expected, rtol=1e-6)

    content = tf.lite.TFLiteConverter.from_frozen_graph(path, ["input"], ["output"]).convert()
    runner = tf.lite.Interpreter(model_content=content).get_signature_runner()
    np.testing.assert_allclose(runner(input=xs)["output"], expected, rtol=1e-5, atol=1e-6)


def test_misuse_is_named(tmp_path):
    x, y, _ = trained()
    graph_def = tf.get_default_graph().as_graph_def()
    with pytest.raises(AssertionError, match="nowhere is not in graph"):
        tf.graph_util.extract_sub_graph(graph_def, ["nowhere"])
    with pytest.raises(ValueError, match="not a flowstack graph"):
        tf.GraphDef().ParseFromString(b"\x08\x01garbage")
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="input_map names 'nope:0'"):
            tf.import_graph_def(graph_def, input_map={"nope:0": tf.constant(1.0)})
    (tmp_path / "g.pb").write_bytes(graph_def.SerializeToString())
    with pytest.raises(ValueError, match="no node 'missing'"):
        tf.lite.TFLiteConverter.from_frozen_graph(str(tmp_path / "g.pb"), ["input"], ["missing"])


def test_remove_training_nodes_keeps_the_result():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.identity(tf.identity(x * 2.0), name="y")
    tf.add(y, 1.0, name="z")
    trimmed = tf.graph_util.remove_training_nodes(tf.get_default_graph().as_graph_def(), protected_nodes=["z"])
    assert not any(n.op == "Identity" for n in trimmed.node)
    with tf.Graph().as_default() as g:
        tf.import_graph_def(trimmed, name="")
        with tf.Session(graph=g) as sess:
            assert sess.run(g.get_tensor_by_name("z:0"), {g.get_tensor_by_name("x:0"): [[1.0, 2.0]]}).tolist() == [[3.0, 5.0]]


def test_string_constants_survive_a_graph_file():
    text = tf.constant(["a b", "é"], name="text")
    raw = tf.constant(np.array([b"\x00\xff", b""], dtype=object), name="raw")
    data = tf.get_default_graph().as_graph_def().SerializeToString()
    with tf.Graph().as_default() as g:
        graph_def = tf.GraphDef()
        graph_def.ParseFromString(data)
        tf.import_graph_def(graph_def, name="")
        with tf.Session(graph=g) as sess:
            got_text, got_raw = sess.run(["text:0", "raw:0"])
    assert got_text.tolist() == [b"a b", "é".encode()] and got_raw.tolist() == [b"\x00\xff", b""]
    assert text.dtype == raw.dtype == tf.string
