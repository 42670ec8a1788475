"""contrib's GRUBlockCell and GRUBlockCellV2: TF's arguments and variable names (GRUBlockCell's swapped
``w_c``/``w_ru`` included), so a TF checkpoint restores, and TF's GRU equations on those weights:

    r, u = split(sigmoid([x, h] @ W_gates + b_gates), 2);  c = tanh([x, r h] @ W_cand + b_cand);
    h' = u h + (1 - u) c."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

BATCH, STEPS, DEPTH, UNITS = 3, 4, 5, 3
DATA = np.random.default_rng(41).standard_normal((BATCH, STEPS, DEPTH))


def tf_gru(xs, gates_kernel, gates_bias, cand_kernel, cand_bias):
    """TF's GRU over batch-major ``xs``: (outputs [batch, time, units], final h)."""
    h = np.zeros((xs.shape[0], UNITS))
    outputs = []
    for t in range(xs.shape[1]):
        x = xs[:, t]
        ru = 1.0 / (1.0 + np.exp(-(np.concatenate([x, h], 1) @ gates_kernel + gates_bias)))
        r, u = ru[:, :UNITS], ru[:, UNITS:]
        c = np.tanh(np.concatenate([x, r * h], 1) @ cand_kernel + cand_bias)
        h = u * h + (1 - u) * c
        outputs.append(h)
    return np.stack(outputs, axis=1), h


def gru_values(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"gates_kernel": rng.uniform(-1, 1, (DEPTH + UNITS, 2 * UNITS)), "gates_bias": rng.uniform(-1, 1, 2 * UNITS),
            "cand_kernel": rng.uniform(-1, 1, (DEPTH + UNITS, UNITS)), "cand_bias": rng.uniform(-1, 1, UNITS)}


# cell: its variables (creation order) as (name, role in tf_gru)
NAMES = {
    "GRUBlockCell": [("w_c", "gates_kernel"), ("b_ru", "gates_bias"), ("w_ru", "cand_kernel"), ("b_c", "cand_bias")],
    "GRUBlockCellV2": [("gates/kernel", "gates_kernel"), ("gates/bias", "gates_bias"),
                       ("candidate/kernel", "cand_kernel"), ("candidate/bias", "cand_bias")],
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_gru_block_cells_restore_a_tf_checkpoint_and_compute_tf_equations(name, tmp_path):
    values = gru_values(seed=len(name))
    with tf.Graph().as_default():
        written = [tf.Variable(values[role], name=f"rnn/gru_cell/{var}") for var, role in NAMES[name]]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            path = tf.train.Saver(written).save(sess, str(tmp_path / "model.ckpt"))
    x = tf.placeholder(tf.float64, [BATCH, STEPS, DEPTH])
    outputs, state = tf.nn.dynamic_rnn(getattr(tf.contrib.rnn, name)(UNITS), x, dtype=tf.float64)
    assert [v.op.name for v in tf.trainable_variables()] == [f"rnn/gru_cell/{var}" for var, _ in NAMES[name]]
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, path)
        got, h = sess.run([outputs, state], {x: DATA})
    want, want_h = tf_gru(DATA, **values)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, want_h, rtol=1e-10, atol=1e-12)


def test_gru_block_cell_initial_biases_and_its_old_cell_size_argument():
    cell = tf.contrib.rnn.GRUBlockCell(cell_size=UNITS)
    assert cell.state_size == UNITS and cell.output_size == UNITS
    tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [BATCH, STEPS, DEPTH]), dtype=tf.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        b_ru, b_c = sess.run([v for v in tf.trainable_variables() if v.op.name.split("/")[-1] in ("b_ru", "b_c")])
    np.testing.assert_array_equal(b_ru, np.ones(2 * UNITS))
    np.testing.assert_array_equal(b_c, np.zeros(UNITS))


@pytest.mark.parametrize("kwargs", [{}, {"num_units": 3, "cell_size": 3}])
def test_gru_block_cell_needs_exactly_one_size(kwargs):
    with pytest.raises(ValueError, match="GRUBlockCell: exactly one of num_units or cell_size must be provided"):
        tf.contrib.rnn.GRUBlockCell(**kwargs)
