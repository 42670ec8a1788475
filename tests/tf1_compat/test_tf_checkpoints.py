"""Checkpoints TensorFlow wrote (V2 bundles: ``.index`` + ``.data-*``) restore unchanged: a TF1 user's
training resumes from them where TensorFlow left off.

The folder ``tf_checkpoints/`` was written by TensorFlow 2.21's ``tf.compat.v1.train.Saver``
(``scripts/make_tf_checkpoints.py``), with what TensorFlow read back and reached in ``expected.npz``.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import trainer as tf
from trainer.checkpoint_format import CheckpointError

FIXTURES = Path(__file__).parent / "tf_checkpoints"
EXPECTED = dict(np.load(FIXTURES / "expected.npz"))
WORDS = [b"", b"a", b"tf" * 200, b"\xff\x00"]  # the strings saved (the .npz drops trailing NULs)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(FIXTURES, copy)
    (copy / "expected.npz").unlink()
    return copy


def softmax_regression():
    """The graph scripts/make_tf_checkpoints.py trained, written again as its TF1 script would be."""
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    w = tf.get_variable("softmax/w", [4, 3], initializer=tf.truncated_normal_initializer(stddev=0.5))
    b = tf.get_variable("softmax/b", [3], initializer=tf.zeros_initializer())
    loss = tf.losses.sparse_softmax_cross_entropy(y, tf.matmul(x, w) + b)
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
    return {x: EXPECTED["feed:x"], y: EXPECTED["feed:y"]}, train


def test_training_resumes_from_a_tensorflow_checkpoint_where_tensorflow_left_off(folder: Path) -> None:
    with tf.Graph().as_default():
        feed, train = softmax_regression()
        saver = tf.train.Saver(max_to_keep=2)
        with tf.Session() as sess:
            latest = tf.train.latest_checkpoint(str(folder))
            assert latest == str(folder / "model.ckpt-3")
            saver.restore(sess, latest)
            sess.run(train, feed)
            for v in tf.global_variables():
                np.testing.assert_allclose(sess.run(v), EXPECTED[f"step4:{v.op.name}"], rtol=2e-6, atol=1e-7,
                                           err_msg=v.op.name)
            saved = saver.save(sess, str(folder / "model.ckpt"), global_step=tf.train.get_global_step())
    assert saved == str(folder / "model.ckpt-4")
    assert tf.train.latest_checkpoint(str(folder)) == saved
    # rotation (max_to_keep=2) dropped TensorFlow's step-2 checkpoint whole: index and data
    assert not list(folder.glob("model.ckpt-2*"))
    assert (folder / "model.ckpt-3.index").exists() and (folder / "model.ckpt-3.data-00000-of-00001").exists()


def test_every_dtype_a_bundle_stores_reads_as_tensorflow_reads_it(folder: Path) -> None:
    prefix = str(folder / "dtypes.ckpt")
    names = dict(tf.train.list_variables(prefix))
    assert names == {k.split(":", 1)[1]: list(v.shape) for k, v in EXPECTED.items() if k.startswith("dtypes.ckpt:")}
    for name in names:
        value, expected = tf.train.load_variable(prefix, name), EXPECTED[f"dtypes.ckpt:{name}"]
        if expected.dtype.kind == "S":
            assert value.dtype == object and value.tolist() == WORDS
        else:
            assert value.dtype == expected.dtype and value.shape == expected.shape
            np.testing.assert_array_equal(value, expected)

    with tf.Graph().as_default():
        f16 = tf.Variable(np.zeros(3, np.float16), name="f16")
        words = tf.Variable(np.array([b""] * 4, dtype=object), name="words")
        with tf.Session() as sess:
            tf.train.Saver([f16, words]).restore(sess, prefix)
            assert sess.run(f16).tolist() == EXPECTED["dtypes.ckpt:f16"].tolist()
            assert sess.run(words).tolist() == WORDS


def test_a_copied_tensorflow_folder_with_absolute_paths_reads_its_own_files(folder: Path) -> None:
    (folder / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/run/model.ckpt-3"\n'
                                       'all_model_checkpoint_paths: "/elsewhere/run/model.ckpt-2"\n'
                                       'all_model_checkpoint_paths: "/elsewhere/run/model.ckpt-3"\n')
    with pytest.warns(UserWarning, match="outside that folder"):
        assert tf.train.latest_checkpoint(str(folder)) == str(folder / "model.ckpt-3")


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "model.ckpt-3.index").write_bytes((f / "model.ckpt-3.index").read_bytes()[:-10]), "table magic"),
    (lambda f: flip_byte(f / "model.ckpt-3.index", 12), "fails its checksum"),
    (lambda f: flip_byte(f / "model.ckpt-3.data-00000-of-00001", -1), "fail their checksum"),
    (lambda f: (f / "model.ckpt-3.data-00000-of-00001").write_bytes(
        (f / "model.ckpt-3.data-00000-of-00001").read_bytes()[:100]), "truncated"),
    (lambda f: (f / "model.ckpt-3.data-00000-of-00001").unlink(), "data file is unreadable"),
])
def test_a_damaged_tensorflow_checkpoint_is_named_and_the_previous_one_restored(folder: Path, damage,
                                                                                 message: str) -> None:
    damage(folder)
    with pytest.raises(CheckpointError, match=message) as caught:
        tf.train.load_variable(str(folder / "model.ckpt-3"), "softmax/w")
    assert "model.ckpt-3" in str(caught.value)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert tf.train.latest_checkpoint(str(folder)) == str(folder / "model.ckpt-2")
    assert any("model.ckpt-3" in str(w.message) for w in seen)


def test_a_tensorflow_checkpoint_that_does_not_match_the_graph_says_what_differs(folder: Path) -> None:
    with tf.Graph().as_default():
        tf.get_variable("softmax/w", [5, 3])
        with tf.Session() as sess, pytest.raises(CheckpointError, match=r"softmax/w.*\(4, 3\)"):
            tf.train.Saver().restore(sess, str(folder / "model.ckpt-3"))


def test_partitioned_variables_restore_from_the_slices_tensorflow_saved(folder: Path) -> None:
    prefix = str(folder / "partitioned.ckpt")
    assert dict(tf.train.list_variables(prefix)) == {"cols": [2, 70], "emb": [10, 3], "wide": [130, 2]}
    with tf.Graph().as_default():
        parts = {"emb": (tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3)), 0),
                 "wide": (tf.get_variable("wide", [130, 2], partitioner=tf.fixed_size_partitioner(2)), 0),
                 "cols": (tf.get_variable("cols", [2, 70], partitioner=tf.fixed_size_partitioner(2, axis=1)), 1)}
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, prefix)
            for name, (variable, axis) in parts.items():
                whole = sess.run(tf.concat(list(variable), axis=axis))
                np.testing.assert_array_equal(whole, EXPECTED[f"partitioned.ckpt:{name}"], err_msg=name)

