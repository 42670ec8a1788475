"""``tf.py_func`` / ``tf.numpy_function``: Python called from the graph, in the session and in
``tf.data``, with TF's errors where it cannot go (a gradient, the edge runtime)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_a_python_function_runs_in_the_graph():
    x = tf.placeholder(tf.float32, [None])
    doubled = tf.py_func(lambda a: a * 2, [x], tf.float32)
    total, count = tf.numpy_function(lambda a: (a.sum(), np.int64(a.size)), [x], [tf.float32, tf.int64])
    doubled.set_shape([None])
    with tf.Session() as sess:
        got = sess.run([doubled, total, count], {x: [1.0, 2.5]})
    np.testing.assert_array_equal(got[0], [2.0, 5.0])
    assert got[1] == 3.5 and got[2] == 2 and got[2].dtype == np.int64


def test_py_func_inside_a_dataset_map():
    ds = tf.data.Dataset.from_tensor_slices(np.arange(6, dtype=np.float32))
    ds = ds.map(lambda v: tf.py_func(lambda a: np.float32(a * 10), [v], tf.float32)).batch(3)
    batch = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert sess.run(batch).tolist() == [0.0, 10.0, 20.0] and sess.run(batch).tolist() == [30.0, 40.0, 50.0]


def test_what_py_func_cannot_do_is_named(tmp_path):
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.py_func(lambda a: a * 2, [x], tf.float32, name="twice")
    wrong = tf.py_func(lambda a: (a, a), [x], tf.float32)
    with tf.Session() as sess:
        with pytest.raises(Exception, match="returned 2 values; Tout lists 1"):
            sess.run(wrong, {x: [1.0, 2.0]})
        with pytest.raises(LookupError, match="no gradient rule for op 'flowstack::PyFunc'"):
            tf.gradients(tf.reduce_sum(y), [x])
        from exporter.freeze import export_trained
        from exporter.freeze_source import FreezeError

        with pytest.raises(FreezeError, match="PyFunc"):
            export_trained(sess, str(tmp_path / "m.flow"), {"x": x}, {"y": y})
