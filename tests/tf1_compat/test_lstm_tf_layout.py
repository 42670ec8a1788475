"""TensorFlow 1.x's LSTM weight layout: one kernel [depth + units, 4 units] and bias [4 units] whose
column blocks are the gates i, j, f, o, with

    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j),   new_h = tanh(new_c) * sigmoid(o).

Every LSTM cell (BasicLSTMCell, LSTMCell, contrib's LSTMBlockCell and LSTMBlockFusedCell), run by
dynamic_rnn (one fused op over the sequence), by static_rnn and dynamic_rnn with lengths (one op per
step), restored from a checkpoint under TF's variable names, differentiated and frozen for the edge
runtime, against a NumPy transcription of those equations (not of our kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.lstm_reference import tf_lstm, tf_values
from tests.trainer.gradient_check import central_difference

BATCH, STEPS, DEPTH, UNITS = 3, 4, 5, 4


def inputs(seed: int = 0):
    return np.random.default_rng(seed).standard_normal((BATCH, STEPS, DEPTH))  # batch-major, as dynamic_rnn's


CELLS = {
    "BasicLSTMCell": (lambda fb: tf.nn.rnn_cell.BasicLSTMCell(UNITS, forget_bias=fb), "basic_lstm_cell"),
    "LSTMCell": (lambda fb: tf.nn.rnn_cell.LSTMCell(UNITS, forget_bias=fb), "lstm_cell"),
    "contrib.LSTMBlockCell": (lambda fb: tf.contrib.rnn.LSTMBlockCell(UNITS, forget_bias=fb), "lstm_cell"),
}


def run_sequence(runner, cell, x):
    """(outputs [batch, time, units], final state) of ``cell`` over ``x`` the way ``runner`` names."""
    if runner == "dynamic_rnn":
        return tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
    if runner == "dynamic_rnn_lengths":  # one LSTMBlockCell op per step in a while_loop
        return tf.nn.dynamic_rnn(cell, x, sequence_length=[STEPS] * BATCH, dtype=tf.float64)
    outputs, state = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float64)
    return tf.stack(outputs, axis=1), state


@pytest.mark.parametrize("runner", ["dynamic_rnn", "dynamic_rnn_lengths", "static_rnn"])
@pytest.mark.parametrize("forget_bias", [1.0, 0.0])
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cells_compute_tf_equations_on_assigned_weights(name, forget_bias, runner):
    make, scope = CELLS[name]
    x = tf.placeholder(tf.float64, [BATCH, STEPS, DEPTH])
    outputs, state = run_sequence(runner, make(forget_bias), x)
    kernel_var, bias_var = tf.trainable_variables()
    assert (kernel_var.op.name, bias_var.op.name) == (f"rnn/{scope}/kernel", f"rnn/{scope}/bias")
    assert kernel_var.shape == (DEPTH + UNITS, 4 * UNITS) and bias_var.shape == (4 * UNITS,)
    ops = {n.op_type for n in tf.get_default_graph().nodes}
    assert ("LSTMBlockFused" in ops) == (runner == "dynamic_rnn")  # the fused path is the one under test
    kernel, bias = tf_values(seed=len(name) + int(forget_bias), depth=DEPTH, units=UNITS)
    data = inputs()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([tf.assign(kernel_var, kernel), tf.assign(bias_var, bias)])
        got, (c, h) = sess.run([outputs, state], {x: data})
    want, want_c, want_h = tf_lstm(np.transpose(data, [1, 0, 2]), kernel, bias, forget_bias)
    np.testing.assert_allclose(got, np.transpose(want, [1, 0, 2]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c, want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, want_h, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("lengths", [None, [4, 2, 0]])
@pytest.mark.parametrize("forget_bias", [1.0, 0.0])
def test_lstm_block_fused_cell_computes_tf_equations(forget_bias, lengths, peephole):
    xt = tf.placeholder(tf.float64, [STEPS, BATCH, DEPTH])
    clip = 0.6 if peephole else None
    cell = tf.contrib.rnn.LSTMBlockFusedCell(UNITS, forget_bias=forget_bias, cell_clip=clip, use_peephole=peephole)
    c0, h0 = (tf.constant(v) for v in np.random.default_rng(2).uniform(-1, 1, (2, BATCH, UNITS)))
    outputs, (c, h) = cell(xt, initial_state=(c0, h0), sequence_length=lengths)
    names = ["kernel", "bias"] + (["w_i_diag", "w_f_diag", "w_o_diag"] if peephole else [])
    assert [v.op.name for v in tf.trainable_variables()] == [f"lstm_fused_cell/{n}" for n in names]
    kernel, bias = tf_values(seed=11, depth=DEPTH, units=UNITS)
    peepholes = peephole_values(np.random.default_rng(12)) if peephole else None
    values = [kernel, bias] + ([peepholes[g] for g in "ifo"] if peephole else [])
    data = np.transpose(inputs(1), [1, 0, 2])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([tf.assign(v, value) for v, value in zip(tf.trainable_variables(), values)])
        got, got_c, got_h, c_init, h_init = sess.run([outputs, c, h, c0, h0], {xt: data})
    options = {"peepholes": peepholes, "cell_clip": clip}
    want, want_c, want_h = tf_lstm(data, kernel, bias, forget_bias, c_init, h_init, **options)
    if lengths is not None:  # TF: zero outputs past a length, the state at its last step
        steps = np.arange(STEPS)[:, None] < np.asarray(lengths)[None, :]
        want = np.where(steps[..., None], want, 0.0)
        last = [tf_lstm(data[:n, b:b + 1], kernel, bias, forget_bias, c_init[b:b + 1], h_init[b:b + 1], **options)
                for b, n in enumerate(lengths)]
        want_c = np.concatenate([s[1] for s in last])
        want_h = np.concatenate([s[2] for s in last])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-10, atol=1e-12)


def test_lstm_block_fused_cell_takes_a_list_of_steps_and_returns_one():
    steps = [tf.placeholder(tf.float64, [BATCH, DEPTH]) for _ in range(STEPS)]
    cell = tf.contrib.rnn.LSTMBlockFusedCell(UNITS)
    outputs, (c, h) = cell(steps, dtype=tf.float64)
    assert isinstance(outputs, list) and len(outputs) == STEPS and outputs[0].shape == (BATCH, UNITS)
    kernel, bias = tf_values(seed=13, depth=DEPTH, units=UNITS)
    data = np.transpose(inputs(6), [1, 0, 2])
    with tf.Session() as sess:
        sess.run([tf.assign(v, value) for v, value in zip(cell.variables, (kernel, bias))])
        got, got_h = sess.run([outputs, h], dict(zip(steps, data)))
    want, _, want_h = tf_lstm(data, kernel, bias, 1.0)
    np.testing.assert_allclose(np.stack(got), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_h, want_h, rtol=1e-10, atol=1e-12)


def test_each_column_block_is_the_gate_tf_puts_there():
    """By hand: a zero kernel and a bias of i = 30, j = 0.5, f = -30, o = 30 saturate the sigmoids, so
    from c = 3 one step gives c = tanh(0.5) (old state forgotten) and h = tanh(tanh(0.5))."""
    x = tf.placeholder(tf.float64, [1, 1, 2])
    cell = tf.nn.rnn_cell.BasicLSTMCell(1, forget_bias=0.0)
    state0 = tf.nn.rnn_cell.LSTMStateTuple(tf.constant([[3.0]], tf.float64), tf.constant([[0.0]], tf.float64))
    _, (c, h) = tf.nn.dynamic_rnn(cell, x, initial_state=state0)
    kernel_var, bias_var = cell.variables
    with tf.Session() as sess:
        sess.run([tf.assign(kernel_var, np.zeros((3, 4))), tf.assign(bias_var, [30.0, 0.5, -30.0, 30.0])])
        got_c, got_h = sess.run([c, h], {x: np.ones((1, 1, 2))})
    np.testing.assert_allclose(got_c, [[np.tanh(0.5)]], rtol=1e-9)  # 0.46211715726
    np.testing.assert_allclose(got_h, [[np.tanh(np.tanh(0.5))]], rtol=1e-9)  # 0.43178...


def write_tf_checkpoint(path: str, values: dict) -> str:
    """A checkpoint holding ``values`` under TF's variable names, as a TF 1.x run would leave it."""
    with tf.Graph().as_default():
        variables = [tf.Variable(v, name=name) for name, v in values.items()]
        saver = tf.train.Saver(variables)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            return saver.save(sess, path)


