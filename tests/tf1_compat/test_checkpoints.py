"""TF1 checkpoint scripts run unchanged: a checkpoint is named by its prefix, as in TensorFlow 1.15.

Each test is written as a TF1 script (``import trainer as tf``) and asserts what TF 1.15 gives:
``save`` returns the prefix (``./model.ckpt-3``), ``restore``, ``latest_checkpoint``,
``get_checkpoint_state``, ``checkpoint_exists`` and the readers take it, a ``.meta`` beside each
checkpoint lets another script rebuild the graph with ``import_meta_graph``. On disk a checkpoint
is one file, ``<prefix>.ckpt``, plus ``<prefix>.meta``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import trainer as tf
from trainer.saver import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
X = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)


def _linear_model():
    """``y = x @ w + b`` trained toward zero, with a global step and the train op in a collection."""
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable([[0.5], [-0.25]], name="w")
    b = tf.Variable([0.1], name="b")
    y = tf.add(tf.matmul(x, w), b, name="y")
    step = tf.train.get_or_create_global_step()
    loss = tf.reduce_mean(tf.square(y), name="loss")
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    tf.add_to_collection("train_op", train_op)
    return x, w, y, loss, step, train_op


def test_save_returns_the_prefix_that_restore_takes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, "./model.ckpt") == "./model.ckpt"
        saved = sess.run(w)
        sess.run(train_op, {x: X})
        assert not np.array_equal(sess.run(w), saved)
        saver.restore(sess, "./model.ckpt")
        np.testing.assert_array_equal(sess.run(w), saved)
    assert tf.train.checkpoint_exists("./model.ckpt")
    assert not tf.train.checkpoint_exists("./model")
    assert tf.train.latest_checkpoint("./") == "./model.ckpt"
    assert {"model.ckpt.meta", "checkpoint"} <= set(os.listdir("."))


def test_global_step_names_end_in_the_step_as_scripts_parse_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver(max_to_keep=2)
    paths = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, {x: X})
            paths.append(saver.save(sess, "./model.ckpt", global_step=step))
    assert paths == ["./model.ckpt-1", "./model.ckpt-2", "./model.ckpt-3"]
    ckpt = tf.train.get_checkpoint_state("./")
    assert ckpt.model_checkpoint_path == "./model.ckpt-3"
    assert ckpt.all_model_checkpoint_paths == ["./model.ckpt-2", "./model.ckpt-3"]
    assert int(ckpt.model_checkpoint_path.split("-")[-1]) == 3  # the ubiquitous resume idiom
    assert tf.train.latest_checkpoint("./") == "./model.ckpt-3"
    # the oldest checkpoint is rotated out together with its meta graph
    assert not tf.train.checkpoint_exists("./model.ckpt-1") and not os.path.exists("model.ckpt-1.meta")
    assert all(os.path.exists(p + ".meta") for p in paths[1:])
    assert tf.train.get_checkpoint_mtimes(paths) == [os.path.getmtime(p + ".ckpt") for p in paths[1:]]


def test_saver_takes_tf_arguments_and_lists_its_last_checkpoints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver(tf.global_variables(), max_to_keep=2, sharded=True, pad_step_number=True,
                           save_relative_paths=True, write_version=2, name="saver")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = [saver.save(sess, "./model.ckpt", global_step=i) for i in (1, 2, 3)]
    assert paths == ["./model.ckpt-00000001", "./model.ckpt-00000002", "./model.ckpt-00000003"]
    assert saver.last_checkpoints == paths[1:]
    assert sorted(p.name for p in tmp_path.glob("*.meta")) == ["model.ckpt-00000002.meta", "model.ckpt-00000003.meta"]
    with pytest.raises(ValueError, match="reshape not supported"):
        tf.train.Saver(reshape=True)


def test_keep_checkpoint_every_n_hours_keeps_rotated_checkpoints_out_of_the_index(tmp_path):
    import time

    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        paths = [saver.save(sess, str(tmp_path / "model"), global_step=1)]
        later = time.time() + 1.5 * 3600  # as if model-1 were written 1.5 hours into training
        os.utime(paths[0] + ".ckpt", (later, later))
        paths += [saver.save(sess, str(tmp_path / "model"), global_step=i) for i in (2, 3)]
    assert [tf.train.checkpoint_exists(p) for p in paths] == [True, False, True]  # model-1 kept, model-2 rotated
    assert os.path.exists(paths[0] + ".meta") and not os.path.exists(paths[1] + ".meta")
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == [paths[2]]
    assert tf.train.latest_checkpoint(str(tmp_path)) == paths[2]


def test_readers_take_the_prefix_or_the_folder(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=7)
        want = sess.run(w)
    assert prefix == str(tmp_path / "model.ckpt-7")
    for source in (prefix, str(tmp_path)):
        assert dict(tf.train.list_variables(source)) == {"b": [1], "global_step": [], "w": [2, 1]}
        np.testing.assert_array_equal(tf.train.load_variable(source, "w"), want)
        reader = tf.train.load_checkpoint(source)
        np.testing.assert_array_equal(reader.get_tensor("w"), want)
        assert reader.get_variable_to_shape_map()["w"] == [2, 1]


def test_import_meta_graph_restores_and_continues_training_in_one_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, w, y, loss, step, train_op = _linear_model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, {x: X})
        tf.train.Saver().save(sess, "./model.ckpt", global_step=step)
        want_y, want_loss = sess.run([y, loss], {x: X})

    tf.reset_default_graph()
    saver = tf.train.import_meta_graph("model.ckpt-3.meta")
    with tf.Session() as sess:
        saver.restore(sess, tf.train.latest_checkpoint("./"))
        g = tf.get_default_graph()
        x, y = g.get_tensor_by_name("x:0"), g.get_tensor_by_name("y:0")
        np.testing.assert_array_equal(sess.run(y, {x: X}), want_y)
        train_op = tf.get_collection("train_op")[0]
        loss = g.get_tensor_by_name("loss:0")
        sess.run(train_op, {x: X})
        assert sess.run(loss, {x: X}) < want_loss
        assert sess.run(tf.train.get_global_step()) == 4
        assert [v.op.name for v in tf.trainable_variables()] == ["w", "b"]
        assert saver.save(sess, "./model.ckpt", global_step=tf.train.get_global_step()) == "./model.ckpt-4"
    assert tf.train.latest_checkpoint("./") == "./model.ckpt-4"


TRAIN_SCRIPT = """
import numpy as np
import trainer as tf

