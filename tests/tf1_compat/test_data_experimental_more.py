"""tf.data.experimental's grouping (group_by_window, bucket_by_sequence_length, group_by_reducer),
filtering (take_while, unique, ignore_errors), scan, cardinality and get_single_element, each run
through a session and checked against a plain-Python reference."""

from __future__ import annotations

import bisect

import numpy as np
import pytest

import trainer as tf
from trainer.nest import StructureError

experimental = tf.data.experimental
Dataset = tf.data.Dataset


def _all(dataset) -> list:
    """Every element of one pass; the pass must end with OutOfRangeError."""
    nxt = dataset.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        with pytest.raises(tf.errors.OutOfRangeError):
            while True:
                out.append(sess.run(nxt))
                assert len(out) < 10_000
    return out


def _ints(dataset) -> list:
    return [np.asarray(v).tolist() for v in _all(dataset)]


# -- group_by_window ------------------------------------------------------------------------------
def test_group_by_window_fills_windows_per_key_and_flushes_the_rest_in_key_order() -> None:
    values = [7, 2, 9, 4, 3, 12, 5, 8, 1, 6, 10]
    grouped = Dataset.from_tensor_slices(np.array(values, np.int64)).apply(
        experimental.group_by_window(lambda x: x % 3, lambda key, window: window.batch(10), window_size=3))
    expected, groups = [], {}
    for v in values:
        groups.setdefault(v % 3, []).append(v)
        if len(groups[v % 3]) == 3:
            expected.append(groups.pop(v % 3))
    expected += [groups[k] for k in sorted(groups)]
    assert _ints(grouped) == expected


def test_group_by_window_size_func_and_the_key_reach_the_reducer() -> None:
    def with_key(key, window):
        return Dataset.zip((Dataset.from_tensors(key).repeat(), window.batch(100)))

    grouped = Dataset.range(10).apply(
        experimental.group_by_window(lambda x: x % 2, with_key, window_size_func=lambda key: key + 2))
    got = [(int(k), b.tolist()) for k, b in _all(grouped)]
    assert got == [(0, [0, 2]), (1, [1, 3, 5]), (0, [4, 6]), (0, [8]), (1, [7, 9])]


def test_group_by_window_refuses_bad_functions_and_sizes() -> None:
    with pytest.raises(StructureError, match="key_func.*scalar"):
        Dataset.range(4).apply(experimental.group_by_window(lambda x: tf.stack([x, x]), lambda k, w: w, 2))
    with pytest.raises(StructureError, match="key_func.*scalar"):
        Dataset.range(4).apply(experimental.group_by_window(lambda x: (x, x), lambda k, w: w, 2))
    with pytest.raises(StructureError, match="reduce_func.*Dataset"):
        Dataset.range(4).apply(experimental.group_by_window(lambda x: x, lambda k, w: k, 2))
    with pytest.raises(ValueError, match="window_size"):
        experimental.group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError, match="window_size"):
        experimental.group_by_window(lambda x: x, lambda k, w: w, 2, lambda k: k)
    with pytest.raises(ValueError, match="window_size must be positive"):
        experimental.group_by_window(lambda x: x, lambda k, w: w, 0)


# -- bucket_by_sequence_length --------------------------------------------------------------------
def _sequences(lengths: list[int]) -> Dataset:
    rows = [np.arange(1, n + 1, dtype=np.int64) * 10 + i for i, n in enumerate(lengths)]
    return Dataset.from_generator(lambda: iter(rows), tf.int64, [None]), rows


def _reference_buckets(lengths, boundaries, sizes, drop_remainder=False) -> list[list[int]]:
    """Row indices per batch, in the order bucket_by_sequence_length emits them."""
    out, groups = [], {}
    for i, n in enumerate(lengths):
        b = bisect.bisect_right(boundaries, n)
        groups.setdefault(b, []).append(i)
        if len(groups[b]) == sizes[b]:
            out.append(groups.pop(b))
    out += [groups[b] for b in sorted(groups) if not drop_remainder]
    return out


def _padded(rows, indices, width, value=0) -> list:
    batch = np.full((len(indices), width), value, np.int64)
    for j, i in enumerate(indices):
        batch[j, :len(rows[i])] = rows[i]
    return batch.tolist()