def test_checkpoint_under_tf_names_restores_into_each_cell(tmp_path):
    """Two stacked layers under TF 1.15's names: dynamic_rnn of a MultiRNNCell of BasicLSTMCells
    (rnn/multi_rnn_cell/cell_k/basic_lstm_cell/...), static_rnn of LSTMCells and of contrib
    LSTMBlockCells (rnn/multi_rnn_cell/cell_k/lstm_cell/...) and one LSTMBlockFusedCell."""
    k1, b1 = tf_values(seed=1, depth=DEPTH, units=UNITS)
    k2, b2 = tf_values(seed=2, depth=UNITS, units=UNITS)
    kf, bf = tf_values(seed=3, depth=DEPTH, units=UNITS)
    values = {}
    for scope in ("basic_lstm_cell", "lstm_cell"):
        for k, (kernel, bias) in enumerate([(k1, b1), (k2, b2)]):
            values[f"{scope}/rnn/multi_rnn_cell/cell_{k}/{scope}/kernel"] = kernel
            values[f"{scope}/rnn/multi_rnn_cell/cell_{k}/{scope}/bias"] = bias
    values.update({"fused/lstm_fused_cell/kernel": kf, "fused/lstm_fused_cell/bias": bf})
    path = write_tf_checkpoint(str(tmp_path / "model.ckpt"), values)
    assert {name for name, _ in tf.train.list_variables(path)} == set(values)

    data = inputs(3)
    x = tf.placeholder(tf.float64, [BATCH, STEPS, DEPTH])
    results = {}
    with tf.variable_scope("basic_lstm_cell"):
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(UNITS) for _ in range(2)])
        results["basic"] = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)[0]
    for kind, make in (("lstm", tf.nn.rnn_cell.LSTMCell), ("block", tf.contrib.rnn.LSTMBlockCell)):
        with tf.variable_scope("lstm_cell", reuse=kind == "block"):
            cell = tf.nn.rnn_cell.MultiRNNCell([make(UNITS) for _ in range(2)])
            outputs, _ = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float64)
            results[kind] = tf.stack(outputs, axis=1)
    with tf.variable_scope("fused"):
        results["fused"] = tf.contrib.rnn.LSTMBlockFusedCell(UNITS)(tf.transpose(x, [1, 0, 2]), dtype=tf.float64)[0]
    assert {v.op.name for v in tf.global_variables()} == set(values)
    with tf.Session() as sess:
        tf.train.Saver().restore(sess, path)
        got = sess.run(results, {x: data})
    xt = np.transpose(data, [1, 0, 2])
    stacked = tf_lstm(tf_lstm(xt, k1, b1, 1.0)[0], k2, b2, 1.0)[0]
    for kind in ("basic", "lstm", "block"):
        np.testing.assert_allclose(got[kind], np.transpose(stacked, [1, 0, 2]), rtol=1e-10, atol=1e-12,
                                   err_msg=kind)
    np.testing.assert_allclose(got["fused"], tf_lstm(xt, kf, bf, 1.0)[0], rtol=1e-10, atol=1e-12)


