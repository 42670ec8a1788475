"""crossed_column, weighted_categorical_column, shared_embedding_columns and linear_model, with
TensorFlow's hashing (FarmHash Fingerprint64 and SparseCross's FingerprintCat64), so bucket ids
match TF 1.15's.

Reference values: Fingerprint64 from pyfarmhash 0.5.1 (Google's FarmHash C++), ``[0, 2, 2]`` from
the tf.strings.to_hash_bucket_fast docs, and the hashed values that TensorFlow's own
sparse_cross_op_test pins ("to prevent unintentional hashing changes")."""

from __future__ import annotations

import numpy as np
import pytest

import edge_runtime
import trainer as tf
from edge_runtime.string_hashes import fingerprint64
from trainer.hashing_ops import sparse_cross_hashed

fc = tf.feature_column

FARMHASH = {"Hello": 15404698994557526151, "TensorFlow": 4265654129848386254, "2.x": 943390013796179357,
            "": 11160318154034397263, "a" * 40: 2168401864796137711, "b" * 100: 14270329631971085497,
            "p": 13975915805378423393, "q": 15738879393069947213, "12": 12507372493458391888,
            "-3": 245568598851291699}
MASK = (1 << 64) - 1
DEFAULT_HASH_KEY = 0xDECAFCAFFE


def reference_cat64(fp1: int, fp2: int) -> int:
    """FingerprintCat64 as tensorflow/core/lib/hash/hash.h writes it."""
    mul = 0xC6A4A7935BD1E995

    def shift_mix(v):
        return v ^ (v >> 47)

    result = fp1 ^ mul
    result ^= (shift_mix((fp2 * mul) & MASK) * mul) & MASK
    result = (result * mul) & MASK
    result = (shift_mix(result) * mul) & MASK
    return shift_mix(result)


def reference_cross(hashes, buckets: int) -> int:
    out = DEFAULT_HASH_KEY
    for h in hashes:
        out = reference_cat64(out, h)
    return out % buckets


def test_fingerprint64_matches_farmhash_for_every_length_class():
    for text, expected in FARMHASH.items():
        assert fingerprint64(text.encode("utf-8")) == expected, text
    assert fingerprint64(b"Hello") == FARMHASH["Hello"]


def test_hash_bucket_column_ids_are_tensorflows():
    words = fc.categorical_column_with_hash_bucket("w", 3)
    numbers = fc.categorical_column_with_hash_bucket("n", 1000, dtype=tf.int64)
    features = {"w": tf.constant(["Hello", "TensorFlow", "2.x"]), "n": tf.constant([[12], [-3], [-1]], dtype=tf.int64)}
    ids_w, ids_n = words.ids(features), numbers.ids(features)
    with tf.Session() as sess:
        got_w, got_n = sess.run([ids_w, ids_n])
    np.testing.assert_array_equal(got_w.values, [0, 2, 2])  # the tf.strings.to_hash_bucket_fast doc example
    # integers hash as their decimal text; -1 in a dense integer feature is no entry
    np.testing.assert_array_equal(got_n.values, [FARMHASH["12"] % 1000, FARMHASH["-3"] % 1000])
    with pytest.raises(ValueError, match="dtype must be string or integer"):
        fc.categorical_column_with_hash_bucket("x", 3, dtype=tf.float32)


def test_vocabulary_oov_buckets_are_tensorflows():
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "blue"], num_oov_buckets=3)
    ids = color.ids({"color": tf.constant(["blue", "Hello", "TensorFlow", "2.x"])})
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        got = sess.run(ids).values
    np.testing.assert_array_equal(got, [1, 2 + FARMHASH["Hello"] % 3, 2 + FARMHASH["TensorFlow"] % 3,
                                        2 + FARMHASH["2.x"] % 3])


def test_sparse_cross_hashed_reproduces_tensorflows_pinned_values():
    inputs = [tf.constant([["batch1-FC1-F1"]]), tf.constant([["batch1-FC2-F1"]]), tf.constant([["batch1-FC3-F1"]])]
    plain = sparse_cross_hashed(inputs)
    bucketed = sparse_cross_hashed(inputs, num_buckets=100)
    keyed = sparse_cross_hashed(inputs, hash_key=DEFAULT_HASH_KEY + 1)
    with tf.Session() as sess:
        got = sess.run([plain, bucketed, keyed])
    assert [int(g.values[0]) for g in got] == [1971693436396284976, 83, 4847552627144134031]
    assert all(g.dense_shape.tolist() == [1, 1] for g in got)
    with pytest.raises(TypeError, match="input 0 must hold strings or integers"):
        sparse_cross_hashed([tf.constant([[1.5]]), tf.constant([["a"]])])


