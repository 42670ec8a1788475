"""Saver: atomic checkpoints, max_to_keep, the checkpoint state file, graph files without pickle,
mismatch errors, and resuming after a SIGKILL in the middle of a save."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

import trainer as T
from tests.trainer.counting_model import counting_model
from trainer.saver import CheckpointError

ROOT = Path(__file__).resolve().parents[2]


def _model(seed=0, width=3):
    g = T.Graph()
    with g.as_default():
        T.init.set_seed(seed)
        x = T.placeholder(np.float32, (None, 2), name="x")
        y = T.layers.dense(x, width, name="fc")
        step = T.train.get_or_create_global_step()
        inc = step.assign_add(np.int64(1))
        init = T.global_variables_initializer()
        saver = T.Saver(max_to_keep=2)
    return g, x, y, inc, init, saver


def test_save_restore_roundtrip_and_max_to_keep(tmp_path):
    g, x, y, inc, init, saver = _model()
    s = T.Session(g)
    s.run(init)
    paths = []
    for _ in range(3):
        s.run(inc)
        paths.append(saver.save(s, str(tmp_path / "model"), global_step=int(s.run(g.tensor("global_step:0")))))
    # save returns TF's prefix; the file is <prefix>.ckpt
    assert not os.path.exists(paths[0] + ".ckpt") and all(os.path.exists(p + ".ckpt") for p in paths[1:])
    state = json.loads((tmp_path / "checkpoint").read_text())
    names = [os.path.basename(p) + ".ckpt" for p in paths]  # relative to the folder, so a copy stays whole
    assert state["model_checkpoint_path"] == names[-1] and state["all_model_checkpoint_paths"] == names[1:]
    assert T.latest_checkpoint(str(tmp_path)) == paths[-1]
    want = s.variable_values()

    g2, *_rest, init2, saver2 = _model(seed=5)
    s2 = T.Session(g2)
    s2.run(init2)
    saver2.restore(s2, paths[-1])
    got = s2.variable_values()
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_array_equal(want[k], got[k])


def test_checkpoint_is_npz_without_pickle(tmp_path):
    g, x, y, inc, init, saver = _model()
    s = T.Session(g)
    s.run(init)
    path = saver.save(s, str(tmp_path / "m"), global_step=0)
    with np.load(path + ".ckpt", allow_pickle=False) as data:
        meta = json.loads(bytes(data["__meta__"]))
        assert meta["format"] == "flowstack-checkpoint"
        assert data["fc/kernel"].shape == (2, 3)
    with zipfile.ZipFile(tmp_path / "graph.npz") as z:
        assert "__graph__.npy" in z.namelist()


def test_restore_mismatch_names_the_variable(tmp_path):
    g, x, y, inc, init, saver = _model(width=3)
    s = T.Session(g)
    s.run(init)
    path = saver.save(s, str(tmp_path / "m"))
    g2, *_rest, init2, saver2 = _model(width=4)
    s2 = T.Session(g2)
    s2.run(init2)
    with pytest.raises(CheckpointError, match=r"fc/kernel.*float32\(2, 4\).*float32\(2, 3\)"):
        saver2.restore(s2, path)
    with pytest.raises(CheckpointError, match="does not exist"):
        saver2.restore(s2, str(tmp_path / "nope.ckpt"))


def test_import_graph_from_checkpoint_directory(tmp_path):
    g, x, y, inc, init, saver = _model()
    s = T.Session(g)
    s.run(init)
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    feed = np.ones((2, 2), np.float32)
    want = s.run(y, {x: feed})

    g2 = T.import_graph(str(tmp_path))
    assert [n.name for n in g2.nodes] == [n.name for n in g.nodes]
    assert [v.name for v in T.trainable_variables(g2)] == ["fc/kernel:0", "fc/bias:0"]
    s2 = T.Session(g2)
    with g2.as_default():
        saver2 = T.Saver()
    saver2.restore(s2, path)
    np.testing.assert_allclose(s2.run(y.name, {"x:0": feed}), want)


def test_monitored_session_resumes(tmp_path):
    g, v, train = counting_model(2)
    with T.MonitoredTrainingSession(str(tmp_path), graph=g, save_steps=3, save_secs=None) as sess:
        for _ in range(7):
            sess.run(train)
    g, v, train = counting_model(2)
    sess = T.MonitoredTrainingSession(str(tmp_path), graph=g, save_steps=3, save_secs=None, max_steps=10)
    assert sess.restored_from.endswith("model-7") and sess.step == 7
    while not sess.should_stop():
        sess.run(train)
    assert sess.step == 10 and np.array_equal(sess.session.run(v), [10, 10])
    sess.close()


_KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    import trainer as T
    import trainer.kernels.training as K  # the Save kernel's module

    g = T.Graph()
    with g.as_default():
        v = T.Variable(np.zeros(200_000, np.float32), name="big")
        step = T.train.get_or_create_global_step()
        with T.control_dependencies([v.assign_add(np.ones(200_000, np.float32))]):
            train = step.assign_add(np.int64(1))
    sess = T.MonitoredTrainingSession({ckdir!r}, graph=g, save_steps=1, save_secs=None)
    start = sess.step
    for i in range(2):
        sess.run(train)
    # Die in the middle of the next save: after the temp file is partly written, before rename.
    real = K.write_npz
    def dying(f, arrays):
        f.write(b"partial garbage")
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    K.write_npz = dying
    sess.run(train)
""")


