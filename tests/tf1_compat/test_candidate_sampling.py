"""tf.nn's candidate samplers and compute_accidental_hits as sampled-softmax scripts use them:
draws follow the distribution asked for, expected counts match it, accidental hits are found."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def _draws(sampler, runs=300):
    sess = tf.Session()
    return [sess.run(sampler) for _ in range(runs)]


def test_uniform_sampler_draws_uniformly_with_expected_counts():
    true = tf.constant(np.array([[1], [7]], np.int64))
    sampled, true_expected, sampled_expected = tf.nn.uniform_candidate_sampler(true, 1, 4, False, 8, seed=3)
    runs = _draws([sampled, true_expected, sampled_expected])
    counts = np.bincount(np.concatenate([r[0] for r in runs]), minlength=8)
    assert counts.sum() == 1200 and counts.min() > 100 and counts.max() < 200
    np.testing.assert_allclose(runs[0][1], [[0.5], [0.5]])
    np.testing.assert_allclose(runs[0][2], [0.5] * 4)
    unique, _, unique_expected = tf.nn.uniform_candidate_sampler(true, 1, 8, True, 8, seed=4)
    u, ue = tf.Session().run([unique, unique_expected])
    # with unique=True, 1 - (1 - 1/8) ** tries: the chance of a class in the draws it took
    assert sorted(u.tolist()) == list(range(8)) and np.all(ue == ue[0]) and 0.65 < ue[0] < 1


def test_fixed_unigram_sampler_follows_the_unigrams_and_distortion():
    true = tf.constant(np.array([[0], [3]], np.int64))
    unigrams = [10.0, 0.0, 30.0, 60.0]
    sampled, true_expected, _ = tf.nn.fixed_unigram_candidate_sampler(true, 1, 5, False, 5, unigrams=unigrams,
                                                                      num_reserved_ids=1, seed=1)
    flat, distorted, _ = tf.nn.fixed_unigram_candidate_sampler(true, 1, 4, False, 4, unigrams=unigrams,
                                                               distortion=0.0, seed=2)
    runs = _draws([sampled, true_expected, flat])
    counts = np.bincount(np.concatenate([r[0] for r in runs]), minlength=5) / 1500
    np.testing.assert_allclose(counts, [0, 0.1, 0, 0.3, 0.6], atol=0.04)
    np.testing.assert_allclose(runs[0][1], [[0.0], [1.5]], rtol=1e-6)
    assert set(np.concatenate([r[2] for r in runs]).tolist()) == {0, 1, 2, 3}  # distortion 0: zeros drawn too
    with pytest.raises(NotImplementedError, match="pass unigrams="):
        tf.nn.fixed_unigram_candidate_sampler(true, 1, 2, False, 4, vocab_file="vocab.txt")
    bad = tf.nn.fixed_unigram_candidate_sampler(true, 1, 2, False, 9, unigrams=unigrams)
    with pytest.raises(tf.errors.OpError, match="must equal range_max 9"):
        tf.Session().run(bad)


def test_compute_accidental_hits_finds_sampled_true_classes():
    true = np.array([[1, 4], [2, 0], [3, 3]], np.int64)
    sampled = np.array([4, 0, 5, 1], np.int64)
    indices, ids, weights = tf.nn.compute_accidental_hits(true, sampled, num_true=2)
    i, d, w = tf.Session().run([indices, ids, weights])
    assert i.dtype == np.int32 and d.dtype == np.int64 and w.dtype == np.float32
    assert list(zip(i.tolist(), d.tolist())) == [(0, 0), (0, 3), (1, 1)]
    np.testing.assert_array_equal(w, [-np.finfo(np.float32).max] * 3)
