"""Optimizer slots are named as TensorFlow 1.15 names them, and checkpoints written when slots were
``<var>/<optimizer>/<slot>`` still restore (trainer/slot_names.py)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable
from trainer.saver import CheckpointError
from trainer.slot_names import legacy_slot_name


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _regression(optimizer):
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.Variable(tf.ones([2, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - 1.0))
    return x, w, b, optimizer.minimize(loss)


@pytest.mark.parametrize("optimizer, slots", [
    (lambda: tf.train.AdamOptimizer(0.1), {"m": "w/Adam:0", "v": "w/Adam_1:0"}),
    (lambda: tf.train.MomentumOptimizer(0.1, 0.9), {"momentum": "w/Momentum:0"}),
    (lambda: tf.train.AdagradOptimizer(0.1), {"accumulator": "w/Adagrad:0"}),
    (lambda: tf.train.RMSPropOptimizer(0.1, momentum=0.5), {"rms": "w/RMSProp:0", "momentum": "w/RMSProp_1:0"}),
    (lambda: tf.train.AdadeltaOptimizer(0.1), {"accum": "w/Adadelta:0", "accum_update": "w/Adadelta_1:0"}),
    (lambda: tf.train.FtrlOptimizer(0.1), {"accum": "w/Ftrl:0", "linear": "w/Ftrl_1:0"}),
])
def test_slots_are_named_as_tensorflow_names_them(optimizer, slots):
    opt = optimizer()
    _, w, _, _ = _regression(opt)
    assert {name: opt.get_slot(w, name).name for name in slots} == slots
    for slot_name, tensor_name in slots.items():  # and the old name maps onto the new one
        assert legacy_slot_name(tensor_name[:-2]) == f"w/{opt.name}/{slot_name}"


def test_a_named_optimizer_names_its_slots_and_scope_and_a_second_one_gets_unique_slots():
    x = tf.placeholder(tf.float32, [None, 2])
    w = tf.Variable(tf.ones([2, 1]), name="w")
    loss = tf.reduce_sum(tf.matmul(x, w))
    first, second = tf.train.AdamOptimizer(0.1, name="d_opt"), tf.train.AdamOptimizer(0.1)
    step = first.minimize(loss)
    second.minimize(loss)
    assert [v.name for v in tf.global_variables()] == [
        "w:0", "beta1_power:0", "beta2_power:0", "w/d_opt:0", "w/d_opt_1:0",
        "beta1_power_1:0", "beta2_power_1:0", "w/Adam:0", "w/Adam_1:0"]
    assert step.name.startswith("d_opt/")  # the update ops are built in the optimizer's name scope
    with pytest.raises(ValueError, match="centered=True"):
        tf.train.RMSPropOptimizer(0.1, centered=True)


def test_a_checkpoint_with_the_old_slot_names_restores_into_the_renamed_slots(tmp_path):
    x, w, b, train = _regression(tf.train.AdamOptimizer(0.1))
    opt_vars = {v.op.name: v for v in tf.global_variables()}
    assert sorted(opt_vars) == ["b", "b/Adam", "b/Adam_1", "beta1_power", "beta2_power", "w", "w/Adam", "w/Adam_1"]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(train, {x: np.asarray([[1.0, 2.0], [3.0, -1.0]], np.float32)})
    trained = {name: sess.run(v) for name, v in opt_vars.items()}
    old_names = {"w/Adam": "w/Adam/m", "w/Adam_1": "w/Adam/v", "b/Adam": "b/Adam/m", "b/Adam_1": "b/Adam/v"}
    old_saver = tf.train.Saver({old_names.get(name, name): v for name, v in opt_vars.items()})
    path = old_saver.save(sess, str(tmp_path / "old"))  # keyed as the code before the rename keyed it
    assert sorted(name for name, _ in tf.train.list_variables(path)) == [
        "b", "b/Adam/m", "b/Adam/v", "beta1_power", "beta2_power", "w", "w/Adam/m", "w/Adam/v"]

    fresh = tf.Session()
    fresh.run(tf.global_variables_initializer())
    tf.train.Saver().restore(fresh, path)
    for name, v in opt_vars.items():
        np.testing.assert_array_equal(fresh.run(v), trained[name], err_msg=name)
    assert not np.array_equal(trained["w/Adam_1"], np.zeros_like(trained["w/Adam_1"]))


def test_a_partitioned_variable_restores_its_old_logical_slots_into_renamed_shard_slots(tmp_path):
    ids = tf.placeholder(tf.int64, [None])
    emb = partitioned_variable("emb", (6, 2), partitioner=fixed_size_partitioner(2))
    loss = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids, partition_strategy="div"))
    opt = tf.train.AdamOptimizer(0.1)
    train = opt.minimize(loss)
    assert [opt.get_slot(part, "v").name for part in emb] == ["emb/part_0/Adam_1:0", "emb/part_1/Adam_1:0"]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(train, {ids: np.asarray([0, 4])})
    v_slots = [opt.get_slot(part, "v") for part in emb]
    m_slots = [opt.get_slot(part, "m") for part in emb]
    trained = np.concatenate(sess.run(v_slots))
    others = [v for v in tf.global_variables() if v not in v_slots and v not in m_slots and v not in list(emb)]
    path = tf.train.Saver({"emb": list(emb), "emb/Adam/m": m_slots, "emb/Adam/v": v_slots,
                           **{v.op.name: v for v in others}}).save(sess, str(tmp_path / "old"))

    fresh = tf.Session()
    fresh.run(tf.global_variables_initializer())
    tf.train.Saver().restore(fresh, path)
    np.testing.assert_array_equal(np.concatenate(fresh.run(v_slots)), trained)
    assert trained[[0, 4]].any() and not trained[[1, 2, 3, 5]].any()


def test_a_new_name_missing_from_an_old_checkpoint_is_still_reported_by_its_new_name(tmp_path):
    x, w, b, train = _regression(tf.train.AdamOptimizer(0.1))
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    path = tf.train.Saver({"w": w, "b": b}).save(sess, str(tmp_path / "weights_only"))
    with pytest.raises(CheckpointError, match="'w/Adam' is missing"):
        tf.train.Saver().restore(sess, path)
