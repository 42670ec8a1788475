"""tf.data: sources, transformations, iterators and their errors, run in sessions."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import trainer as tf
from trainer.data import DataStructureError


def drain(sess, element, limit=10_000):
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(element))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("the iterator did not end")


def values(dataset):
    g = tf.get_default_graph()
    with tf.Session(g) as sess:
        return drain(sess, dataset.make_one_shot_iterator().get_next())


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def test_from_tensor_slices_keeps_tuple_and_dict_structure():
    xs, ys = np.arange(6, dtype=np.float32).reshape(3, 2), np.array([7, 8, 9])
    ds = tf.data.Dataset.from_tensor_slices(({"x": xs}, ys))
    assert ds.output_types == ({"x": np.float32}, np.int64)
    assert ds.output_shapes == ({"x": (2,)}, ())
    assert tf.data.get_output_types(ds) == ds.output_types and tf.data.get_output_shapes(ds) == ds.output_shapes
    got = values(ds)
    assert [int(y) for _, y in got] == [7, 8, 9]
    assert got[1][0]["x"].tolist() == [2.0, 3.0]


def test_batch_remainder_and_static_shapes():
    ds = tf.data.Dataset.range(7)
    assert [b.tolist() for b in values(ds.batch(3))] == [[0, 1, 2], [3, 4, 5], [6]]
    dropped = ds.batch(3, drop_remainder=True)
    assert dropped.output_shapes == (3,)
    assert [b.tolist() for b in values(dropped)] == [[0, 1, 2], [3, 4, 5]]


def test_map_with_graph_ops_filter_take_skip_repeat():
    ds = (tf.data.Dataset.range(10).map(lambda v: v * 3).filter(lambda v: tf.equal(v, v * 1))
          .skip(2).take(4).repeat(2))
    assert [int(v) for v in values(ds)] == [6, 9, 12, 15] * 2


def test_map_parallel_keeps_order():
    ds = tf.data.Dataset.range(200).map(lambda v: tf.cast(v, np.float32) * 0.5, num_parallel_calls=4)
    assert [float(v) for v in values(ds)] == [i * 0.5 for i in range(200)]


def test_shuffle_is_a_permutation_seeded_and_reshuffled_per_epoch():
    ds = tf.data.Dataset.range(50).shuffle(20, seed=3).repeat(2)
    a = [int(v) for v in values(ds)]
    assert sorted(a[:50]) == list(range(50)) and sorted(a[50:]) == list(range(50))
    assert a[:50] != list(range(50)) and a[:50] != a[50:]
    assert [int(v) for v in values(ds)] == a  # same seed, same order
    fixed = tf.data.Dataset.range(30).shuffle(30, seed=1, reshuffle_each_iteration=False).repeat(2)
    b = [int(v) for v in values(fixed)]
    assert b[:30] == b[30:]


def test_batches_gathered_from_row_indices_equal_stacked_elements():
    xs = np.arange(300, dtype=np.float32).reshape(100, 3)
    ys = np.arange(100) % 7

    def pipeline(ds):
        return ds.shuffle(30, seed=5).repeat(3).skip(4).take(250).batch(16)

    source = tf.data.Dataset.from_tensor_slices((xs, ys))
    fast = values(pipeline(source))  # shuffle/repeat/skip/take over row indices, one gather per batch
    slow = values(pipeline(source.map(lambda x, y: (x, y))))  # a map in between: element by element
    assert len(fast) == len(slow) == 16
    for (fx, fy), (sx, sy) in zip(fast, slow):
        assert np.array_equal(fx, sx) and np.array_equal(fy, sy)
    rows = np.concatenate([b[0][:, 0] for b in fast])[:96] / 3  # the first epoch, less the 4 skipped
    assert len(set(rows.tolist())) == 96 and rows.tolist() != sorted(rows.tolist())


def test_zip_concatenate_enumerate_padded_batch_unbatch():
    a, b = tf.data.Dataset.range(3), tf.data.Dataset.range(10, 20)
    assert [(int(x), int(y)) for x, y in values(tf.data.Dataset.zip((a, b)))] == [(0, 10), (1, 11), (2, 12)]
    assert [int(v) for v in values(a.concatenate(tf.data.Dataset.range(5, 6)))] == [0, 1, 2, 5]
    assert [(int(i), int(v)) for i, v in values(b.take(2).enumerate())] == [(0, 10), (1, 11)]
    gen = tf.data.Dataset.from_generator(lambda: (np.arange(n) for n in (1, 3, 2)), np.int64, (None,))
    (batch,) = values(gen.padded_batch(3, padded_shapes=(None,), padding_values=-1))
    assert batch.tolist() == [[0, -1, -1], [0, 1, 2], [0, 1, -1]]
    assert [int(v) for v in values(tf.data.Dataset.range(5).batch(2).unbatch())] == [0, 1, 2, 3, 4]
    with pytest.raises(DataStructureError, match="concatenate"):
        a.concatenate(tf.data.Dataset.from_tensor_slices(np.zeros((2, 2), np.float32)))


def test_flat_map_and_interleave_follow_tensorflow_order():
    fm = tf.data.Dataset.range(3).flat_map(lambda v: tf.data.Dataset.from_tensors(v).repeat(2))
    assert [int(v) for v in values(fm)] == [0, 0, 1, 1, 2, 2]
    il = tf.data.Dataset.range(4).interleave(lambda v: tf.data.Dataset.from_tensors(v).repeat(3),
                                             cycle_length=2, block_length=2)
    assert [int(v) for v in values(il)] == [0, 0, 1, 1, 0, 1, 2, 2, 3, 3, 2, 3]  # TensorFlow 1.15's order


def test_from_generator_checks_each_element():
    def gen():
        yield np.ones(2, np.float32), 1
        yield np.ones(3, np.float32), 2  # wrong shape

    ds = tf.data.Dataset.from_generator(gen, (np.float32, np.int64), ((2,), ()))
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        sess.run(nxt)
        with pytest.raises(tf.errors.OpError, match=r"element 1 component 0: shape \(3,\) does not match the declared \(2,\)"):
            sess.run(nxt)
    bad = tf.data.Dataset.from_generator(lambda: iter([(1.0, 2.0, 3.0)]), (np.float32, np.float32))
    with tf.Session() as sess, pytest.raises(tf.errors.OpError, match=r"element 0 has structure \(x, x, x\).*\(x, x\)"):
        sess.run(bad.make_one_shot_iterator().get_next())


def test_initializable_iterator_feeds_placeholders_and_restarts():
    ph = tf.placeholder(np.float32, (None, 2))
    it = tf.data.Dataset.from_tensor_slices(ph).batch(2).make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="iterator 'Iterator' is not initialized"):
            sess.run(nxt)
        sess.run(it.initializer, {ph: np.ones((3, 2), np.float32)})
        assert [b.shape for b in drain(sess, nxt)] == [(2, 2), (1, 2)]
        with pytest.raises(tf.errors.OutOfRangeError):  # stays at the end
            sess.run(nxt)
        sess.run(it.initializer, {ph: np.zeros((4, 2), np.float32)})
        assert [b.shape for b in drain(sess, nxt)] == [(2, 2), (2, 2)]


def test_reinitializable_iterator_switches_datasets():
    train = tf.data.Dataset.range(3)
    test = tf.data.Dataset.range(100, 102)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    train_init, test_init = it.make_initializer(train), it.make_initializer(test)
    with tf.Session() as sess:
        sess.run(train_init)
        assert [int(v) for v in drain(sess, nxt)] == [0, 1, 2]
        sess.run(test_init)
        assert [int(v) for v in drain(sess, nxt)] == [100, 101]
    with pytest.raises(DataStructureError, match="make_initializer"):
        it.make_initializer(tf.data.Dataset.from_tensors(np.float32(1)))


def test_get_next_feeds_training_and_one_shot_iterators_are_per_session():
    xs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    x, y = tf.data.Dataset.from_tensor_slices((xs, ys)).repeat().batch(16).make_one_shot_iterator().get_next()
    w = tf.Variable(np.zeros((3, 1), np.float32))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    step = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(200):
            sess.run(step)
        assert sess.run(loss) < 1e-3
    with tf.Session() as a, tf.Session() as b:
        assert np.array_equal(a.run(x), b.run(x))  # each session starts its own pass


def test_concurrent_session_threads_share_one_iterator_without_loss():
    nxt = tf.data.Dataset.range(2000).prefetch(8).make_one_shot_iterator().get_next()
    seen, lock = [], threading.Lock()
    with tf.Session() as sess:
        def worker():
            got = drain(sess, nxt)
            with lock:
                seen.extend(int(v) for v in got)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
    assert sorted(seen) == list(range(2000))


def test_prefetch_reports_the_pipeline_error_at_get_next():
    def gen():
        yield 1
        raise RuntimeError("sensor unplugged")

    nxt = tf.data.Dataset.from_generator(gen, np.int64).prefetch(2).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert int(sess.run(nxt)) == 1
        with pytest.raises(tf.errors.OpError, match="sensor unplugged"):
            sess.run(nxt)


def test_map_function_errors_name_the_problem():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(DataStructureError, match="map function '_nothing' returned None"):
        ds.map(_nothing)
    with pytest.raises(DataStructureError, match="returned object"):
        ds.map(lambda v: (v, object()))
    with pytest.raises(DataStructureError, match="flat_map or interleave"):
        ds.map(lambda v: tf.data.Dataset.range(2))
    with pytest.raises(DataStructureError, match="scalar bool"):
        ds.filter(lambda v: v)


def _nothing(v):
    return None


def test_one_shot_iterator_refuses_placeholders_and_datasets_refuse_eager_iteration():
    ph = tf.placeholder(np.float32, (None,))
    with pytest.raises(DataStructureError, match="make_initializable_iterator"):
        tf.data.Dataset.from_tensor_slices(ph).make_one_shot_iterator()
    with pytest.raises(TypeError, match="make_one_shot_iterator"):
        iter(tf.data.Dataset.range(2))
    with pytest.raises(DataStructureError, match="share their first dimension"):
        tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(tf.errors.OpError, match="padded_batch"):
        values(tf.data.Dataset.from_generator(lambda: (np.zeros(n) for n in (1, 2)), np.float64).batch(2))
