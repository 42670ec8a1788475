"""TensorFlow 1.x checkpoint code runs unchanged (issue 21): ``tf.train.Saver`` with a dict or a list,
and ``tf.train.CheckpointSaverHook`` under MonitoredTrainingSession and the Estimator."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable
from trainer.saver import load_checkpoint


def _graph(w_value=1.0, b_value=2.0):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.full((2, 3), w_value, np.float32), name="weights")
        b = tf.Variable(np.full((3,), b_value, np.float32), name="biases")
        init = tf.global_variables_initializer()
    return g, w, b, init


def test_saver_with_a_dict_saves_under_the_given_names_and_restores_into_others(tmp_path):
    g, w, b, init = _graph()
    with g.as_default():
        saver = tf.train.Saver({"layer/w": w, "layer/b": b})
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "model"), global_step=3)
    _, values = load_checkpoint(path)
    assert sorted(values) == ["layer/b", "layer/w"]

    g2 = tf.Graph()
    with g2.as_default():
        other = tf.Variable(np.zeros((2, 3), np.float32), name="renamed")
        restorer = tf.train.Saver({"layer/w": other})
    with tf.Session(graph=g2) as sess:
        restorer.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(other), np.ones((2, 3), np.float32))


def test_saver_with_a_list_saves_only_those_variables(tmp_path):
    g, w, b, init = _graph()
    with g.as_default():
        saver = tf.train.Saver([w])
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "model"))
    assert sorted(load_checkpoint(path)[1]) == ["weights"]

    g2, w2, b2, init2 = _graph(w_value=5.0, b_value=7.0)
    with g2.as_default():
        restorer = tf.train.Saver([w2])
    with tf.Session(graph=g2) as sess:
        sess.run(init2)
        restorer.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w2), np.ones((2, 3), np.float32))
        np.testing.assert_array_equal(sess.run(b2), np.full((3,), 7.0, np.float32))  # not in the list: kept


def test_saver_dict_takes_a_partitioned_variable_whole(tmp_path):
    g = tf.Graph()
    with g.as_default():
        table = partitioned_variable("emb", (5, 2), initializer=np.arange(10, dtype=np.float32).reshape(5, 2),
                                     partitioner=fixed_size_partitioner(2))
        saver = tf.train.Saver({"embedding": table})
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "m"))
    meta, values = load_checkpoint(path)
    np.testing.assert_array_equal(values["embedding"], np.arange(10, dtype=np.float32).reshape(5, 2))
    assert {info["full_name"] for info in meta["slices"].values()} == {"embedding"}

    g2 = tf.Graph()
    with g2.as_default():
        plain = tf.Variable(np.zeros((5, 2), np.float32), name="plain")
        restorer = tf.train.Saver({"embedding": plain})
    with tf.Session(graph=g2) as sess:
        restorer.restore(sess, path)
        np.testing.assert_array_equal(sess.run(plain), np.arange(10, dtype=np.float32).reshape(5, 2))


def test_saver_var_list_errors_name_the_entry():
    g, w, b, _ = _graph()
    with g.as_default():
        with pytest.raises(TypeError, match=r"var_list\['w'\] is a Tensor"):
            tf.train.Saver({"w": w * 2.0})
        with pytest.raises(ValueError, match=r"var_list\['both'\] holds 2 variables"):
            tf.train.Saver({"both": [w, b]})
        with pytest.raises(TypeError, match=r"var_list\[1\] is a str"):
            tf.train.Saver([w, "biases"])
        with pytest.raises(ValueError, match="no variables to save"):
            tf.train.Saver({})
