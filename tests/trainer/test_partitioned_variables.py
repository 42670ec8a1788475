"""Partitioners and PartitionedVariable: TF's shard sizes and names, dense use, one PS task per shard."""

import numpy as np
import pytest

import trainer
from trainer.devices import DeviceSpec
from trainer.partitioned_variables import (fixed_size_partitioner, min_max_variable_partitioner,
                                           partitioned_variable, shard_sizes, variable_axis_size_partitioner)


def test_partitioners_follow_tensorflow_rules():
    assert fixed_size_partitioner(3)((10, 4), np.float32) == [3, 1]
    assert fixed_size_partitioner(2, axis=1)((10, 4), np.float32) == [1, 2]
    assert fixed_size_partitioner(8)((5, 4), np.float32) == [5, 1]  # never more shards than rows
    # 1000 x 64 float32 rows are 256 bytes: 256 KiB per shard is 1024 rows, so one shard ...
    assert min_max_variable_partitioner(4)((1000, 64), np.float32) == [1, 1]
    # ... and 10,000 rows want 10 shards, capped at max_partitions
    assert min_max_variable_partitioner(4)((10_000, 64), np.float32) == [4, 1]
    assert min_max_variable_partitioner(16, min_slice_size=64 << 10)((1000, 64), np.float32) == [4, 1]
    assert variable_axis_size_partitioner(256 * 100)((1000, 64), np.float32) == [10, 1]
    assert variable_axis_size_partitioner(256 * 100, max_shards=3)((1000, 64), np.float32) == [3, 1]
    assert shard_sizes(10, 3) == [4, 3, 3] and shard_sizes(7, 7) == [1] * 7
    with pytest.raises(ValueError, match="num_shards"):
        fixed_size_partitioner(0)
    with pytest.raises(ValueError, match="axis 2"):
        fixed_size_partitioner(2, axis=2)((4, 4), np.float32)


def test_shards_are_named_like_tensorflow_and_hold_their_slice():
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    g = trainer.Graph()
    with g.as_default():
        with trainer.name_scope("model"):
            pv = partitioned_variable("emb", (10, 3), initializer=full, partitioner=fixed_size_partitioner(3))
        dense = trainer.reduce_sum(pv.as_tensor() * 2.0)
        grads = trainer.gradients(dense, list(pv))
    assert pv.name == "model/emb" and len(pv) == 3 and pv.get_shape() == (10, 3)
    assert [v.name for v in pv] == ["model/emb/part_0:0", "model/emb/part_1:0", "model/emb/part_2:0"]
    assert [v.shape for v in pv] == [(4, 3), (3, 3), (3, 3)] and pv.offsets() == [0, 4, 7]
    assert pv[1].save_slice_info.full_name == "model/emb" and pv[1].save_slice_info.var_offset == (4, 0)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(pv.as_tensor()), full)
        assert sess.run(dense) == pytest.approx(2 * full.sum())
        for grad, v in zip(sess.run(grads), pv):
            np.testing.assert_array_equal(grad, np.full(v.shape, 2.0, np.float32))


def test_callable_initializer_runs_per_shard_and_bad_values_are_named():
    g = trainer.Graph()
    with g.as_default():
        pv = partitioned_variable("w", (5, 2), initializer=trainer.init.ones, partitioner=fixed_size_partitioner(2))
        with pytest.raises(ValueError, match=r"initial value has shape \(4, 2\)"):
            partitioned_variable("bad", (5, 2), initializer=np.ones((4, 2)), partitioner=fixed_size_partitioner(2))
        with pytest.raises(ValueError, match="one axis"):
            partitioned_variable("two", (4, 4), partitioner=lambda shape, dtype: [2, 2])
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        assert sess.run(pv.as_tensor()).tolist() == np.ones((5, 2)).tolist()


def test_device_setter_puts_shards_on_different_ps_tasks():
    g = trainer.Graph()
    with g.as_default(), trainer.device(trainer.train.replica_device_setter(ps_tasks=3)):
        pv = partitioned_variable("emb", (300, 8), partitioner=fixed_size_partitioner(3))
    assert sorted(DeviceSpec.parse(v.node.device).task for v in pv) == [0, 1, 2]


def test_optimizers_take_a_partitioned_variable_in_var_list_and_tf_helper_builds_shards():
    g = trainer.Graph()
    with g.as_default():
        pv = partitioned_variable("w", (4, 2), initializer=np.ones((4, 2), np.float32), partitioner=fixed_size_partitioner(2))
        other = trainer.Variable(np.ones(2, np.float32), name="other")
        loss = trainer.reduce_sum(pv.as_tensor()) + trainer.reduce_sum(other)
        train = trainer.train.GradientDescentOptimizer(0.5).minimize(loss, var_list=[pv])
        shards = trainer.partitioned_variables.create_partitioned_variables((6, 3), [1, 3], np.zeros((6, 3)), name="t")
    assert [v.name for v in shards] == ["t/part_0:0", "t/part_1:0", "t/part_2:0"] and shards[2].shape == (6, 1)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        sess.run(train)
        assert sess.run(pv.as_tensor()).tolist() == np.full((4, 2), 0.5).tolist()
        assert sess.run(other).tolist() == [1.0, 1.0]  # not in var_list