x = tf.placeholder(tf.float32, [None, 2], name="x")
y_ = tf.placeholder(tf.float32, [None, 1], name="y_")
w = tf.Variable(tf.zeros([2, 1]), name="w")
y = tf.matmul(x, w, name="y")
loss = tf.reduce_mean(tf.square(y - y_))
step = tf.Variable(0, trainable=False, name="global_step")
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
tf.add_to_collection("train_op", train_op)
tf.add_to_collection("loss", loss)
saver = tf.train.Saver()
X = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
Y = X @ np.array([[2], [-1]], np.float32)
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(20):
        sess.run(train_op, {x: X, y_: Y})
    print(saver.save(sess, "./model.ckpt", global_step=step))
    print(float(sess.run(loss, {x: X, y_: Y})))
"""

RESTORE_SCRIPT = """
import numpy as np
import trainer as tf

saver = tf.train.import_meta_graph("model.ckpt-20.meta")
X = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
Y = X @ np.array([[2], [-1]], np.float32)
with tf.Session() as sess:
    saver.restore(sess, tf.train.latest_checkpoint("./"))
    g = tf.get_default_graph()
    x = g.get_tensor_by_name("x:0")
    y_ = g.get_tensor_by_name("y_:0")
    y = g.get_tensor_by_name("y:0")
    train_op = tf.get_collection("train_op")[0]
    loss = tf.get_collection("loss")[0]
    print(float(sess.run(loss, {x: X, y_: Y})))
    for i in range(20):
        sess.run(train_op, {x: X, y_: Y})
    print(float(sess.run(loss, {x: X, y_: Y})))
    print(sess.run(y, {x: [[1.0, 0.0]]})[0, 0])
    ckpt = tf.train.get_checkpoint_state("./")
    print(int(ckpt.model_checkpoint_path.split("-")[-1]))