def test_bucket_by_sequence_length_pads_each_batch_to_its_longest() -> None:
    lengths = [1, 5, 2, 7, 3, 9, 2, 4, 6, 1, 8, 3]
    boundaries, sizes = [3, 6], [2, 3, 2]
    ds, rows = _sequences(lengths)
    batches = ds.apply(experimental.bucket_by_sequence_length(lambda x: tf.shape(x)[0], boundaries, sizes))
    assert batches.output_shapes == (None, None)
    expected = [_padded(rows, idx, max(lengths[i] for i in idx))
                for idx in _reference_buckets(lengths, boundaries, sizes)]
    assert _ints(batches) == expected
    assert [len(b) for b in expected] == [2, 2, 3, 2, 2, 1]  # full buckets, then the flushed partial ones


def test_bucket_by_sequence_length_boundary_padding_values_and_drop_remainder() -> None:
    lengths = [1, 5, 2, 7, 3, 2, 4]
    boundaries, sizes = [3, 8], [2, 2, 2]
    ds, rows = _sequences(lengths)
    batches = ds.apply(experimental.bucket_by_sequence_length(
        lambda x: tf.shape(x)[0], boundaries, sizes, padding_values=np.int64(-1), pad_to_bucket_boundary=True,
        drop_remainder=True))
    expected = [_padded(rows, idx, boundaries[bisect.bisect_right(boundaries, lengths[idx[0]])] - 1, -1)
                for idx in _reference_buckets(lengths, boundaries, sizes, drop_remainder=True)]
    assert _ints(batches) == expected
    ds, rows = _sequences(lengths)
    unpadded = ds.apply(experimental.bucket_by_sequence_length(lambda x: tf.size(x), [2], [3, 3], no_padding=True))
    with pytest.raises(tf.errors.InvalidArgumentError, match="padded_batch"):
        _all(unpadded)  # rows of different lengths in one bucket cannot be batched unpadded


def test_bucket_by_sequence_length_refuses_lengths_past_the_last_boundary_when_padding_to_it() -> None:
    ds, _ = _sequences([1, 9])
    batches = ds.apply(experimental.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 5], [1, 1, 1],
                                                              pad_to_bucket_boundary=True))
    nxt = batches.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert sess.run(nxt).tolist() == [[10, 0]]
        with pytest.raises(tf.errors.InvalidArgumentError, match="length < max\\(bucket_boundaries\\)"):
            sess.run(nxt)


def test_bucket_by_sequence_length_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="bucket_batch_sizes.*bucket_boundaries"):
        experimental.bucket_by_sequence_length(lambda x: tf.size(x), [3, 5], [2, 2])
    with pytest.raises(ValueError, match="increasing"):
        experimental.bucket_by_sequence_length(lambda x: tf.size(x), [5, 3], [2, 2, 2])
    ds, _ = _sequences([1, 2])
    with pytest.raises(StructureError, match="element_length_func.*scalar"):
        ds.apply(experimental.bucket_by_sequence_length(lambda x: tf.shape(x), [3], [2, 2]))


def test_bucketed_digit_sequences_feed_an_lstm(digits) -> None:
    """Digit rows cut to lengths 8..64, bucketed, padded and run through dynamic_rnn with their lengths."""
    x, y = digits["x_train"][:60], digits["y_train"][:60]
    lengths = [8 + (i * 7) % 57 for i in range(len(x))]
    rows = [(x[i, :n], y[i]) for i, n in enumerate(lengths)]
    ds = Dataset.from_generator(lambda: iter(rows), (tf.float32, tf.int64), ([None], []))
    ds = ds.map(lambda seq, label: (seq, tf.shape(seq)[0], label))
    boundaries, sizes = [24, 48], [8, 6, 4]
    batches = ds.apply(experimental.bucket_by_sequence_length(lambda seq, n, label: n, boundaries, sizes))
    seqs, seq_len, labels = batches.make_one_shot_iterator().get_next()
    cell = tf.nn.rnn_cell.LSTMCell(4)
    _, state = tf.nn.dynamic_rnn(cell, tf.expand_dims(seqs, -1), sequence_length=seq_len, dtype=tf.float32)
    expected = _reference_buckets(lengths, boundaries, sizes)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for idx in expected:
            s, n, lab, h = sess.run([seqs, seq_len, labels, state.h])
            width = max(lengths[i] for i in idx)
            want = np.zeros((len(idx), width), np.float32)
            for j, i in enumerate(idx):
                want[j, :lengths[i]] = x[i, :lengths[i]]
            np.testing.assert_array_equal(s, want)
            assert n.tolist() == [lengths[i] for i in idx] and lab.tolist() == [int(y[i]) for i in idx]
            assert h.shape == (len(idx), 4) and np.isfinite(h).all()
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(seqs)