def test_a_checkpoint_with_a_transposed_kernel_is_refused_naming_it(tmp_path):
    kernel, bias = tf_values(seed=4, depth=DEPTH, units=UNITS)
    path = write_tf_checkpoint(str(tmp_path / "model.ckpt"),
                               {"rnn/basic_lstm_cell/kernel": kernel.T, "rnn/basic_lstm_cell/bias": bias})
    x = tf.placeholder(tf.float64, [BATCH, STEPS, DEPTH])
    tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(UNITS), x, dtype=tf.float64)
    with tf.Session() as sess, pytest.raises(ValueError, match="rnn/basic_lstm_cell/kernel"):
        tf.train.Saver().restore(sess, path)


def peephole_values(rng, units: int = UNITS) -> dict:
    return {g: rng.uniform(-1, 1, units) for g in "ifo"}


@pytest.mark.parametrize("path", ["fused", "per_step", "peepholes_projection"])
def test_gradients_match_finite_differences_of_the_tf_equations(path):
    """d(weighted sum of outputs and final state) by tf.gradients, through the fused op (dynamic_rnn),
    one LSTMBlockCell per step (static_rnn) or LSTMCell's composed step with peepholes and a
    projection, against central differences of the NumPy reference, for every input and variable."""
    steps, units, proj = 3, 2, (2 if path == "peepholes_projection" else None)
    out = proj or units
    rng = np.random.default_rng(6)
    kernel, bias = tf_values(seed=7, depth=DEPTH + out - units, units=units)
    values = {"x": rng.standard_normal((BATCH, steps, DEPTH)), "kernel": kernel, "bias": bias,
              "c0": rng.uniform(-1, 1, (BATCH, units)), "h0": rng.uniform(-1, 1, (BATCH, out))}
    if proj:
        values.update({f"w_{g}_diag": v for g, v in peephole_values(rng, units).items()})
        values["projection"] = rng.uniform(-1, 1, (units, proj))
    w_out, w_c, w_h = (rng.uniform(0.5, 1.5, shape) for shape in ((steps, BATCH, out), (BATCH, units), (BATCH, out)))

    def loss_of(v):
        options = {"peepholes": {g: v[f"w_{g}_diag"] for g in "ifo"}, "projection": v["projection"]} if proj else {}
        outputs, c_n, h_n = tf_lstm(np.transpose(v["x"], [1, 0, 2]), v["kernel"], v["bias"], 1.0, v["c0"], v["h0"],
                                    **options)
        return np.sum(outputs * w_out) + np.sum(c_n * w_c) + np.sum(h_n * w_h)

    x, c_ph, h_ph = (tf.placeholder(tf.float64, values[k].shape) for k in ("x", "c0", "h0"))
    cell = tf.nn.rnn_cell.LSTMCell(units, use_peepholes=True, num_proj=proj) if proj else \
        tf.nn.rnn_cell.BasicLSTMCell(units)
    state0 = tf.nn.rnn_cell.LSTMStateTuple(c_ph, h_ph)
    if path == "per_step":
        steps_out, (c_n, h_n) = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), initial_state=state0)
        outputs = tf.stack(steps_out)
    else:
        outputs, (c_n, h_n) = tf.nn.dynamic_rnn(cell, x, initial_state=state0)
        outputs = tf.transpose(outputs, [1, 0, 2])
    loss = tf.reduce_sum(outputs * w_out) + tf.reduce_sum(c_n * w_c) + tf.reduce_sum(h_n * w_h)
    variables = {v.op.name.split("/", 2)[2].replace("projection/kernel", "projection"): v for v in cell.variables}
    assert sorted(variables) == sorted(k for k in values if k not in ("x", "c0", "h0"))
    wrt = [x, c_ph, h_ph] + list(variables.values())
    names = ["x", "c0", "h0"] + list(variables)
    grads = tf.gradients(loss, wrt)
    ops = {n.op_type for n in tf.get_default_graph().nodes}
    assert ("LSTMBlockFusedGrad" in ops) == (path == "fused") and ("LSTMBlockCellGrad" in ops) == (path == "per_step")
    with tf.Session() as sess:
        sess.run([tf.assign(v, values[k]) for k, v in variables.items()])
        got_loss, got = sess.run([loss, grads], {x: values["x"], c_ph: values["c0"], h_ph: values["h0"]})
    np.testing.assert_allclose(got_loss, loss_of(values), rtol=1e-10)
    for name, grad in zip(names, got):
        def partial(v, name=name):
            return loss_of({**values, name: v})

        np.testing.assert_allclose(grad, central_difference(partial, values[name]), rtol=1e-6, atol=1e-8,
                                   err_msg=f"gradient of {name}")


