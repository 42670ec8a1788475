"""embedding_lookup over shards and sparse optimizer updates, against NumPy references."""

import numpy as np
import pytest

import trainer
from trainer.devices import DeviceSpec
from trainer.gradients import IndexedSlices
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable

TABLE = np.arange(40, dtype=np.float32).reshape(10, 4) / 10


def _lookup(params_kind, strategy, ids, max_norm=None):
    g = trainer.Graph()
    with g.as_default():
        if params_kind == "variable":
            params = trainer.Variable(TABLE, name="emb")
            logical = TABLE
        elif params_kind == "partitioned":
            params = partitioned_variable("emb", TABLE.shape, initializer=TABLE, partitioner=fixed_size_partitioner(3))
            logical = _mod_layout(TABLE, 3) if strategy == "mod" else TABLE
        else:  # a list of shards laid out for the strategy: row r of the logical table is at (shard, local row)
            layout = [TABLE[i::3] for i in range(3)] if strategy == "mod" else [TABLE[:4], TABLE[4:7], TABLE[7:]]
            params = [trainer.Variable(s, name=f"shard{i}") for i, s in enumerate(layout)]
            logical = TABLE
        out = trainer.nn.embedding_lookup(params, np.asarray(ids, np.int64), partition_strategy=strategy, max_norm=max_norm)
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        return sess.run(out), logical