def test_crossed_column_hashes_each_rows_combinations_in_order():
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    cross = fc.crossed_column(["shape", color], hash_bucket_size=1000)
    assert cross.name == "color_X_shape" and cross.num_buckets == 1000
    features = {"shape": tf.constant([["p"], ["q"]]), "color": tf.constant([["red", "blue"], ["green", ""]])}
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        got = sess.run(cross.ids(features))
    # shape's strings hash by Fingerprint64, color's int64 ids (red 0, blue 2, green 1) are folded as they are
    expected = [reference_cross([FARMHASH["p"], 0], 1000), reference_cross([FARMHASH["p"], 2], 1000),
                reference_cross([FARMHASH["q"], 1], 1000)]
    np.testing.assert_array_equal(got.values, expected)
    np.testing.assert_array_equal(got.indices, [[0, 0], [0, 1], [1, 0]])
    np.testing.assert_array_equal(got.dense_shape, [2, 2])
    spec = fc.make_parse_example_spec([fc.indicator_column(cross)])
    assert spec == {"shape": tf.VarLenFeature(tf.string.as_numpy_dtype), "color": tf.VarLenFeature(np.dtype(object))}
    with pytest.raises(ValueError, match="length > 1"):
        fc.crossed_column(["shape"], 10)
    with pytest.raises(ValueError, match="hash_bucket_size must be > 1"):
        fc.crossed_column(["a", "b"], 0)
    with pytest.raises(ValueError, match="weighted columns"):
        fc.crossed_column(["a", fc.weighted_categorical_column(color, "w")], 10)


def test_weighted_column_weighs_indicator_embedding_and_linear_model():
    word = fc.categorical_column_with_vocabulary_list("word", ["a", "b", "c"])
    weighted = fc.weighted_categorical_column(word, "freq")
    assert weighted.name == "word_weighted_by_freq"
    features = {"word": tf.constant([["a", "c"], ["b", "zz"]]), "freq": tf.constant([[2.0, 0.5], [3.0, 7.0]])}
    table = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]], np.float32)
    embedded = fc.input_layer(features, [fc.indicator_column(weighted), fc.embedding_column(
        weighted, 2, combiner="sum", initializer=lambda shape, dtype=np.float32, **_: table)])
    cols_to_vars: dict = {}
    logits = fc.linear_model(features, [weighted], cols_to_vars=cols_to_vars)
    (w,) = cols_to_vars[weighted]
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.tables_initializer()])
        sess.run(tf.assign(w, [[1.0], [10.0], [100.0]]))
        got, lin = sess.run([embedded, logits])
    # "zz" has no id: its weight 7 drops with it
    np.testing.assert_allclose(got[:, :3], [[2, 0, 0.5], [0, 3, 0]])
    np.testing.assert_allclose(got[:, 3:], [[2 * 1 + 0.5 * 4, 2 * 10 + 0.5 * 40], [3 * 2, 3 * 20]])
    np.testing.assert_allclose(lin, [[2 * 1 + 0.5 * 100], [3 * 10]])
    assert fc.make_parse_example_spec([weighted])["freq"] == tf.VarLenFeature(np.dtype(np.float32))
    with pytest.raises(ValueError, match="not convertible to float"):
        fc.weighted_categorical_column(word, "freq", dtype=tf.string)
    with pytest.raises(ValueError, match="bad dtype"):
        fc.input_layer({"word": tf.constant([["a"]]), "freq": tf.constant([[1.0]], dtype=tf.float64)},
                       [fc.indicator_column(weighted)])