@pytest.mark.parametrize("case", ["fused", "lengths", "peepholes_projection"])
def test_frozen_tf1_lstm_matches_the_tf_equations(case):
    """dynamic_rnn of an LSTM (forget_bias 1) frozen for the edge runtime: an ONNX LSTM for the fused
    sequence, a Loop of ONNX ops with lengths (the LSTMBlockCell step spelled out) or with LSTMCell's
    peepholes and projection (its composed step)."""
    import edge_runtime
    from exporter import flow_writer, freeze

    x = tf.placeholder(tf.float32, [BATCH, STEPS, DEPTH], name="x")
    options = case == "peepholes_projection"
    cell = tf.nn.rnn_cell.LSTMCell(UNITS, use_peepholes=True, num_proj=3) if options else \
        tf.nn.rnn_cell.BasicLSTMCell(UNITS, forget_bias=1.0)
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=[STEPS] * BATCH if case == "lengths" else None,
                                       dtype=tf.float32)
    rng = np.random.default_rng(8)
    kernel, bias = tf_values(seed=8, depth=DEPTH + (3 - UNITS if options else 0), units=UNITS)
    peepholes = peephole_values(rng) if options else None
    projection = rng.uniform(-1, 1, (UNITS, 3)) if options else None
    values = [kernel, bias] + ([peepholes[g] for g in "fio"] + [projection] if options else [])
    data = inputs(4).astype(np.float32)
    sess = tf.Session()
    sess.run([tf.assign(v, value.astype(np.float32)) for v, value in zip(cell.variables, values)])
    frozen = freeze(sess, {"x": x}, {"y": outputs, "h": state.h})
    ops = {n.op_type for n in frozen.graph.nodes}
    assert ("LSTM" in ops) == (case == "fused") and ("Loop" in ops) != (case == "fused")
    got = edge_runtime.load(flow_writer.to_bytes(frozen)).run({"x": data})
    want, _, want_h = tf_lstm(np.transpose(data, [1, 0, 2]).astype(np.float64), kernel, bias, 1.0,
                              peepholes=peepholes, projection=projection)
    np.testing.assert_allclose(got["y"], np.transpose(want, [1, 0, 2]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["h"], want_h, rtol=1e-4, atol=1e-5)


def test_static_rnn_lstm_exports_to_onnx_with_its_forget_bias():
    """static_rnn's LSTMBlockCell steps spelled in ONNX ops (forget_bias 1 an Add before f's sigmoid),
    run by onnxruntime against the reference."""
    ort = pytest.importorskip("onnxruntime")
    from exporter import freeze, to_onnx

    x = tf.placeholder(tf.float32, [BATCH, STEPS, DEPTH], name="x")
    cell = tf.nn.rnn_cell.BasicLSTMCell(UNITS, forget_bias=1.0)
    _, state = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
    kernel, bias = tf_values(seed=9, depth=DEPTH, units=UNITS)
    sess = tf.Session()
    sess.run([tf.assign(v, value.astype(np.float32)) for v, value in zip(cell.variables, (kernel, bias))])
    model = to_onnx(freeze(sess, {"x": x}, {"h": state.h})).SerializeToString()
    data = inputs(7).astype(np.float32)
    (got,) = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": data})
    want_h = tf_lstm(np.transpose(data, [1, 0, 2]).astype(np.float64), kernel, bias, 1.0)[2]
    np.testing.assert_allclose(got, want_h, rtol=1e-4, atol=1e-5)


OPTION_CELLS = {
    # name: (make(forget_bias), scope, variables in creation order, reference options)
    "LSTMCell peepholes, clips, projection": (
        lambda fb: tf.nn.rnn_cell.LSTMCell(UNITS, use_peepholes=True, cell_clip=0.6, num_proj=3, proj_clip=0.5,
                                           forget_bias=fb),
        "lstm_cell", ["kernel", "bias", "w_f_diag", "w_i_diag", "w_o_diag", "projection/kernel"],
        {"cell_clip": 0.6, "proj_clip": 0.5}),
    "LSTMCell projection": (lambda fb: tf.nn.rnn_cell.LSTMCell(UNITS, num_proj=3, forget_bias=fb), "lstm_cell",
                            ["kernel", "bias", "projection/kernel"], {}),
    "LSTMCell peepholes": (lambda fb: tf.nn.rnn_cell.LSTMCell(UNITS, use_peepholes=True, forget_bias=fb), "lstm_cell",
                           ["kernel", "bias", "w_f_diag", "w_i_diag", "w_o_diag"], {}),
    "contrib.LSTMBlockCell peephole, clip": (
        lambda fb: tf.contrib.rnn.LSTMBlockCell(UNITS, fb, 0.6, True), "lstm_cell",
        ["kernel", "bias", "w_i_diag", "w_f_diag", "w_o_diag"], {"cell_clip": 0.6}),
    "BasicLSTMCell softsign": (lambda fb: tf.nn.rnn_cell.BasicLSTMCell(UNITS, fb, activation=tf.nn.softsign),
                               "basic_lstm_cell", ["kernel", "bias"], {"act": lambda v: v / (1 + np.abs(v))}),
}


@pytest.mark.parametrize("runner", ["dynamic_rnn", "static_rnn"])
@pytest.mark.parametrize("forget_bias", [1.0, 0.0])
@pytest.mark.parametrize("name", sorted(OPTION_CELLS))
def test_lstm_cell_options_compute_tf_equations(name, forget_bias, runner):
    make, scope, names, options = OPTION_CELLS[name]
    x = tf.placeholder(tf.float64, [BATCH, STEPS, DEPTH])
    outputs, state = run_sequence(runner, make(forget_bias), x)
    variables = tf.trainable_variables()
    assert [v.op.name for v in variables] == [f"rnn/{scope}/{n}" for n in names]
    assert "LSTMBlockFused" not in {n.op_type for n in tf.get_default_graph().nodes}
    rng = np.random.default_rng(len(name))
    out = 3 if "projection/kernel" in names else UNITS
    kernel, bias = tf_values(seed=len(name), depth=DEPTH + out - UNITS, units=UNITS)
    kernel *= 2  # large gates, so that the clips act
    peepholes = peephole_values(rng) if "w_i_diag" in names else None
    projection = rng.uniform(-1, 1, (UNITS, 3)) if out == 3 else None
    values = {"kernel": kernel, "bias": bias, "projection/kernel": projection,
              **{f"w_{g}_diag": v for g, v in (peepholes or {}).items()}}
    data = inputs(5)
    with tf.Session() as sess:
        sess.run([tf.assign(v, values[n]) for v, n in zip(variables, names)])
        got, (c, h) = sess.run([outputs, state], {x: data})
    want, want_c, want_h = tf_lstm(np.transpose(data, [1, 0, 2]), kernel, bias, forget_bias, peepholes=peepholes,
                                   projection=projection, **options)
    assert got.shape == (BATCH, STEPS, out) and c.shape == (BATCH, UNITS) and h.shape == (BATCH, out)
    np.testing.assert_allclose(got, np.transpose(want, [1, 0, 2]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c, want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, want_h, rtol=1e-10, atol=1e-12)
    if "cell_clip" in options:
        assert np.isclose(np.abs(c), options["cell_clip"]).any()  # some cell state was clipped
    if "proj_clip" in options:
        assert np.isclose(np.abs(got), options["proj_clip"]).any()


def test_lstm_block_cell_takes_tf_arguments_in_tf_order():
    cell = tf.contrib.rnn.LSTMBlockCell(3, 0.5)  # TF's order: num_units, forget_bias, cell_clip, use_peephole
    assert cell.forget_bias == 0.5 and cell.state_size == (3, 3) and cell.output_size == 3
    assert tf.nn.rnn_cell.LSTMCell(5, num_proj=2).state_size == (5, 2)
    x = tf.placeholder(tf.float32, [2, 4, 3])
    tf.nn.dynamic_rnn(tf.contrib.rnn.LSTMBlockCell(3, cell_clip=-1), x, dtype=tf.float32)  # TF's "no clipping"
    assert "LSTMBlockFused" in {n.op_type for n in tf.get_default_graph().nodes}


@pytest.mark.parametrize("make, message", [
    (lambda: tf.nn.rnn_cell.LSTMCell(4, num_proj=0), "LSTMCell: num_proj must be a positive int or None, got 0"),
    (lambda: tf.nn.rnn_cell.LSTMCell(4, cell_clip=-1.0), "LSTMCell: cell_clip must be a non-negative number"),
    (lambda: tf.nn.rnn_cell.LSTMCell(4, num_proj=2, proj_clip=float("nan")), "LSTMCell: proj_clip must be"),
    (lambda: tf.nn.rnn_cell.BasicLSTMCell(4, activation="tanh"), "BasicLSTMCell: activation must be a function"),
    (lambda: tf.nn.rnn_cell.LSTMCell(4, state_is_tuple=False), "LSTMCell: state_is_tuple=False"),
])
def test_bad_lstm_options_are_refused_naming_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_tf1_script_trains_an_lstm_then_serves_it_from_the_fused_cell(tmp_path):
    """Train dynamic_rnn over an LSTMCell to tell whether a sequence's sum is positive, save it, and
    restore the same weights into contrib's LSTMBlockFusedCell (TF: "variable naming is consistent
    with LSTMCell") by a name map; both graphs give the same predictions."""
    tf.set_random_seed(3)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((64, 6, 2)).astype(np.float32)
    labels = (data.sum(axis=(1, 2)) > 0).astype(np.int64)
    x = tf.placeholder(tf.float32, [None, 6, 2])
    y = tf.placeholder(tf.int64, [None])
    _, state = tf.nn.dynamic_rnn(tf.nn.rnn_cell.LSTMCell(8), x, dtype=tf.float32)
    logits = tf.layers.dense(state.h, 2, name="head")
    loss = tf.losses.sparse_softmax_cross_entropy(y, logits)
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: data, y: labels})
        for _ in range(60):
            sess.run(train, {x: data, y: labels})
        last, want = sess.run([loss, logits], {x: data, y: labels})
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert last < 0.5 * first  # measured 0.03-0.06 of the first loss (seeds 1-5)

    tf.reset_default_graph()
    x = tf.placeholder(tf.float32, [None, 6, 2])
    fused = tf.contrib.rnn.LSTMBlockFusedCell(8)
    _, state = fused(tf.transpose(x, [1, 0, 2]), dtype=tf.float32)
    logits = tf.layers.dense(state.h, 2, name="head")
    kernel_var, bias_var = fused.variables
    names = {"rnn/lstm_cell/kernel": kernel_var, "rnn/lstm_cell/bias": bias_var}
    names.update({v.op.name: v for v in tf.global_variables() if v.op.name.startswith("head/")})
    with tf.Session() as sess:
        tf.train.Saver(names).restore(sess, path)
        got = sess.run(logits, {x: data})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_flowstack_lstm_layers_start_with_a_forget_bias_of_one_in_tfs_f_block():
    """trainer.layers' own LSTM cells share the layout: their initial bias of 1 sits on f (columns
    [2u, 3u)), so a fresh cell leans toward keeping c (sigmoid(1) = 0.73 where [x, h] is zero)."""
    g = tf.Graph()
    with g.as_default():
        layers = [tf.layers.LSTMCell(3, 2, name="a"), tf.layers.LSTMBlockFusedCell(3, 2, name="b")]
        init = tf.global_variables_initializer()
    sess = tf.Session(g)
    sess.run(init)
    for layer in layers:
        np.testing.assert_array_equal(sess.run(layer.bias), [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0])