def _mod_layout(table, n):
    """The logical table a "mod" lookup sees when shards hold contiguous slices of ``table``."""
    shards = np.split(table, np.cumsum([4, 3])[:2])
    return np.stack([shards[r % n][r // n] for r in range(len(table))])


@pytest.mark.parametrize("kind", ["variable", "partitioned", "list"])
@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_lookup_matches_numpy(kind, strategy):
    ids = [[9, 0, 3], [3, 3, 7]]  # 2-D, repeated ids, first and last rows
    got, logical = _lookup(kind, strategy, ids)
    np.testing.assert_array_equal(got, logical[np.asarray(ids)])


def test_max_norm_clips_rows():
    got, _ = _lookup("partitioned", "div", [1, 9], max_norm=1.0)
    want = TABLE[[1, 9]] / np.maximum(1.0, np.linalg.norm(TABLE[[1, 9]], axis=1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("bad_id", [-1, 10, 11])
def test_ids_outside_the_table_fail_instead_of_reading_a_wrong_row(strategy, bad_id):
    with pytest.raises(trainer.executor.KernelError, match="DynamicPartition|Gather"):
        _lookup("partitioned", strategy, [1, bad_id])


def test_bad_arguments_are_named():
    g = trainer.Graph()
    with g.as_default():
        v = trainer.Variable(TABLE, name="emb")
        with pytest.raises(ValueError, match="partition_strategy"):
            trainer.nn.embedding_lookup(v, [1], partition_strategy="hash")
        with pytest.raises(TypeError, match="integers"):
            trainer.nn.embedding_lookup(v, np.asarray([1.0], np.float32))
        with pytest.raises(ValueError, match="empty"):
            trainer.nn.embedding_lookup([], [1])


def test_gathers_run_on_each_shard_and_gradients_are_indexed_slices():
    g = trainer.Graph()
    setter = trainer.train.replica_device_setter(ps_tasks=3, worker_device="/job:worker/task:0")
    with g.as_default(), trainer.device(setter):
        pv = partitioned_variable("emb", (30, 4), partitioner=fixed_size_partitioner(3))
        ids = trainer.placeholder(np.int64, (None,), name="ids")
        out = trainer.nn.embedding_lookup(pv, ids, partition_strategy="div")
        loss = trainer.reduce_sum(out)
        grads = trainer.gradients(loss, list(pv))
        train = trainer.train.AdagradOptimizer(0.1).minimize(loss)
    gathers = [n for n in g.nodes if n.op_type == "Gather" and n.inputs[0].node.op_type == "Variable"]
    assert sorted(n.inputs[0].node.name for n in gathers) == [v.op.name for v in pv]
    for n in gathers:  # each shard's rows are gathered where the shard lives
        assert n.device == n.inputs[0].node.device and DeviceSpec.parse(n.device).job == "ps"
    stitch = next(n for n in g.nodes if n.op_type == "DynamicStitch")
    assert stitch.device == "/job:worker/replica:0/task:0"
    assert all(isinstance(gr, IndexedSlices) for gr in grads)
    applies = [n for n in g.nodes if n.op_type == "SparseApplyAdagrad"]
    assert len(applies) == 3 and all(n.device == n.inputs[0].node.device for n in applies)
    with trainer.Session(g, allow_soft_placement=True) as sess:
        sess.run(trainer.variables_initializer(trainer.global_variables(g)))
        before = sess.run(pv.as_tensor())
        sess.run(train, {ids: np.asarray([0, 29, 29], np.int64)})
        changed = np.flatnonzero((sess.run(pv.as_tensor()) != before).any(axis=1))
    assert changed.tolist() == [0, 29]


def _reference(name, table, slots, rows, grad_rows, t, lr=0.1):
    """One update of ``rows`` (unique) with summed gradient ``grad_rows``, as TensorFlow's sparse ops do."""
    var = table.copy()
    if name == "sgd":
        var[rows] -= lr * grad_rows
    elif name == "adagrad":
        slots["accumulator"][rows] += grad_rows ** 2
        var[rows] -= lr * grad_rows / np.sqrt(slots["accumulator"][rows])
    elif name == "momentum":
        slots["momentum"][rows] = 0.9 * slots["momentum"][rows] + grad_rows
        var[rows] -= lr * slots["momentum"][rows]
    elif name == "lazy_adam":
        b1, b2, eps = 0.9, 0.999, 1e-8
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        slots["m"][rows] = b1 * slots["m"][rows] + (1 - b1) * grad_rows
        slots["v"][rows] = b2 * slots["v"][rows] + (1 - b2) * grad_rows ** 2
        var[rows] -= alpha * slots["m"][rows] / (np.sqrt(slots["v"][rows]) + eps)
    return var


OPTIMIZERS = {
    "sgd": (lambda: trainer.train.GradientDescentOptimizer(0.1), {}),
    "adagrad": (lambda: trainer.train.AdagradOptimizer(0.1), {"accumulator": 0.1}),
    "momentum": (lambda: trainer.train.MomentumOptimizer(0.1, 0.9), {"momentum": 0.0}),
    "lazy_adam": (lambda: trainer.train.LazyAdamOptimizer(0.1), {"m": 0.0, "v": 0.0}),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_updates_match_numpy_and_leave_other_rows_alone(name):
    make, slot_init = OPTIMIZERS[name]
    rng = np.random.default_rng(3)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    g = trainer.Graph()
    with g.as_default():
        pv = partitioned_variable("emb", table.shape, initializer=table, partitioner=fixed_size_partitioner(3))
        ids = trainer.placeholder(np.int64, (None,), name="ids")
        coef = trainer.placeholder(np.float32, (None, 4), name="coef")
        loss = trainer.reduce_sum(trainer.nn.embedding_lookup(pv, ids, partition_strategy="div") * coef)
        opt = make()
        train = opt.minimize(loss)
    slots = {k: np.full(table.shape, v, np.float32) for k, v in slot_init.items()}
    want = table
    batches = [[1, 1, 8, 5], [8, 2, 2, 2], [1, 9]]  # duplicates within a batch; rows 0, 3, 4, 6, 7 never touched
    with trainer.Session(g) as sess:
        sess.run(trainer.global_variables_initializer())
        for t, batch in enumerate(batches, start=1):
            c = rng.standard_normal((len(batch), 4)).astype(np.float32)
            sess.run(train, {ids: np.asarray(batch, np.int64), coef: c})
            rows = np.unique(batch)
            summed = np.stack([c[np.asarray(batch) == r].sum(0) for r in rows])
            want = _reference(name, want, slots, rows, summed, t)
        got = sess.run(pv.as_tensor())
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        untouched = [0, 3, 4, 6, 7]
        np.testing.assert_array_equal(got[untouched], table[untouched])
        for slot_name, init in slot_init.items():
            logical = np.concatenate([sess.run(opt.get_slot(v, slot_name)) for v in pv])
            np.testing.assert_allclose(logical, slots[slot_name], rtol=1e-5, atol=1e-7)
            assert (logical[untouched] == init).all()
