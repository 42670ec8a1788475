"""A traced ``Session.run`` as TF1 scripts ask for one: ``options=RunOptions(trace_level=FULL_TRACE)``
and ``run_metadata=RunMetadata()`` give per-kernel step stats, a Chrome trace, and a TensorBoard record."""

from __future__ import annotations

import glob
import json

import numpy as np
import pytest

import trainer as tf
from trainer.step_stats import Timeline


def _model():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(np.ones((3, 2), np.float32), name="w")
        y = tf.nn.relu(tf.matmul(x, w, name="product"), name="activation")
        init = tf.global_variables_initializer()
    return g, x, y, init


def test_full_trace_records_every_kernel_the_run_ran():
    g, x, y, init = _model()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        meta = tf.RunMetadata()
        out = sess.run(y, {x: np.ones((2, 3), np.float32)}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                       run_metadata=meta)
        plain = tf.RunMetadata()
        sess.run(y, {x: np.ones((2, 3), np.float32)}, run_metadata=plain)  # no trace asked: nothing recorded
    np.testing.assert_array_equal(out, np.full((2, 2), 3.0, np.float32))
    nodes = {n.node_name: n for d in meta.step_stats.dev_stats for n in d.node_stats}
    assert {"product", "activation"} <= set(nodes), sorted(nodes)
    assert nodes["product"].timeline_label.startswith("product = MatMul(")
    assert all(n.all_end_rel_micros >= 0 and n.all_start_micros > 0 for n in nodes.values())
    assert plain.step_stats is None
    trace = json.loads(Timeline(meta.step_stats).generate_chrome_trace_format())
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {"MatMul", "Relu"} <= {e["name"] for e in ops} and min(e["ts"] for e in ops) == 0


def test_monitored_session_passes_the_trace_request_through():
    g, x, y, _ = _model()
    with g.as_default():
        tf.train.get_or_create_global_step()
    meta = tf.RunMetadata()
    with g.as_default(), tf.train.MonitoredSession() as sess:
        sess.run(y, {x: np.ones((1, 3), np.float32)}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
    assert "product" in {n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats}


def test_file_writer_records_run_metadata_for_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import config_pb2, event_pb2

    from trainer.data.tfrecord import tf_record_iterator

    g, x, y, init = _model()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        meta = tf.RunMetadata()
        sess.run(y, {x: np.ones((1, 3), np.float32)}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_run_metadata(meta, "step7", global_step=7)
    events = [event_pb2.Event.FromString(r) for f in glob.glob(str(tmp_path / "events*")) for r in tf_record_iterator(f)]
    tagged = [e for e in events if e.HasField("tagged_run_metadata")]
    assert len(tagged) == 1 and tagged[0].tagged_run_metadata.tag == "step7" and tagged[0].step == 7
    recorded = config_pb2.RunMetadata.FromString(tagged[0].tagged_run_metadata.run_metadata)
    assert "product" in {n.node_name for d in recorded.step_stats.dev_stats for n in d.node_stats}


def test_a_timeline_of_an_untraced_run_says_how_to_trace():
    with pytest.raises(ValueError, match="trace_level=FULL_TRACE"):
        Timeline(tf.RunMetadata().step_stats)
