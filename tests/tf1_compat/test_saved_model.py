"""``tf.saved_model`` as TF1 scripts use it: save after training, load in a fresh graph and session,
and serve the same folder with ``flowstack serve`` through TensorFlow Serving's REST API."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import trainer as tf

pytest.importorskip("sklearn")


def train_softmax(digits, steps: int = 150):
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    y_ = tf.placeholder(tf.float32, [None, 10], name="y_")
    w = tf.Variable(tf.zeros([64, 10]), name="w")
    b = tf.Variable(tf.zeros([10]), name="b")
    logits = tf.matmul(x, w) + b
    probs = tf.nn.softmax(logits, name="probabilities")
    classes = tf.argmax(logits, 1, name="classes")
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=logits))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    for i in range(steps):
        lo = (i * 100) % 1400
        sess.run(train, {x: digits["x_train"][lo:lo + 100], y_: digits["y_train_1h"][lo:lo + 100]})
    return sess, x, probs, classes


def test_simple_save_then_load_in_a_fresh_graph_predicts_the_same(digits, tmp_path):
    sess, x, probs, classes = train_softmax(digits)
    expected = sess.run(probs, {x: digits["x_test"]})
    export_dir = str(tmp_path / "models" / "digits" / "1")
    # --- the script ---------------------------------------------------------------------------
    tf.saved_model.simple_save(sess, export_dir, inputs={"x": x}, outputs={"probabilities": probs, "classes": classes})
    sess.close()
    with tf.Session(graph=tf.Graph()) as sess2:
        meta = tf.saved_model.loader.load(sess2, [tf.saved_model.tag_constants.SERVING], export_dir)
        sig = meta.signature_def[tf.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        x2 = sess2.graph.get_tensor_by_name(sig.inputs["x"].name)
        p2 = sess2.graph.get_tensor_by_name(sig.outputs["probabilities"].name)
        got = sess2.run(p2, {x2: digits["x_test"]})
    # ------------------------------------------------------------------------------------------
    np.testing.assert_array_equal(got, expected)
    assert sig.method_name == tf.saved_model.signature_constants.PREDICT_METHOD_NAME
    assert sig.inputs["x"].tensor_shape.as_list() == [None, 64] and sig.inputs["x"].dtype == "float32"
    assert meta.meta_info_def.tags == ["serve"]
    assert tf.saved_model.loader.maybe_saved_model_directory(export_dir)

    import edge_runtime

    served = edge_runtime.load(os.path.join(export_dir, "model.flow")).run({"x": digits["x_test"]})
    np.testing.assert_allclose(served["probabilities"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(served["classes"], expected.argmax(1))


def test_the_saved_folder_is_served_through_tf_serving_rest(digits, tmp_path):
    httpx = pytest.importorskip("httpx")
    from tests.serving.conftest import running_server

    sess, x, probs, classes = train_softmax(digits, steps=50)
    expected = sess.run(probs, {x: digits["x_test"][:8]})
    tf.saved_model.simple_save(sess, str(tmp_path / "models" / "digits" / "1"), {"x": x}, {"probabilities": probs})
    sess.close()
    with running_server(tmp_path / "models") as server:
        reply = httpx.post(f"{server.http_url}/v1/models/digits:predict", timeout=30,
                           json={"signature_name": "serving_default", "instances": digits["x_test"][:8].tolist()})
    assert reply.status_code == 200, reply.text
    np.testing.assert_allclose(np.array(reply.json()["predictions"]), expected, rtol=1e-5, atol=1e-6)


def test_builder_with_a_training_and_a_serving_meta_graph(digits, tmp_path):
    sess, x, probs, classes = train_softmax(digits, steps=20)
    expected = sess.run(classes, {x: digits["x_test"]})
    export_dir = str(tmp_path / "export")
    utils, sdu = tf.saved_model.utils, tf.saved_model.signature_def_utils
    signature = sdu.build_signature_def(inputs={"images": utils.build_tensor_info(x)},
                                        outputs={"classes": utils.build_tensor_info(classes)},
                                        method_name=tf.saved_model.signature_constants.PREDICT_METHOD_NAME)
    assert sdu.is_valid_signature(signature)
    builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
    builder.add_meta_graph_and_variables(sess, [tf.saved_model.tag_constants.TRAINING])
    builder.add_meta_graph([tf.saved_model.tag_constants.SERVING], signature_def_map={"predict_images": signature},
                           main_op=tf.saved_model.main_op.main_op())
    assert builder.save() == export_dir.encode()
    sess.close()
    # the serving graph was frozen from the saved variables: its only signature is the one served
    import edge_runtime

    served = edge_runtime.load(os.path.join(export_dir, "model.flow")).run({"images": digits["x_test"]})
    np.testing.assert_array_equal(served["classes"], expected)
    for tags in (["train"], ["serve"]):
        with tf.Session(graph=tf.Graph()) as s:
            meta = tf.saved_model.load(s, tags, export_dir)
            assert meta.meta_info_def.tags == tags
    with tf.Session(graph=tf.Graph()) as s, pytest.raises(RuntimeError, match=r"tags \['gpu', 'serve'\] could not be found.*\[\['train'\], \['serve'\]\]"):
        tf.saved_model.loader.load(s, ["serve", "gpu"], export_dir)


def test_misuse_is_refused_as_tensorflow_refuses_it(digits, tmp_path):
    sess, x, probs, _ = train_softmax(digits, steps=1)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file").write_text("x")
    with pytest.raises(AssertionError, match="already exists, and isn't empty"):
        tf.saved_model.builder.SavedModelBuilder(str(taken))
    builder = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "a"))
    with pytest.raises(AssertionError, match="add_meta_graph_and_variables"):
        builder.add_meta_graph(["serve"])
    with pytest.raises(ValueError, match="Prediction outputs cannot be None or empty"):
        tf.saved_model.signature_def_utils.predict_signature_def({"x": x}, {})
    bad = tf.saved_model.signature_def_utils.build_signature_def({"x": tf.saved_model.utils.build_tensor_info(x)}, {})
    assert not tf.saved_model.signature_def_utils.is_valid_signature(bad)


def test_a_damaged_or_missing_saved_model_is_named(digits, tmp_path):
    sess, x, probs, _ = train_softmax(digits, steps=1)
    export_dir = tmp_path / "m"
    tf.saved_model.simple_save(sess, str(export_dir), {"x": x}, {"p": probs})
    with tf.Session(graph=tf.Graph()) as s, pytest.raises(tf.saved_model.SavedModelError, match="SavedModel file does not exist"):
        tf.saved_model.loader.load(s, ["serve"], str(tmp_path / "nowhere"))
    description = export_dir / "saved_model.json"
    desc = json.loads(description.read_text())
    desc["meta_graphs"][0]["meta_graph"] = "../../etc/passwd"
    description.write_text(json.dumps(desc))
    with tf.Session(graph=tf.Graph()) as s, pytest.raises(tf.saved_model.SavedModelError, match="not a file of the folder"):
        tf.saved_model.loader.load(s, ["serve"], str(export_dir))
    description.write_bytes(b"{\"format\": ")
    with tf.Session(graph=tf.Graph()) as s, pytest.raises(tf.saved_model.SavedModelError, match=r"saved_model.json is damaged"):
        tf.saved_model.loader.load(s, ["serve"], str(export_dir))


def test_a_graph_the_exporter_cannot_freeze_still_saves_and_loads(tmp_path, tf_log):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.random_shuffle(x) * 2.0  # a training-only op: the edge runtime has no kernel for it
    with tf.Session() as sess:
        tf.saved_model.simple_save(sess, str(tmp_path / "m"), {"x": x}, {"y": y})
    assert "could not be frozen for serving" in tf_log.text and "RandomUniform" in tf_log.text
    assert not (tmp_path / "m" / "model.flow").exists()
    served = json.loads((tmp_path / "m" / "saved_model.json").read_text())["served"]
    assert served["signature"] == "serving_default" and served["error"]
    with tf.Session(graph=tf.Graph()) as s:
        meta = tf.saved_model.loader.load(s, ["serve"], str(tmp_path / "m"))
        assert set(meta.signature_def["serving_default"].outputs) == {"y"}


def test_an_export_path_given_as_bytes_saves_and_loads(tmp_path):
    """Estimator.export_saved_model returns the export folder as bytes (as TensorFlow's does), and
    scripts hand that straight to the loader."""
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.identity(x * 2.0, name="y")
    folder = os.fsencode(tmp_path / "sm")
    with tf.Session() as sess:
        tf.saved_model.simple_save(sess, folder, inputs={"x": x}, outputs={"y": y})
    assert tf.saved_model.loader.maybe_saved_model_directory(folder)
    tf.reset_default_graph()
    with tf.Session() as sess:
        meta = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], folder)
        signature = meta.signature_def["serving_default"]
        got = sess.run(signature.outputs["y"].name, {signature.inputs["x"].name: [[1.0, -2.0]]})
    np.testing.assert_array_equal(got, [[2.0, -4.0]])
