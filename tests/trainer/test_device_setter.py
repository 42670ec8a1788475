"""Placement by replica_device_setter: variables on PS tasks balanced by bytes, the rest on the worker,
updates and slots with their variable. The placed graphs run in one process with
Session(allow_soft_placement=True) (a plain Session refuses nodes of other tasks)."""

import numpy as np
import pytest

import trainer
from trainer.devices import DeviceSpec
from trainer.train import GreedyLoadBalancingStrategy, RoundRobinStrategy, replica_device_setter


def _model(graph, setter, sizes):
    with graph.as_default(), trainer.device(setter):
        x = trainer.placeholder(np.float32, (None, 4), name="x")
        ws = [trainer.Variable(np.full((n,), 0.5, np.float32), name=f"w{i}") for i, n in enumerate(sizes)]
        loss = trainer.add_n([trainer.reduce_sum(w) for w in ws]) + trainer.reduce_sum(x)
        train = trainer.train.AdamOptimizer(0.1).minimize(loss)
    return x, ws, loss, train


def test_device_accepts_a_function_and_task_names():
    g = trainer.Graph()
    with g.as_default():
        with trainer.device("/job:ps/replica:0/task:1/device:CPU:0"):
            a = trainer.constant(1.0)
        with trainer.device(lambda node: "/job:worker/task:2" if node.op_type == "Add" else None):
            b = a + a
            c = trainer.constant(2.0)
        with trainer.device("/job:worker"), trainer.device(lambda node: node.device + "/task:3"):
            d = trainer.constant(3.0)
        with trainer.device("/job:worker/task:1"), trainer.device("CPU:0"):
            e = trainer.constant(4.0)  # nested names merge: the inner sets the device, the outer the task
        with trainer.device("/job:worker/task:1"), trainer.device(None):
            f = trainer.constant(5.0)
    assert a.node.device == "/job:ps/replica:0/task:1/device:CPU:0"
    assert b.node.device == "/job:worker/replica:0/task:2" and c.node.device == ""
    assert d.node.device == "/job:worker/replica:0/task:3"
    assert e.node.device == "/job:worker/replica:0/task:1/device:CPU:0" and f.node.device == ""


def test_bad_device_names_are_named():
    for bad in ("/job:ps/task:x", "/job:ps/device:TPU:0", "/job:1ps", "/job:ps/tsk:0"):
        with pytest.raises(ValueError, match="device"):
            DeviceSpec.parse(bad)


def test_variables_go_to_ps_balanced_by_bytes_and_updates_follow():
    g = trainer.Graph()
    setter = replica_device_setter(cluster={"ps": ["a:1", "b:1", "c:1"], "worker": ["d:1"]},
                                   worker_device="/job:worker/task:0")
    x, ws, loss, train = _model(g, setter, [1000, 10, 10, 500, 500, 10])
    tasks = [DeviceSpec.parse(w.node.device) for w in ws]
    assert all(t.job == "ps" for t in tasks)
    # greedy by bytes: 1000 -> ps0, 10 -> ps1, 10 -> ps2, 500 -> ps1, 500 -> ps2, 10 -> ps1 or ps2
    assert [t.task for t in tasks[:5]] == [0, 1, 2, 1, 2]
    assert DeviceSpec.parse(x.node.device).job == "worker"
    assert loss.node.device == "/job:worker/replica:0/task:0"
    adam = [n for n in g.nodes if n.op_type == "ApplyAdam"]
    assert len(adam) == len(ws)
    for n in adam:  # each update and each slot lives where its variable does
        assert n.device == n.inputs[0].node.device
        for slot in n.inputs[1:3]:
            assert slot.node.device == n.inputs[0].node.device
    for w in ws:
        assert w.initializer.device == w.node.device
    with trainer.Session(g, allow_soft_placement=True) as sess:  # every task's nodes in one process
        sess.run(trainer.variables_initializer(trainer.global_variables(g)))
        sess.run(train, {x: np.ones((2, 4), np.float32)})
        assert float(sess.run(ws[0])[0]) == pytest.approx(0.4, abs=1e-5)


def test_round_robin_is_available_and_no_ps_means_no_constraint():
    assert replica_device_setter(ps_tasks=0) is None
    g = trainer.Graph()
    _, ws, _, _ = _model(g, replica_device_setter(ps_tasks=2, ps_strategy=RoundRobinStrategy(2)), [5, 5, 5])
    assert [DeviceSpec.parse(w.node.device).task for w in ws] == [0, 1, 0]


def test_greedy_balances_what_round_robin_does_not():
    sizes = [4096, 16, 16] * 6  # weight, bias, scale per layer: round robin puts every weight on one PS
    loads = {}
    for name, strategy in (("greedy", GreedyLoadBalancingStrategy(3)), ("rr", RoundRobinStrategy(3))):
        g = trainer.Graph()
        _, ws, _, _ = _model(g, replica_device_setter(ps_tasks=3, ps_strategy=strategy), sizes)
        per = [0, 0, 0]
        for w in ws:
            per[DeviceSpec.parse(w.node.device).task] += w.shape[0] * 4
        loads[name] = max(per) / (sum(per) / 3)
    assert loads["greedy"] <= 1.1 < loads["rr"]


def test_strategy_out_of_range_is_an_error():
    g = trainer.Graph()
    with g.as_default(), trainer.device(replica_device_setter(ps_tasks=2, ps_strategy=lambda node: 5)):
        with pytest.raises(ValueError, match="PS task 5"):
            trainer.Variable(np.zeros(3, np.float32), name="v")


@pytest.mark.parametrize("make", [
    lambda: trainer.train.GradientDescentOptimizer(0.1), lambda: trainer.train.MomentumOptimizer(0.1, 0.9),
    lambda: trainer.train.AdagradOptimizer(0.1), lambda: trainer.train.AdamOptimizer(0.1),
    lambda: trainer.train.LazyAdamOptimizer(0.1), lambda: trainer.train.RMSPropOptimizer(0.1)])
def test_every_update_is_built_on_its_variables_device(make):
    g = trainer.Graph()
    with g.as_default(), trainer.device(replica_device_setter(ps_tasks=3, worker_device="/job:worker/task:0")):
        ids = trainer.placeholder(np.int64, (None,), name="ids")
        table = trainer.partitioned_variables.partitioned_variable("emb", (30, 4),
                                                                   partitioner=trainer.fixed_size_partitioner(3))
        w = trainer.Variable(np.ones((4, 1), np.float32), name="w")
        loss = trainer.reduce_sum(trainer.matmul(trainer.nn.embedding_lookup(table, ids), w))
        make().minimize(loss, global_step=trainer.train.get_or_create_global_step())
    writers = [n for n in g.nodes if n.stateful and n.inputs and n.inputs[0] is not None
               and n.inputs[0].node.op_type == "Variable"]
    assert len(writers) > 6
    for n in writers:
        assert n.device == n.inputs[0].node.device, f"{n.name} ({n.op_type}) on {n.device!r}"
        assert DeviceSpec.parse(n.device).job == "ps"