def test_sigkill_during_save_resumes_from_last_complete_checkpoint(tmp_path):
    ckdir = str(tmp_path / "ck")
    script = _KILL_SCRIPT.format(root=str(ROOT), ckdir=ckdir)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    latest = T.latest_checkpoint(ckdir)
    assert latest.endswith("model-2")
    assert any(name.startswith(".tmp-") for name in os.listdir(ckdir))  # the torn write stayed a temp file

    g = T.Graph()
    with g.as_default():
        v = T.Variable(np.zeros(200_000, np.float32), name="big")
        T.train.get_or_create_global_step()
    sess = T.MonitoredTrainingSession(ckdir, graph=g, save_secs=None)
    assert sess.step == 2
    np.testing.assert_array_equal(sess.session.run(v), np.full(200_000, 2.0, np.float32))
    sess.close()


def test_import_graph_with_loop_gradients_trains_on(tmp_path):
    """A while_loop LSTM with its optimizer: the loop gradient's control edges point at nodes made
    later in the graph; the imported graph must rebuild them and train exactly like the original."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (4, 2, 3), name="x")
        zeros = np.zeros((2, 5), np.float32)
        out, _ = T.layers.dynamic_rnn(T.layers.LSTMCell(5, 3), x, (T.constant(zeros), T.constant(zeros)))
        loss = T.reduce_sum(out * out)
        train = T.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = T.global_variables_initializer()
        saver = T.Saver()
    s = T.Session(g)
    s.run(init)
    path = saver.save(s, str(tmp_path / "m"), global_step=1)
    feed = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    s.run(train, {x: feed})
    want = s.run(loss, {x: feed})

    g2 = T.import_graph(str(tmp_path))
    s2 = T.Session(g2)
    with g2.as_default():
        saver2 = T.Saver()
    saver2.restore(s2, path)
    s2.run(train.name, {"x:0": feed})
    np.testing.assert_allclose(s2.run(loss.name, {"x:0": feed}), want, rtol=1e-6)


def test_restore_takes_the_prefix_tf1_scripts_saved_to(tmp_path):
    g = T.Graph()
    with g.as_default():
        v = T.Variable(np.arange(3, dtype=np.float32), name="v")
        saver = T.train.Saver()
        sess = T.Session(g)
        sess.run(v.initializer)
        prefix = str(tmp_path / "model.ckpt")
        saver.save(sess, prefix)  # TF1: writes the checkpoint "model.ckpt"
        saver.save(sess, prefix, global_step=3)  # and "model.ckpt-3"
        for path in (prefix, prefix + "-3"):
            sess.run(v.assign(np.zeros(3, np.float32)))
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(v), [0.0, 1.0, 2.0])
        assert T.train.checkpoint_exists(prefix + "-3")
        with pytest.raises(CheckpointError, match="does not exist"):
            saver.restore(sess, prefix + "-4")
