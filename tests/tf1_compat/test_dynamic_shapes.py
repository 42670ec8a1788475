"""Shapes known only at run time, written the TF1 way: Python lists mixing ints and scalar tensors
(``tf.reshape(x, [tf.shape(x)[0], -1])``) are packed into one tensor, as TensorFlow packs them."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.fixture
def batch_input():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 4, 3], name="x")
        yield g, x, tf.shape(x)[0]


BUILDERS = {
    "reshape": (lambda x, b: tf.reshape(x, [b, -1]), lambda a: a.reshape(len(a), -1)),
    "reshape product": (lambda x, b: tf.reshape(x, [-1, tf.shape(x)[1] * 3]), lambda a: a.reshape(-1, 12)),
    "zeros": (lambda x, b: tf.zeros([b, 5]), lambda a: np.zeros((len(a), 5), np.float32)),
    "ones": (lambda x, b: tf.ones([2, b], tf.int32), lambda a: np.ones((2, len(a)), np.int32)),
    "fill": (lambda x, b: tf.fill([b, 2], 7.0), lambda a: np.full((len(a), 2), 7.0, np.float32)),
    "tile": (lambda x, b: tf.tile(x[:, :1], [1, b, 1]), lambda a: np.tile(a[:, :1], (1, len(a), 1))),
    "slice": (lambda x, b: tf.slice(x, [0, 1, 0], [b - 1, 2, -1]), lambda a: a[: len(a) - 1, 1:3]),
    "broadcast_to": (lambda x, b: tf.broadcast_to(tf.constant(1.5), [b, 3]),
                     lambda a: np.full((len(a), 3), 1.5, np.float32)),
    "convert_to_tensor": (lambda x, b: tf.convert_to_tensor([b, 3, tf.shape(x)[2]]),
                          lambda a: np.asarray([len(a), 3, 3])),
    "concat of packed lists": (lambda x, b: tf.concat([[b], [2], tf.shape(x)[1:]], axis=0),
                               lambda a: np.asarray([len(a), 2, 4, 3])),
    "stack of floats": (lambda x, b: tf.convert_to_tensor([tf.reduce_sum(x), 2.0]),
                        lambda a: np.asarray([a.sum(), 2.0], np.float32)),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("batch", [1, 5])
def test_a_list_holding_tensors_is_packed(batch_input, name, batch):
    g, x, b = batch_input
    build, expected = BUILDERS[name]
    with g.as_default():
        out = build(x, b)
    value = np.arange(batch * 12, dtype=np.float32).reshape(batch, 4, 3)
    with tf.Session(graph=g) as sess:
        got = sess.run(out, {x: value})
    want = expected(value)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_nested_lists_pack_row_by_row(batch_input):
    g, x, b = batch_input
    with g.as_default():
        paddings = tf.convert_to_tensor([[0, b], [1, 2]])
    with tf.Session(graph=g) as sess:
        assert sess.run(paddings, {x: np.zeros((3, 4, 3), np.float32)}).tolist() == [[0, 3], [1, 2]]


# What TensorFlow 1.15 infers for each at build time: the known elements of a packed shape fix dims.
STATIC_SHAPES = {
    "reshape": (None, None),
    "zeros": (None, 5),
    "ones": (2, None),
    "fill": (None, 2),
    "tile": (None, None, 3),
    "broadcast_to": (None, 3),
}


@pytest.mark.parametrize("name", sorted(STATIC_SHAPES))
def test_a_packed_shape_keeps_its_known_elements_at_build_time(batch_input, name):
    g, x, b = batch_input
    with g.as_default():
        out = BUILDERS[name][0](x, b)
    assert out.shape == STATIC_SHAPES[name]


def test_known_elements_follow_shape_slices_gathers_and_casts(batch_input):
    g, x, b = batch_input
    with g.as_default():
        dims = tf.shape(x)
        cases = {
            (None, 4, 3): tf.zeros(dims),
            (4, 3): tf.ones(dims[1:]),
            (3, None): tf.zeros(tf.gather(dims, [2, 0])),
            (None, 4): tf.random_normal(tf.cast(tf.stack([b, dims[1]]), tf.int64)),
            (None, 2, 4, 3): tf.reshape(x, tf.concat([[b], [2], dims[1:]], axis=0)),
            (None, None, 6): tf.tile(x, tf.stack([1, b, 2])),
        }
    for want, tensor in cases.items():
        assert tensor.shape == want, tensor


def test_dense_after_a_bidirectional_gru_knows_its_input_depth():
    """tf.nn.bidirectional_dynamic_rnn's GRU outputs keep their depth through the loop's zero state,
    so a dense layer on them builds (it read None and failed inside glorot_uniform)."""
    g = tf.Graph()
    with g.as_default():
        images = tf.placeholder(tf.float32, [None, 8, 8])
        (fw, bw), _ = tf.nn.bidirectional_dynamic_rnn(tf.nn.rnn_cell.GRUCell(6), tf.nn.rnn_cell.GRUCell(5), images,
                                                      dtype=tf.float32)
        assert fw.shape == (None, 8, 6) and bw.shape == (None, 8, 5)
        logits = tf.layers.dense(tf.concat([fw[:, -1], bw[:, 0]], axis=1), 3)
        assert logits.shape == (None, 3)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            assert sess.run(logits, {images: np.ones((2, 8, 8), np.float32)}).shape == (2, 3)


def test_a_layer_on_an_unknown_depth_says_what_is_missing(batch_input):
    g, x, b = batch_input
    with g.as_default():
        flat = tf.reshape(x, tf.stack([b, tf.reduce_prod(tf.shape(x)[1:])]))
        with pytest.raises(ValueError, match="last dimension of the inputs to `Dense` should be defined"):
            tf.layers.dense(flat, 3)
        with pytest.raises(ValueError, match=r"Shape of a new variable \(w\) must be fully defined.*\(\?, 3\)"):
            tf.get_variable("w", [None, 3])


def test_fill_takes_a_value_computed_at_run_time() -> None:
    with tf.Graph().as_default():
        value = tf.placeholder(tf.float32, [])
        rows = tf.placeholder(tf.int32, [])
        filled = tf.fill(tf.stack([rows, 2]), value * 2)
        total = tf.reduce_sum(filled)
        with tf.Session() as sess:
            out, grad = sess.run([filled, tf.gradients(total, value)[0]], {value: 1.5, rows: 3})
    assert out.dtype == np.float32 and out.tolist() == [[3.0, 3.0]] * 3
    assert grad == 12.0  # six elements, each 2 * value