"""


def _run_script(source: str, cwd: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_restore_in_another_script_with_import_meta_graph(tmp_path):
    prefix, trained_loss = _run_script(TRAIN_SCRIPT, tmp_path)
    assert prefix == "./model.ckpt-20"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "graph.npz", "model.ckpt-20.ckpt", "model.ckpt-20.meta"]
    restored_loss, continued_loss, prediction, step = _run_script(RESTORE_SCRIPT, tmp_path)
    assert float(restored_loss) == pytest.approx(float(trained_loss), rel=1e-6)  # the trained weights came back
    assert float(continued_loss) < float(restored_loss)  # and training went on from them
    assert float(prediction) == pytest.approx(2.0, abs=0.3)
    assert int(step) == 20  # get_checkpoint_state still names the checkpoint this script restored


def test_export_meta_graph_then_import_into_an_empty_graph(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    tf.add_to_collection("hyper", 0.05)
    tf.add_to_collection("hyper", "sgd")
    meta_graph_def = tf.train.export_meta_graph(str(tmp_path / "graph.meta"))
    assert meta_graph_def.description["meta_collections"]["train_op"] == [{"op": train_op.name}]

    tf.reset_default_graph()  # the returned MetaGraphDef imports like the file
    assert tf.train.import_meta_graph(meta_graph_def) is not None
    assert tf.get_collection("hyper") == [0.05, "sgd"]
    tf.reset_default_graph()
    assert tf.train.import_meta_graph(str(tmp_path / "graph.meta")) is not None
    g = tf.get_default_graph()
    assert tf.get_collection("hyper") == [0.05, "sgd"]
    assert tf.get_collection("train_op")[0] is g.get_operation_by_name(train_op.name)
    assert [v.op.name for v in tf.global_variables()] == ["w", "b", "global_step"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(g.get_tensor_by_name("y:0"), {g.get_tensor_by_name("x:0"): X}),
                                   X @ np.array([[0.5], [-0.25]], np.float32) + 0.1, rtol=1e-6)


def test_a_partitioned_variable_restores_through_the_meta_graph(tmp_path, tf_log):
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(2)):
        table = tf.get_variable("table", [5, 3])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run(tf.convert_to_tensor(table))
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    assert [n for n, _ in tf.train.list_variables(prefix)] == [table.name]  # saved whole, by its logical name
    tf.reset_default_graph()
    saver = tf.train.import_meta_graph(prefix + ".meta")
    (restored,) = tf.get_collection("partitioned_variables")
    assert (restored.name, restored.shape, len(restored)) == (table.name, (5, 3), 2)
    with tf.Session() as sess:
        saver.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(restored)), want)
    assert "cannot be written" not in tf_log.text


def test_collection_items_that_cannot_be_written_are_left_out_with_a_warning(tmp_path, tf_log):
    x, w, y, loss, step, train_op = _linear_model()
    tf.add_to_collection("mixed", y)
    tf.add_to_collection("mixed", object())
    tf.train.export_meta_graph(str(tmp_path / "graph.meta"))
    assert "collection 'mixed' holds a object, which cannot be written; left out" in tf_log.text
    tf_log.clear()
    tf.train.export_meta_graph(str(tmp_path / "graph.meta"))  # said once, not at every save
    assert "cannot be written" not in tf_log.text
    tf.reset_default_graph()
    tf.train.import_meta_graph(str(tmp_path / "graph.meta"))
    assert tf.get_collection("mixed") == [tf.get_default_graph().get_tensor_by_name("y:0")]



def test_queue_runners_go_through_the_meta_graph(tmp_path, tf_log):
    """An input pipeline of queues restores with its runners, as TF's QueueRunnerDef carries them:
    import_meta_graph, start_queue_runners, and the batches flow again."""
    values = tf.constant(np.arange(12, dtype=np.float32).reshape(6, 2))
    (row,) = tf.train.slice_input_producer([values], shuffle=False)
    (batch,) = tf.train.batch([row], batch_size=3, name="rows")
    tf.identity(batch, name="out")
    prefix = str(tmp_path / "model.ckpt")
    tf.train.export_meta_graph(prefix + ".meta")
    assert "cannot be written" not in tf_log.text
    runners = len(tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS))
    assert runners == 2  # the producer's and the batch's

    tf.reset_default_graph()
    tf.train.import_meta_graph(prefix + ".meta")
    restored = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
    assert len(restored) == runners
    out = tf.get_default_graph().get_tensor_by_name("out:0")
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = [sess.run(out) for _ in range(4)]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=10)
    np.testing.assert_array_equal(np.concatenate(got[:2]), np.arange(12, dtype=np.float32).reshape(6, 2))


def test_a_runner_feeding_python_values_is_left_out_with_a_warning(tmp_path, tf_log):
    from trainer.queues import QueueRunner

    queue = tf.FIFOQueue(4, tf.float32)
    value = tf.placeholder(tf.float32, [])
    QueueRunner(queue, [queue.enqueue(value)], feed_fn=lambda: {value: 1.0})  # flowstack's feeding runner
    tf.train.export_meta_graph(str(tmp_path / "graph.meta"))
    assert "holds a QueueRunner, which cannot be written" in tf_log.text

def test_a_saver_over_named_variables_keeps_its_names_through_the_meta_graph(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver({"weights": w})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "model"))
        want = sess.run(w)
    assert [n for n, _ in tf.train.list_variables(prefix)] == ["weights"]
    tf.reset_default_graph()
    restorer = tf.train.import_meta_graph(prefix + ".meta")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        restorer.restore(sess, prefix)
        np.testing.assert_array_equal(sess.run(tf.get_default_graph().get_tensor_by_name("w:0")), want)


def test_checkpoints_written_before_prefixes_still_restore(tmp_path):
    """Older flowstack returned and indexed ``<prefix>.ckpt``; those paths and folders still work."""
    x, w, y, loss, step, train_op = _linear_model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "model"), global_step=5, write_meta_graph=False)
        want = sess.run(w)
    (tmp_path / "checkpoint").write_text(json.dumps({  # the index an older Saver wrote: absolute file paths
        "model_checkpoint_path": str(tmp_path / "model-5.ckpt"),
        "all_model_checkpoint_paths": [str(tmp_path / "model-5.ckpt")]}))
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model-5")
    for old_path in (str(tmp_path / "model-5.ckpt"), tf.train.latest_checkpoint(str(tmp_path))):
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(w.assign(tf.zeros([2, 1])))
            tf.train.Saver().restore(sess, old_path)
            np.testing.assert_array_equal(sess.run(w), want)
        assert tf.train.checkpoint_exists(old_path)
    assert not os.path.exists(tmp_path / "model-5.meta")  # write_meta_graph=False, as in TF


def test_monitored_training_session_checkpoints_are_prefixes_with_meta_graphs(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=2,
                                           hooks=[tf.train.StopAtStepHook(last_step=4)]) as sess:
        while not sess.should_stop():
            sess.run(train_op, {x: X})
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert int(latest.split("-")[-1]) == 4 and tf.train.checkpoint_exists(latest)
    assert os.path.exists(latest + ".meta")
    tf.reset_default_graph()
    saver = tf.train.import_meta_graph(latest + ".meta")
    with tf.Session() as sess:
        saver.restore(sess, latest)
        assert sess.run(tf.train.get_global_step()) == 4


# -- Scaffold, MonitoredSession, SingularMonitoredSession ----------------------------------------
def test_singular_monitored_session_restores_and_a_saver_hook_saves(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    scaffold = tf.train.Scaffold()
    hooks = [tf.train.StopAtStepHook(last_step=3),
             tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=scaffold)]
    with tf.train.SingularMonitoredSession(hooks=hooks, scaffold=scaffold, checkpoint_dir=str(tmp_path)) as sess:
        while not sess.should_stop():
            sess.run(train_op, {x: X})
        trained = sess.run(w)
        assert isinstance(sess.raw_session(), tf.Session)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model-3")

    tf.reset_default_graph()
    x, w, y, loss, step, train_op = _linear_model()
    creator = tf.train.ChiefSessionCreator(checkpoint_dir=str(tmp_path))
    with tf.train.MonitoredSession(session_creator=creator) as sess:
        np.testing.assert_array_equal(sess.run(w), trained)  # restored, not initialized
        assert sess.run(step) == 3
        assert creator.restored_from == str(tmp_path / "model-3")


def test_scaffold_init_fn_runs_when_there_is_no_checkpoint(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    calls = []

    def init_fn(scaffold, session):
        calls.append(scaffold)
        session.run(w.assign([[3.0], [4.0]]))

    scaffold = tf.train.Scaffold(init_fn=init_fn)
    with tf.train.MonitoredSession(tf.train.ChiefSessionCreator(scaffold, checkpoint_dir=str(tmp_path))) as sess:
        np.testing.assert_array_equal(sess.run(w), [[3.0], [4.0]])
    assert calls == [scaffold] and isinstance(scaffold.saver, tf.train.Saver)


def test_a_monitored_session_ends_normally_when_the_input_runs_out():
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(3, dtype=np.float32))
    value = dataset.make_one_shot_iterator().get_next()
    seen = []
    with tf.train.MonitoredSession() as sess:
        while not sess.should_stop():
            seen.append(float(sess.run(value)))
    assert seen == [0.0, 1.0, 2.0]


# -- init_from_checkpoint -------------------------------------------------------------------------
def _pretrained(folder: Path) -> dict:
    with tf.variable_scope("encoder"):
        tf.get_variable("kernel", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
        tf.get_variable("bias", initializer=np.ones(3, np.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(folder / "pretrained.ckpt"))
    tf.reset_default_graph()
    return {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "bias": np.ones(3, np.float32)}


def test_init_from_checkpoint_maps_scopes_and_single_variables(tmp_path):
    want = _pretrained(tmp_path)
    with tf.variable_scope("model/enc"):
        kernel = tf.get_variable("kernel", [2, 3])
        bias = tf.get_variable("bias", [3])
    other = tf.get_variable("other_bias", [3])
    tf.train.init_from_checkpoint(str(tmp_path / "pretrained.ckpt"), {"encoder/": "model/enc/"})
    tf.train.init_from_checkpoint(str(tmp_path), {"encoder/bias": other})  # a folder: its newest checkpoint
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(kernel), want["kernel"])
        np.testing.assert_array_equal(sess.run(bias), want["bias"])
        np.testing.assert_array_equal(sess.run(other), want["bias"])


def test_init_from_checkpoint_names_what_does_not_fit(tmp_path):
    _pretrained(tmp_path)
    prefix = str(tmp_path / "pretrained.ckpt")
    with tf.variable_scope("enc"):
        tf.get_variable("kernel", [3, 3])
        tf.get_variable("extra", [1])
    with pytest.raises(ValueError, match=r"'encoder/extra' \(for variable 'enc/extra'\) is not in checkpoint"):
        tf.train.init_from_checkpoint(prefix, {"encoder/": "enc/"})
    with pytest.raises(ValueError, match=r"'enc/kernel' is float32\(3, 3\), tensor 'encoder/kernel'.*\(2, 3\)"):
        tf.train.init_from_checkpoint(prefix, {"encoder/kernel": "enc/kernel"})
    with pytest.raises(ValueError, match="tensor 'encoder/nope' is not in checkpoint"):
        tf.train.init_from_checkpoint(prefix, {"encoder/nope": "enc/kernel"})
    with pytest.raises(CheckpointError, match="'.*pretrained.ckpt-1' does not exist"):
        tf.train.init_from_checkpoint(prefix + "-1", {"/": "/"})


# -- tf.train's checkpoint-state helpers ----------------------------------------------------------
def _three_checkpoints(folder: Path) -> list[str]:
    x, w, y, loss, step, train_op = _linear_model()
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return [saver.save(sess, str(folder / "model.ckpt"), global_step=i) for i in (1, 2, 3)]


def test_update_checkpoint_state_and_remove_checkpoint(tmp_path):
    paths = _three_checkpoints(tmp_path)
    tf.train.remove_checkpoint(paths[2])
    assert not tf.train.checkpoint_exists(paths[2]) and not os.path.exists(paths[2] + ".meta")
    assert tf.train.latest_checkpoint(str(tmp_path)) == paths[1]  # taken out of the index too: no warning

    tf.train.update_checkpoint_state(str(tmp_path), "model.ckpt-2")  # relative to the folder, as TF takes it
    ckpt = tf.train.get_checkpoint_state(str(tmp_path))
    assert (ckpt.model_checkpoint_path, ckpt.all_model_checkpoint_paths) == (paths[1], [paths[1]])
    tf.train.update_checkpoint_state(str(tmp_path), paths[1], all_model_checkpoint_paths=paths[:2])
    assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == paths[:2]
    assert tf.train.get_checkpoint_mtimes(paths) == [os.path.getmtime(p + ".ckpt") for p in paths[:2]]

    # Checkpoint safety outranks the index: a complete checkpoint newer than the one the index names
    # is what a save interrupted before its index update leaves, so it stays the newest, with a warning.
    tf.train.update_checkpoint_state(str(tmp_path), paths[0], all_model_checkpoint_paths=paths[:1])
    with pytest.warns(tf.saver.CheckpointWarning, match="'model.ckpt-2.ckpt' .* newer than the index"):
        assert tf.train.latest_checkpoint(str(tmp_path)) == paths[1]

    with pytest.raises(ValueError, match="not in .*folder"):
        tf.train.update_checkpoint_state(str(tmp_path / "other"), paths[0])


def test_checkpoints_iterator_yields_each_new_checkpoint_and_stops_at_the_timeout(tmp_path):
    paths = _three_checkpoints(tmp_path)
    timeouts = []
    found = list(tf.train.checkpoints_iterator(str(tmp_path), timeout=0.2,
                                               timeout_fn=lambda: timeouts.append(1) or True))
    assert found == [paths[-1]] and timeouts == [1]
    assert list(tf.train.checkpoints_iterator(str(tmp_path / "empty"), timeout=0.1)) == []


# -- bad input ------------------------------------------------------------------------------------
def test_restoring_a_prefix_that_does_not_exist_names_it(tmp_path):
    x, w, y, loss, step, train_op = _linear_model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=1)
        missing = str(tmp_path / "model.ckpt-2")
        with pytest.raises(CheckpointError, match=f"checkpoint '{missing}' does not exist"):
            tf.train.Saver().restore(sess, missing)
        with pytest.raises(ValueError, match="save_path is None"):
            tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(tmp_path / "nothing")))
    with pytest.raises(CheckpointError, match="model.ckpt-2"):
        tf.train.load_variable(missing, "w")


def _saved_meta(folder: Path) -> Path:
    x, w, y, loss, step, train_op = _linear_model()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = tf.train.Saver().save(sess, str(folder / "model.ckpt"), global_step=1)
    tf.reset_default_graph()
    return Path(prefix + ".meta")


def test_a_missing_meta_graph_is_named(tmp_path):
    with pytest.raises(tf.GraphError, match="model.ckpt-9.meta' does not exist.*write_meta_graph"):
        tf.train.import_meta_graph(str(tmp_path / "model.ckpt-9.meta"))


@pytest.mark.parametrize("damage", ["truncated", "not an archive", "empty"])
def test_a_damaged_meta_graph_is_an_error_naming_the_file(tmp_path, damage):
    meta = _saved_meta(tmp_path)
    data = meta.read_bytes()
    meta.write_bytes({"truncated": data[: len(data) // 2], "not an archive": b"model_checkpoint_path: x",
                      "empty": b""}[damage])
    with pytest.raises(tf.GraphError, match=f"meta graph '{meta}' is unreadable"):
        tf.train.import_meta_graph(str(meta))
    assert not tf.get_default_graph().nodes  # nothing half-imported


def test_a_meta_graph_naming_a_node_it_lacks_is_an_error(tmp_path):
    from trainer.checkpoint_format import json_member, write_npz

    meta = _saved_meta(tmp_path)
    with np.load(meta, allow_pickle=False) as data:
        members = {k[:-4] if k.endswith(".npy") else k: data[k] for k in data.files}
    desc = json.loads(bytes(members["__graph__"]).decode())
    desc["meta_collections"]["train_op"] = [{"op": "no_such_op"}]
    members["__graph__"] = json_member(desc)
    with open(meta, "wb") as f:
        write_npz(f, members)
    with pytest.raises(tf.GraphError, match="does not fit this graph.*no_such_op"):
        tf.train.import_meta_graph(str(meta))


def test_importing_into_a_graph_that_has_the_names_already_is_an_error(tmp_path):
    meta = _saved_meta(tmp_path)
    tf.placeholder(tf.float32, [None, 2], name="x")
    with pytest.raises(tf.GraphError, match="clashes"):
        tf.train.import_meta_graph(str(meta))
