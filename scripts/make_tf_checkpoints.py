"""Write the TensorFlow-made checkpoints that tests/tf1_compat/test_tf_checkpoints.py restores.

Run with TensorFlow installed (any 2.x; the graph is TF 1.x code through tf.compat.v1), outside
flowstack's environment:

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
    /tmp/tfenv/bin/python scripts/make_tf_checkpoints.py tests/tf1_compat/tf_checkpoints

It trains a small softmax regression with Adam for three steps (so the folder holds the checkpoints
of steps 2 and 3, Adam's slots and global_step, and the values a fourth step reaches) and saves a second graph of variables of every
dtype a bundle stores differently, a third of partitioned variables, and writes what TensorFlow read back as ``expected.npz``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow.compat.v1 as tf


def regression(folder: Path) -> dict[str, np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(7)
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        w = tf.get_variable("softmax/w", [4, 3], initializer=tf.truncated_normal_initializer(stddev=0.5))
        b = tf.get_variable("softmax/b", [3], initializer=tf.zeros_initializer())
        logits = tf.matmul(x, w) + b
        loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
        step = tf.train.get_or_create_global_step()
        train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
        saver = tf.train.Saver(max_to_keep=2)
        rng = np.random.default_rng(0)
        feed = {x: rng.standard_normal((16, 4)).astype(np.float32), y: rng.integers(0, 3, 16)}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(train, feed)
                saver.save(sess, str(folder / "model.ckpt"), global_step=step)
            sess.run(train, feed)  # a fourth step: what training resumed from step 3 must reach
            after = {f"step4:{v.op.name}": value for v, value in zip(tf.global_variables(),
                                                                       sess.run(tf.global_variables()))}
    reader = tf.train.load_checkpoint(str(folder / "model.ckpt-3"))
    return {**{f"model.ckpt-3:{name}": reader.get_tensor(name) for name in reader.get_variable_to_shape_map()},
            **after, "feed:x": feed[x], "feed:y": feed[y]}


def dtypes(folder: Path) -> dict[str, np.ndarray]:
    values = {
        "f64": np.linspace(-1, 1, 6).reshape(2, 3),
        "f16": np.array([1.5, -2.25, 65504], np.float16),
        "i8": np.array([-128, 0, 127], np.int8),
        "u8": np.array([0, 255], np.uint8),
        "i16": np.array([-3, 300], np.int16),
        "i32": np.arange(5, dtype=np.int32),
        "i64": np.array([2**40, -1], np.int64),
        "flag": np.array([True, False, True]),
        "scalar": np.float32(3.25),
        "empty": np.zeros((0, 4), np.float32),
        "words": np.array([b"", b"a", b"tf" * 200, b"\xff\x00"], dtype=object),
        "nested/scope/deep": np.ones((2, 2, 2), np.float32),
    }
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.Variable(v, name=k) for k, v in values.items()]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver(variables).save(sess, str(folder / "dtypes.ckpt"), write_meta_graph=False,
                                           write_state=False)
    reader = tf.train.load_checkpoint(str(folder / "dtypes.ckpt"))
    return {f"dtypes.ckpt:{name}": reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def partitioned(folder: Path) -> dict[str, np.ndarray]:
    """Variables split by partitioners, as TF 1.x embeddings are: saved as slices of one tensor."""
    graph = tf.Graph()
    with graph.as_default():
        parts = {"emb": (tf.get_variable("emb", [10, 3], partitioner=tf.fixed_size_partitioner(3),
                                         initializer=tf.random_normal_initializer(seed=1)), 0),
                 "wide": (tf.get_variable("wide", [130, 2], partitioner=tf.fixed_size_partitioner(2),
                                          initializer=tf.random_normal_initializer(seed=2)), 0),
                 "cols": (tf.get_variable("cols", [2, 70], partitioner=tf.fixed_size_partitioner(2, axis=1),
                                          initializer=tf.random_normal_initializer(seed=3)), 1)}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.train.Saver().save(sess, str(folder / "partitioned.ckpt"), write_meta_graph=False, write_state=False)
            return {f"partitioned.ckpt:{name}": sess.run(tf.concat(list(v), axis=axis))
                    for name, (v, axis) in parts.items()}


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    expected = {**regression(out), **dtypes(out), **partitioned(out)}
    for meta in out.glob("*.meta"):
        meta.unlink()  # graphs are rebuilt in Python by the tests, as TF1 scripts do
    np.savez(out / "expected.npz", **{k: np.asarray(v, dtype="S") if np.asarray(v).dtype == object else v
                                      for k, v in expected.items()})


if __name__ == "__main__":
    main(sys.argv[1])