# -- group_by_reducer -----------------------------------------------------------------------------
def test_group_by_reducer_folds_each_key_in_first_seen_order() -> None:
    values = [5, 3, 8, 6, 1, 9, 4]
    reducer = experimental.Reducer(init_func=lambda key: (np.int64(0), np.int64(0)),
                                   reduce_func=lambda state, x: (state[0] + x, state[1] + 1),
                                   finalize_func=lambda total, count: (total, count))
    reduced = Dataset.from_tensor_slices(np.array(values, np.int64)).apply(
        experimental.group_by_reducer(lambda x: x % 3, reducer))
    sums: dict = {}
    for v in values:
        total, count = sums.get(v % 3, (0, 0))
        sums[v % 3] = (total + v, count + 1)
    assert [(int(t), int(c)) for t, c in _all(reduced)] == list(sums.values())
    with pytest.raises(TypeError, match="Reducer"):
        Dataset.range(3).apply(experimental.group_by_reducer(lambda x: x, lambda s, x: s))


# -- take_while, unique, ignore_errors ------------------------------------------------------------
def test_take_while_stops_at_the_first_false() -> None:
    values = [1, 3, 5, 6, 7, 9]
    kept = Dataset.from_tensor_slices(np.array(values, np.int64)).apply(
        experimental.take_while(lambda x: tf.equal(x % 2, 1)))
    assert _ints(kept) == [1, 3, 5]
    with pytest.raises(StructureError, match="predicate.*boolean"):
        Dataset.range(3).apply(experimental.take_while(lambda x: x))


def test_unique_keeps_first_occurrences_of_ints_and_strings() -> None:
    ints = np.array([3, 1, 3, 2, 1, 4, 2], np.int32)
    assert _ints(Dataset.from_tensor_slices(ints).apply(experimental.unique())) == list(dict.fromkeys(ints.tolist()))
    words = ["b", "a", "b", "c", "a"]
    got = [w.decode() if isinstance(w, bytes) else str(w) for w in
           _all(Dataset.from_tensor_slices(np.array(words)).apply(experimental.unique()))]
    assert got == ["b", "a", "c"]
    with pytest.raises(TypeError, match="tf.int32.*tf.int64.*tf.string"):
        Dataset.from_tensor_slices(np.array([1.0, 2.0])).apply(experimental.unique())
    with pytest.raises(StructureError, match="scalar"):
        Dataset.from_tensor_slices(np.zeros((3, 2), np.int64)).apply(experimental.unique())


def test_ignore_errors_skips_the_elements_a_map_fails_on() -> None:
    values = np.array([1.0, 0.0, 2.0, 0.0, 4.0], np.float32)

    def inverse(x):
        return tf.check_numerics(1.0 / x, "division by zero")

    failing = Dataset.from_tensor_slices(values).map(inverse)
    nxt = failing.make_one_shot_iterator().get_next()
    with tf.Session() as sess:  # without ignore_errors the failure surfaces from get_next
        assert sess.run(nxt) == 1.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="division by zero"):
            sess.run(nxt)
    for calls in (None, 2):
        tf.reset_default_graph()
        ds = Dataset.from_tensor_slices(values).map(inverse, num_parallel_calls=calls).apply(
            experimental.ignore_errors())
        assert [float(v) for v in _all(ds)] == [1.0 / v for v in values if v != 0]


# -- scan -----------------------------------------------------------------------------------------
def test_scan_carries_a_state_and_relaxes_its_shape() -> None:
    values = [4, 1, 7, 2, 9]
    running = Dataset.from_tensor_slices(np.array(values, np.int64)).apply(
        experimental.scan(np.int64(0), lambda total, x: (total + x, total * 10 + x)))
    expected, total = [], 0
    for v in values:
        expected.append(total * 10 + v)
        total += v
    assert _ints(running) == expected
    tf.reset_default_graph()
    grown = Dataset.range(4).apply(experimental.scan(
        np.zeros([0], np.int64), lambda seen, x: (tf.concat([seen, tf.expand_dims(x, 0)], 0), seen)))
    assert grown.output_shapes == (None,)
    assert _ints(grown) == [[], [0], [0, 1], [0, 1, 2]]
    with pytest.raises(StructureError, match="new_state, output_element"):
        Dataset.range(3).apply(experimental.scan(np.int64(0), lambda s, x: s + x))
    with pytest.raises(StructureError, match="scan_func.*state"):
        Dataset.range(3).apply(experimental.scan(np.int64(0), lambda s, x: (tf.cast(s, tf.float32), x)))