def test_shared_embedding_columns_read_one_table():
    query = fc.categorical_column_with_identity("query", 4)
    doc = fc.categorical_column_with_identity("doc", 4)
    shared = fc.shared_embedding_columns([query, doc], 3, combiner="mean")
    assert [c.name for c in shared] == ["query_shared_embedding", "doc_shared_embedding"]
    features = {"query": tf.constant([[0, 1], [3, -1]], dtype=tf.int64), "doc": tf.constant([[2], [3]], dtype=tf.int64)}
    out = fc.input_layer(features, shared)
    (table,) = tf.global_variables()
    assert table.name == "input_layer/doc_query_shared_embedding/embedding_weights:0" and table.shape == (4, 3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, rows = sess.run([out, table])
    np.testing.assert_allclose(got, np.concatenate([[(rows[0] + rows[1]) / 2, rows[3]], [rows[2], rows[3]]], 1),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="same number of buckets"):
        fc.shared_embedding_columns([query, fc.categorical_column_with_identity("other", 5)], 3)
    with pytest.raises(ValueError, match="invalid dimension"):
        fc.shared_embedding_columns([query, doc], 0)


def test_linear_model_names_combines_and_differentiates():
    price = fc.numeric_column("price", shape=(2,))
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    features = {"price": tf.placeholder(tf.float32, [None, 2]), "color": tf.constant([["red", "blue"], ["green", ""]])}
    cols_to_vars: dict = {}
    out = fc.linear_model(features, [price, color], units=2, sparse_combiner="mean", cols_to_vars=cols_to_vars)
    assert out.shape[1] == 2
    assert sorted(v.op.name for v in tf.global_variables()) == [
        "linear_model/bias_weights", "linear_model/color/weights", "linear_model/price/weights"]
    assert [v.shape for v in cols_to_vars[color]] == [(3, 2)] and cols_to_vars["bias"][0].shape == (2,)
    color_w = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    price_w = np.array([[0.5, -1], [2, 0]], np.float32)
    x = np.array([[1, 2], [3, -1]], np.float32)
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.tables_initializer()])
        sess.run([tf.assign(cols_to_vars[color][0], color_w), tf.assign(cols_to_vars[price][0], price_w),
                  tf.assign(cols_to_vars["bias"][0], [0.25, -0.25])])
        got = sess.run(out, {features["price"]: x})
        # d sum(out * upstream) / d price_weights, against central differences
        upstream = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
        grad = sess.run(tf.gradients(tf.reduce_sum(out * upstream), cols_to_vars[price])[0], {features["price"]: x})
    expected = x @ price_w + np.array([(color_w[0] + color_w[2]) / 2, color_w[1]]) + [0.25, -0.25]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    eps = 1e-3
    numeric = np.zeros_like(price_w)
    for i in range(2):
        for j in range(2):
            up, down = price_w.copy(), price_w.copy()
            up[i, j] += eps
            down[i, j] -= eps
            numeric[i, j] = (np.sum((x @ up) * upstream) - np.sum((x @ down) * upstream)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-3)
    with pytest.raises(ValueError, match="sparse_combiner must be one of"):
        fc.linear_model(features, [price], sparse_combiner="max")


def test_linear_classifier_on_a_cross_learns_xor_and_serves_it_on_the_edge(tmp_path):
    """A TF1 wide-model script: a crossed column of a vocabulary column and a bucketized one lets a
    linear model learn an interaction; the exported model hashes the cross on the edge runtime."""
    rng = np.random.default_rng(3)
    colors = rng.integers(0, 2, 400).astype(np.int64)  # 0 red, 1 blue
    sizes = rng.uniform(-1, 1, 400).astype(np.float32)
    labels = ((colors == 1) ^ (sizes > 0)).astype(np.int64)
    color = fc.categorical_column_with_identity("color", 2)
    size = fc.bucketized_column(fc.numeric_column("size"), [0.0])
    columns = [fc.crossed_column([color, size], hash_bucket_size=64)]
    input_fn = tf.estimator.inputs.numpy_input_fn({"color": colors, "size": sizes}, labels, batch_size=40,
                                                  num_epochs=None, shuffle=True)
    eval_fn = tf.estimator.inputs.numpy_input_fn({"color": colors, "size": sizes}, labels, batch_size=400,
                                                 num_epochs=1, shuffle=False)
    model = tf.estimator.LinearClassifier(columns, model_dir=str(tmp_path / "wide"))
    model.train(input_fn, steps=60)
    assert model.evaluate(eval_fn)["accuracy"] == 1.0  # four combinations, each one label: exact

    spec = fc.make_parse_example_spec(columns)
    assert spec == {"color": tf.VarLenFeature(np.dtype(np.int64)),
                    "size": tf.FixedLenFeature((1,), np.dtype(np.float32), None)}
    receiver_fn = tf.estimator.export.build_raw_serving_input_receiver_fn({
        "color": tf.placeholder(tf.int64, [None, 1], name="color"), "size": tf.placeholder(tf.float32, [None, 1])})
    export_dir = model.export_saved_model(str(tmp_path / "export"), receiver_fn).decode()
    served = edge_runtime.load(f"{export_dir}/model.flow").run({
        "color": np.array([[0], [1], [0], [1]], np.int64),
        "size": np.array([[0.5], [0.5], [-0.5], [-0.5]], np.float32)})
    np.testing.assert_array_equal(np.argmax(served["scores"], axis=1), [1, 0, 0, 1])
