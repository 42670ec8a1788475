"""tf.train.warm_start with VocabInfo remapping, and Estimator(warm_start_from=WarmStartSettings)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

OLD_EMB = np.array([[1, 1], [2, 2], [3, 3]], np.float32)  # rows of "a", "b", "c"
KERNEL = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
OUT = np.array([[1, 2, 3], [10, 20, 30]], np.float32)  # columns of "a", "b", "c"


@pytest.fixture()
def checkpoint(tmp_path):
    tf.reset_default_graph()
    emb = tf.get_variable("emb", initializer=tf.constant(OLD_EMB))
    tf.get_variable("dense/kernel", initializer=tf.constant(KERNEL))
    tf.get_variable("out", initializer=tf.constant(OUT))
    tf.get_variable("step", initializer=tf.constant(5.0), trainable=False)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "old" / "model.ckpt"))
    (tmp_path / "old_vocab.txt").write_text("a\nb\nc\n")
    (tmp_path / "new_vocab.txt").write_text("c\na\nd\n")
    tf.reset_default_graph()
    assert emb is not None
    return tmp_path, path


def test_warm_start_remaps_vocabulary_rows_and_renamed_variables(checkpoint):
    tmp, path = checkpoint
    emb = tf.get_variable("emb", [4, 2])  # c, a, d and one OOV bucket
    kernel = tf.get_variable("new_dense/kernel", [2, 2])
    step = tf.get_variable("step", [], trainable=False)
    info = tf.train.VocabInfo(new_vocab=str(tmp / "new_vocab.txt"), new_vocab_size=3, num_oov_buckets=1,
                              old_vocab=str(tmp / "old_vocab.txt"))
    tf.train.warm_start(path, vars_to_warm_start=".*", var_name_to_vocab_info={"emb": info},
                        var_name_to_prev_var_name={"new_dense/kernel": "dense/kernel"})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_emb, got_kernel, got_step = sess.run([emb, kernel, step])
    np.testing.assert_array_equal(got_emb, [[3, 3], [1, 1], [0, 0], [0, 0]])  # d and the OOV row: zeros
    np.testing.assert_array_equal(got_kernel, KERNEL)
    assert got_step != 5.0  # not trainable: a regex picks trainable variables only


def test_backup_initializer_list_of_scopes_and_bad_input(checkpoint):
    tmp, path = checkpoint
    out = tf.get_variable("out", [2, 3])  # axis 1: columns follow the vocabulary (c, zz, one OOV bucket)
    (tmp / "cols.txt").write_text("c\nzz\n")
    step = tf.get_variable("step", [], trainable=False)
    info = tf.estimator.VocabInfo(str(tmp / "cols.txt"), 2, 1, str(tmp / "old_vocab.txt"),
                                  backup_initializer=tf.constant_initializer(7.0), axis=1)
    tf.train.warm_start(path, vars_to_warm_start=["step"], var_name_to_vocab_info={"out": info})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_out, got_step = sess.run([out, step])
    assert got_step == 5.0  # a list of regexes reaches non-trainable variables
    np.testing.assert_array_equal(got_out, [[3, 7, 7], [30, 7, 7]])  # "zz" and the OOV column: the backup
    with pytest.raises(ValueError, match="were not used"):
        tf.train.warm_start(path, vars_to_warm_start=["step"], var_name_to_prev_var_name={"nope": "step"})
    with pytest.raises(ValueError, match="has shape"):
        tf.get_variable("dense/kernel", [3, 3])
        tf.train.warm_start(path, vars_to_warm_start="dense.*")
    with pytest.raises(ValueError, match="axis"):
        tf.train.VocabInfo("a", 1, 0, "b", axis=2)
    with pytest.raises(ValueError, match="MUST be set"):
        tf.estimator.WarmStartSettings("")


def test_estimator_warm_starts_the_chosen_layers(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    columns = [tf.feature_column.numeric_column("x", shape=(3,))]
    train = tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=50, num_epochs=None, shuffle=True)
    first = tf.estimator.DNNRegressor([4], columns, model_dir=str(tmp_path / "a"))
    first.train(train, steps=20)
    settings = tf.estimator.WarmStartSettings(str(tmp_path / "a"), vars_to_warm_start="dnn/hiddenlayer_0.*")
    second = tf.estimator.DNNRegressor([4], columns, model_dir=str(tmp_path / "b"), optimizer="SGD",
                                       learning_rate=1e-30, warm_start_from=settings)
    second.train(train, steps=1)
    names = [n for n in first.get_variable_names() if n.startswith("dnn/hiddenlayer_0/") and "Adagrad" not in n]
    assert names
    for name in names:
        np.testing.assert_allclose(second.get_variable_value(name), first.get_variable_value(name), rtol=1e-6)
    assert not np.allclose(second.get_variable_value("logits/kernel"), first.get_variable_value("logits/kernel"))
    with pytest.raises(ValueError, match="warm_start_from must be"):
        tf.estimator.Estimator(lambda features, labels, mode: None, warm_start_from=3)
