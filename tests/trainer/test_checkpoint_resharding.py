"""Checkpoints by logical name: 2 shards restore into 3, into 1, into a plain Variable (and back),
optimizer slots included; `flowstack export` takes a checkpoint of a partitioned model."""

from pathlib import Path

import numpy as np
import pytest

import edge_runtime
import trainer
from flowstack_cli.main import main
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable
from trainer.saver import CheckpointError, load_checkpoint

ROWS, DIM = 11, 3
IDS = np.asarray([0, 4, 4, 10, 7], np.int64)


def _build(shards):
    """An embedding model whose table has ``shards`` shards (0: a plain Variable), trained by LazyAdam."""
    g = trainer.Graph()
    with g.as_default():
        init = np.zeros((ROWS, DIM), np.float32)
        if shards:
            table = partitioned_variable("emb", (ROWS, DIM), initializer=init, partitioner=fixed_size_partitioner(shards))
        else:
            table = trainer.Variable(init, name="emb")
        ids = trainer.placeholder(np.int64, (None,), name="ids")
        loss = trainer.reduce_sum(trainer.nn.embedding_lookup(table, ids, partition_strategy="div") * 0.5)
        opt = trainer.train.LazyAdamOptimizer(0.1)
        train = opt.minimize(loss, global_step=trainer.train.get_or_create_global_step())
        saver = trainer.Saver()
    parts = list(table) if shards else [table]
    return g, parts, ids, train, saver, opt


def _logical(sess, parts, opt):
    """The table and its Adam slots, whole, as one process sees them."""
    cat = lambda vs: np.concatenate([sess.run(v) for v in vs])  # noqa: E731
    return {"emb": cat(parts), "m": cat(opt.get_slot(v, "m") for v in parts), "v": cat(opt.get_slot(v, "v") for v in parts)}


def _trained_checkpoint(tmp_path, shards):
    g, parts, ids, train, saver, opt = _build(shards)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        for _ in range(3):
            sess.run(train, {ids: IDS})
        path = saver.save(sess, str(tmp_path / "model"), global_step=3)
        return path, _logical(sess, parts, opt)


@pytest.mark.parametrize("written, restored", [(2, 3), (2, 1), (2, 0), (0, 3), (3, 2)])
def test_checkpoint_restores_into_any_shard_count(tmp_path, written, restored):
    path, want = _trained_checkpoint(tmp_path, written)
    meta, values = load_checkpoint(path)
    assert {"emb", "emb/Adam", "emb/Adam_1", "global_step"} <= set(values)  # logical names only
    assert not any("part_" in name for name in values)
    np.testing.assert_array_equal(values["emb"], want["emb"])
    g, parts, ids, train, saver, opt = _build(restored)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        saver.restore(sess, path)
        got = _logical(sess, parts, opt)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        assert sess.run(trainer.train.get_or_create_global_step(g)) == 3
        sess.run(train, {ids: IDS})  # training goes on from the restored state


def test_touched_rows_are_the_only_ones_trained(tmp_path):
    _, want = _trained_checkpoint(tmp_path, 2)
    untouched = sorted(set(range(ROWS)) - set(IDS.tolist()))
    assert (want["emb"][untouched] == 0).all() and (want["emb"][IDS] != 0).all()


def test_missing_shard_in_var_list_is_named():
    g = trainer.Graph()
    with g.as_default():
        pv = partitioned_variable("emb", (ROWS, DIM), initializer=np.zeros((ROWS, DIM), np.float32),
                                  partitioner=fixed_size_partitioner(3))
        with pytest.raises(ValueError, match="'emb'.*pass every shard"):
            trainer.Saver(var_list=[pv[0], pv[2]])


def test_shape_mismatch_on_restore_names_the_logical_variable(tmp_path):
    path, _ = _trained_checkpoint(tmp_path, 2)
    g = trainer.Graph()
    with g.as_default():
        partitioned_variable("emb", (ROWS + 1, DIM), initializer=np.zeros((ROWS + 1, DIM), np.float32),
                             partitioner=fixed_size_partitioner(2))
        saver = trainer.Saver()
    with trainer.Session(g) as sess, pytest.raises(CheckpointError, match=r"'emb'.*\(12, 3\)"):
        saver.restore(sess, path)


def test_export_takes_a_checkpoint_of_a_partitioned_model(tmp_path: Path):
    rng = np.random.default_rng(0)
    g = trainer.Graph()
    with g.as_default():
        x = trainer.placeholder(np.float32, (None, 6), name="x")
        w = partitioned_variable("dense/kernel", (6, 4), initializer=rng.standard_normal((6, 4)).astype(np.float32),
                                 partitioner=fixed_size_partitioner(2))
        y = trainer.identity(trainer.matmul(x, w.as_tensor()), name="y")
        saver = trainer.Saver()
    xs = rng.standard_normal((2, 6)).astype(np.float32)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        want = sess.run(y, {x: xs})
        saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=1)
    out = tmp_path / "model.flow"
    assert main(["export", str(tmp_path / "ckpt"), "--inputs", "x=x", "--outputs", "y=y", "-o", str(out)]) == 0
    np.testing.assert_allclose(edge_runtime.load(out).run({"x": xs})["y"], want, rtol=1e-5)
