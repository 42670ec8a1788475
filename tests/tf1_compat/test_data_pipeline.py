"""A TF1 input-pipeline script, as tutorials write it, run with ``import trainer as tf`` on digits.

The training set comes in through a placeholder-fed initializable iterator (shuffled, mapped with
graph ops, batched, prefetched on a background thread), and the evaluation set through a second
dataset on a reinitializable iterator; the MLP reaches 95% test accuracy within a few seconds.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import trainer as tf

sklearn_datasets = pytest.importorskip("sklearn.datasets")


def digits():
    d = sklearn_datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    x, y = d.data[order].astype(np.float32), d.target[order].astype(np.int64)
    return (x[360:], y[360:]), (x[:360], y[:360])


@pytest.mark.slow
def test_tf_data_pipeline_trains_an_mlp_on_digits():
    started = time.monotonic()
    (x_train, y_train), (x_test, y_test) = digits()
    tf.reset_default_graph()
    tf.init.set_seed(0)

    # --- the script, as TF 1.x code spells it -----------------------------------------------
    features = tf.placeholder(np.float32, [None, 64], name="features")
    labels = tf.placeholder(np.int64, [None], name="labels")

    def normalize(image, label):
        return image / 16.0, label

    train_data = (tf.data.Dataset.from_tensor_slices((features, labels))
                  .shuffle(buffer_size=2000, seed=0)
                  .map(normalize, num_parallel_calls=2)
                  .batch(64)
                  .prefetch(2))
    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test)).map(normalize).batch(128)

    iterator = tf.data.Iterator.from_structure(train_data.output_types, train_data.output_shapes)
    images, targets = iterator.get_next()
    train_init = iterator.make_initializer(train_data)
    test_init = iterator.make_initializer(test_data)

    hidden = tf.layers.dense(images, 128, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=targets, logits=logits)
    train_op = tf.train.AdamOptimizer(1e-2).minimize(loss)
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), targets), np.float32))

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(8):
            sess.run(train_init, feed_dict={features: x_train, labels: y_train})
            while True:
                try:
                    sess.run(train_op)
                except tf.errors.OutOfRangeError:
                    break
        sess.run(test_init)
        right = 0.0
        while True:
            try:
                right += sess.run(correct)
            except tf.errors.OutOfRangeError:
                break
    accuracy = right / len(y_test)
    # -----------------------------------------------------------------------------------------
    assert accuracy >= 0.95, accuracy
    assert time.monotonic() - started < 60


def test_generator_pipeline_with_one_shot_iterator_counts_every_example():
    (x_train, y_train), _ = digits()
    tf.reset_default_graph()

    def examples():
        for x, y in zip(x_train[:100], y_train[:100]):
            yield {"pixels": x}, y

    data = tf.data.Dataset.from_generator(examples, ({"pixels": np.float32}, np.int64), ({"pixels": [64]}, []))
    batch = data.batch(32).make_one_shot_iterator().get_next()
    seen = []
    with tf.Session() as sess:
        try:
            while True:
                feats, labs = sess.run(batch)
                assert feats["pixels"].shape[1:] == (64,)
                seen.extend(labs.tolist())
        except tf.errors.OutOfRangeError:
            pass
    assert seen == y_train[:100].tolist()