# -- rejection_resample ---------------------------------------------------------------------------
@pytest.mark.parametrize("initial_dist", [None, [0.6, 0.3, 0.1]])
def test_rejection_resample_moves_the_class_mix_to_the_target(initial_dist) -> None:
    labels = np.random.default_rng(0).choice(3, size=3000, p=[0.6, 0.3, 0.1]).astype(np.int32)
    ds = Dataset.from_tensor_slices((labels, np.arange(3000))).apply(
        experimental.rejection_resample(lambda label, index: label, [1 / 3, 1 / 3, 1 / 3], initial_dist, seed=1))
    assert ds.output_types == (tf.int32, (tf.int32, tf.int64))
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        drawn = [sess.run(nxt) for _ in range(900)]
    classes = np.array([int(c) for c, _ in drawn])
    assert all(int(c) == int(label) == labels[int(i)] for c, (label, i) in drawn)
    np.testing.assert_allclose(np.bincount(classes, minlength=3) / len(classes), [1 / 3] * 3, atol=0.05)


def test_rejection_resample_checks_its_distributions_and_classes() -> None:
    with pytest.raises(ValueError, match="target_dist"):
        Dataset.range(4).apply(experimental.rejection_resample(lambda x: x, [0.5, 0.6]))
    with pytest.raises(StructureError, match="class_func.*scalar integer"):
        Dataset.range(4).apply(experimental.rejection_resample(lambda x: tf.cast(x, tf.float32), [0.5, 0.5]))
    out_of_range = Dataset.range(4).apply(experimental.rejection_resample(lambda x: x, [0.5, 0.5], seed=0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="class 2"):
        _all(out_of_range)


# -- cardinality, get_single_element --------------------------------------------------------------
def test_cardinality_follows_tensorflows_rules() -> None:
    cases = {
        Dataset.from_tensor_slices(np.arange(10)): 10, Dataset.range(7): 7, Dataset.range(10).batch(3): 4,
        Dataset.range(10).batch(3, drop_remainder=True): 3, Dataset.range(10).take(4): 4,
        Dataset.range(10).skip(4): 6, Dataset.range(3).repeat(2): 6, Dataset.range(5).map(lambda x: x + 1): 5,
        Dataset.range(3).repeat(): experimental.INFINITE_CARDINALITY, Dataset.range(3).repeat().take(5): 5,
        Dataset.range(5).filter(lambda x: x > 2): experimental.UNKNOWN_CARDINALITY,
        Dataset.zip((Dataset.range(3), Dataset.range(5))): 3, Dataset.range(6).shuffle(3).prefetch(1): 6,
        Dataset.range(2).concatenate(Dataset.range(3)): 5, Dataset.range(10).shard(3, 1): 3,
    }
    counts = [experimental.cardinality(ds) for ds in cases]
    with tf.Session() as sess:
        assert sess.run(counts) == list(cases.values())
    assert (experimental.INFINITE_CARDINALITY, experimental.UNKNOWN_CARDINALITY) == (-1, -2)


def test_get_single_element_runs_the_dataset_each_time_and_checks_the_count() -> None:
    x = experimental.get_single_element(Dataset.range(5).filter(lambda v: tf.equal(v, 3)))
    pair = experimental.get_single_element(Dataset.from_tensors((np.float32(1.5), np.arange(3))))
    with tf.Session() as sess:
        assert int(sess.run(x)) == 3 and int(sess.run(x)) == 3
        first, second = sess.run(pair)
        assert first == 1.5 and second.tolist() == [0, 1, 2]
        with pytest.raises(tf.errors.InvalidArgumentError, match="empty"):
            sess.run(experimental.get_single_element(Dataset.range(0)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="more than one"):
            sess.run(experimental.get_single_element(Dataset.range(2)))
    with pytest.raises(TypeError, match="dataset"):
        experimental.get_single_element([1, 2])
