"""The plan compiler's pass API: device names, placement on tasks, partitioning by task with
rendezvous keys (what the distributed runtime builds on), and the lowering table."""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
import pytest

import trainer as T
from trainer.devices import DeviceSpec
from trainer.executor import compile_plan
from trainer.passes.lower import LOWERING_RULES
from trainer.passes.partition import locate
from trainer.passes.prune import prune
from trainer.placement import PlacementError
from trainer.plan import RemotePartition, TaskName, run_steps, step_outputs
from trainer.rendezvous import Rendezvous
from trainer.state import RunContext

PS = "/job:ps/replica:0/task:0/device:CPU:0"
WORKER = "/job:worker/replica:0/task:0/device:CPU:0"


@pytest.mark.parametrize("name, parts, text", [
    ("/job:ps/task:0", ("ps", None, 0, None, None), "/job:ps/replica:0/task:0"),
    ("/job:worker/task:1/CPU:0", ("worker", None, 1, "CPU", 0), "/job:worker/replica:0/task:1/device:CPU:0"),
    ("/job:worker/replica:0/task:1/device:CPU:0", ("worker", 0, 1, "CPU", 0),
     "/job:worker/replica:0/task:1/device:CPU:0"),
    ("gpu", (None, None, None, "GPU", None), "GPU:0"),
    ("/device:CPU:1", (None, None, None, "CPU", 1), "CPU:1"),
])
def test_device_names_parse(name, parts, text):
    spec = DeviceSpec.parse(name)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == parts
    assert str(spec) == text


@pytest.mark.parametrize("bad", ["/job:ps/task:x", "TPU:0", "/job:/task:0", "/job:ps/unknown:1"])
def test_bad_device_names_name_the_part(bad):
    with pytest.raises(ValueError, match="unknown device"):
        DeviceSpec.parse(bad)


def test_device_scopes_merge_inner_over_outer_and_take_functions():
    g = T.Graph()
    seen = []

    def on_ps_if_variable(op):
        seen.append((op.type, op.device))
        return "/job:ps/task:0" if op.type == "Variable" else op.device

    with g.as_default():
        with T.device("/job:worker/task:1"):
            with T.device("CPU:0"):
                a = T.constant(1.0, name="a")
            with T.device("/task:2"):
                b = T.constant(1.0, name="b")
            with T.device(None):
                c = T.constant(1.0, name="c")
            with T.device(on_ps_if_variable):
                v = T.Variable(np.zeros(2, np.float32), name="v")
                d = T.constant(1.0, name="d")
    assert a.node.device == "/job:worker/replica:0/task:1/device:CPU:0"
    assert b.node.device == "/job:worker/replica:0/task:2"
    assert c.node.device == ""
    assert v.node.device == "/job:ps/replica:0/task:0"  # the function's answer; the outer scope adds nothing
    assert d.node.device == "/job:worker/replica:0/task:1"  # the function kept it; the outer scope filled it
    assert ("Variable", "") in seen


def _ps_worker_graph(worker_devices=("CPU:0",)):
    """w on the PS, read by two ops on each worker device; an update on the PS fed from the worker."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2, 2), name="x")
        delta = T.placeholder(np.float32, (2, 2), name="delta")
        with T.device("/job:ps/task:0"):
            w = T.Variable(np.eye(2, dtype=np.float32), name="w")
            update = w.assign_add(delta)
        outs = []
        for dev in worker_devices:
            with T.device(f"/job:worker/task:0/{dev}"):
                outs.append(T.matmul(x, w) + T.reduce_sum(w))  # two readers of w per device
        y = T.add_n(outs) if len(outs) > 1 else outs[0]
        init = T.global_variables_initializer()
    return g, x, delta, w, update, y, init


def _compile(g, fetches, targets, feeds, num_cpu_devices=1, task=("worker", 0)):
    sess = T.Session(g, num_cpu_devices=num_cpu_devices, local_task=task)
    return compile_plan(g, fetches, targets, feeds, sess, allow_remote=True)


def _cross_task_recvs(plan):
    local = [(st.attrs["tensor_name"], p.device) for p in plan.partitions for st in p.steps
             if st.node.op_type == "Recv" and st.attrs["send_device"].startswith("/job:ps")]
    remote = [(st.attrs["tensor_name"], p.device) for rp in plan.remote_partitions for p in rp.partitions
              for st in p.steps if st.node.op_type == "Recv"]
    return local, remote


def test_partition_by_task_joins_tasks_with_one_transfer_per_tensor_and_task():
    g, x, delta, w, update, y, init = _ps_worker_graph()
    plan = _compile(g, [y], [update.node], [x, delta])
    assert [p.device for p in plan.partitions] == ["CPU:0"]
    (ps,) = plan.remote_partitions
    assert isinstance(ps, RemotePartition) and ps.task == ("ps", 0)
    assert [p.device for p in ps.partitions] == [PS]
    assert {n.name for n in ps.nodes} >= {"w", update.node.name}
    local_recvs, remote_recvs = _cross_task_recvs(plan)
    # w is read four times on the worker (twice for y, and the update's result is not fetched):
    # one transfer. The PS receives the fed delta once.
    assert local_recvs == [("w:0", "CPU:0")]
    assert remote_recvs == [("delta:0", PS)]
    keys = {(k.tensor_name, k.send_device, k.recv_device) for k in ps.sends}
    assert keys == {("w:0", PS, WORKER)}
    assert [(k.tensor_name, k.send_device, k.recv_device) for k in ps.recvs] == [("delta:0", WORKER, PS)]
    assert ps.sends[0].key == f"{PS};{WORKER};w:0"


def test_second_device_of_a_task_gets_the_value_from_the_tasks_one_recv():
    g, x, delta, w, update, y, init = _ps_worker_graph(("CPU:0", "CPU:1"))
    plan = _compile(g, [y], [], [x], num_cpu_devices=2)
    local_recvs, _ = _cross_task_recvs(plan)
    assert len(local_recvs) == 1 and local_recvs[0][0] == "w:0"
    local_copies = [st for p in plan.partitions for st in p.steps
                    if st.node.op_type == "Recv" and st.attrs["tensor_name"] == "w:0"
                    and not st.attrs["send_device"].startswith("/job:ps")]
    assert len(local_copies) == 1  # CPU:0 -> CPU:1 inside the worker
    (ps,) = plan.remote_partitions
    assert len(ps.sends) == 1


def test_every_partition_reads_only_its_own_values():
    g, x, delta, w, update, y, init = _ps_worker_graph(("CPU:0", "CPU:1"))
    plan = _compile(g, [y, w.value()], [update.node], [x, delta], num_cpu_devices=2)
    feed_slots = {f.slot for f in plan.feeds}
    parts = [(("worker", 0), p) for p in plan.partitions]
    parts += [(rp.task, p) for rp in plan.remote_partitions for p in rp.partitions]
    for task, p in parts:
        produced = {o for st in p.steps for o in step_outputs(st)}
        for st in p.steps:
            for slot in st.ins:
                ok = (slot in produced or plan.template[slot] is not None
                      or (slot in feed_slots and task == ("worker", 0))
                      or all(slot not in step_outputs(s) for s in plan.steps)
                      and all(slot not in step_outputs(s) for rp in plan.remote_partitions
                              for q in rp.partitions for s in q.steps))
                assert ok, (task, p.device, st.node.name, slot)
    # The worker reads every fetch from its own partitions: w, produced on the PS, is received.
    local = {o for p in plan.partitions for st in p.steps for o in step_outputs(st)}
    assert all(s in local for s in plan.fetch_slots)
    w_slot = plan.fetch_slots[1]
    assert next(st for p in plan.partitions for st in p.steps if w_slot in step_outputs(st)).node.op_type == "Recv"


def test_rendezvous_keys_are_stable_across_recompiles():
    g, x, delta, w, update, y, init = _ps_worker_graph(("CPU:0", "CPU:1"))

    def keys():
        plan = _compile(g, [y], [update.node], [x, delta], num_cpu_devices=2)
        return [(rp.task, [k.key for k in rp.sends], [k.key for k in rp.recvs]) for rp in plan.remote_partitions]

    first = keys()
    assert first and first == keys()
    # Another fetch order (other slot numbers) gives the same keys.
    plan = _compile(g, [w.value(), y], [update.node], [delta, x], num_cpu_devices=2)
    assert sorted(k.key for k in plan.remote_partitions[0].sends) == sorted(first[0][1])


def test_plain_session_refuses_remote_placement_naming_node_and_device():
    g, x, delta, w, update, y, init = _ps_worker_graph()
    with pytest.raises(PlacementError, match=r"node 'w' \(Variable\) is placed on /job:ps/replica:0/task:0"
                                             r"/device:CPU:0.*no cluster is configured; use Session\(target="):
        T.Session(g).run(w.value())


def test_soft_placement_runs_a_cluster_graph_in_one_process():
    g, x, delta, w, update, y, init = _ps_worker_graph(("CPU:0", "CPU:3"))
    s = T.Session(g, allow_soft_placement=True)
    s.run(init)
    xv = np.ones((2, 2), np.float32)
    np.testing.assert_allclose(s.run(y, {x: xv}), 2 * (xv @ np.eye(2) + 2))
    s.run(update, {delta: np.ones((2, 2), np.float32)})
    np.testing.assert_array_equal(s.run(w), np.eye(2) + 1)
    assert set(s.placer.place(g.nodes).values()) == {"CPU:0"}  # CPU:3 does not exist here either


def test_local_task_names_are_local_in_a_plain_session():
    g = T.Graph()
    with g.as_default():
        with T.device("/job:localhost/replica:0/task:0/device:CPU:0"):
            v = T.Variable(np.ones(3, np.float32), name="v")
            y = v * 2.0
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    np.testing.assert_array_equal(s.run(y), [2, 2, 2])
    assert s.placer.place([y.node])[y.node] == "CPU:0"
    assert locate(PS, TaskName("ps", 0)) == (("ps", 0), "CPU:0")
    assert locate("CPU:0", TaskName("worker", 1)) == (("worker", 1), "CPU:0")


def test_prune_and_lowering_table():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2,), name="x")
        y = T.identity(x * 2.0, name="y")
        T.constant(3.0, name="unused")
    order = prune(g, [y], [], [x])
    assert [n.op_type for n in order] == ["Constant", "Mul", "Identity"]  # the fed x and the unused constant are cut
    with pytest.raises(T.GraphError, match="placeholder 'x:0'.*must be fed"):
        prune(g, [y], [], [])
    assert ("", "Constant") in LOWERING_RULES and ("flowstack", "Assign") in LOWERING_RULES
    plan = compile_plan(g, [y], [], [x], T.Session(g))
    assert [st.node.op_type for st in plan.steps] == ["Mul", "Identity"]  # the constant went to the template


def _run_split(plan, sessions: dict, feeds: dict):
    """Run a plan's partitions as their tasks would, each task with its own session state and
    value slots, meeting only in one rendezvous: a remote partition must be self-contained."""
    rendezvous = Rendezvous()
    results, errors = {}, []

    def run(task, partitions, feed_values):
        vals = plan.template[:]
        for spec, value in feed_values:
            vals[spec.slot] = spec.convert(value)
        rctx = RunContext(sessions[task], rendezvous)
        threads = [threading.Thread(target=_run_partition, args=(p, vals, rctx, errors)) for p in partitions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
        results[task] = vals

    local = ("worker", 0)
    jobs = [(local, plan.partitions, [(spec, feeds[spec.tensor]) for spec in plan.feeds])]
    jobs += [(rp.task, rp.partitions, []) for rp in plan.remote_partitions]
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not errors and not any(t.is_alive() for t in threads), errors
    return [results[local][s] for s in plan.fetch_slots]


def _run_partition(partition, vals, rctx, errors):
    try:
        run_steps([(s.fn, s.ins, s.outs, s.attrs, s.wants_ctx) for s in partition.steps], vals, rctx, partition.steps)
    except Exception as e:  # noqa: BLE001 - reported by the caller
        rctx.rendezvous.abort()
        errors.append(e)


def test_partitions_run_as_separate_tasks_through_one_rendezvous():
    g, x, delta, w, update, y, init = _ps_worker_graph(("CPU:0", "CPU:1"))
    worker = T.Session(g, num_cpu_devices=2, local_task=("worker", 0))
    ps = T.Session(g, local_task=("ps", 0))
    sessions = {("worker", 0): worker, ("ps", 0): ps}
    compile_ = partial(compile_plan, session=worker, allow_remote=True)
    _run_split(compile_(g, [], [init], []), sessions, {})
    assert "w" in ps.state.variables and "w" not in worker.state.variables  # w lives on the PS only
    xv = np.arange(4, dtype=np.float32).reshape(2, 2)
    eye = np.eye(2, dtype=np.float32)
    # Two steps: y's four reads of w and the update in one step are unordered (as in TensorFlow),
    # so each reader could see either value; one step per job keeps the expected values exact.
    (out,) = _run_split(compile_(g, [y], [], [x]), sessions, {x: xv})
    np.testing.assert_allclose(out, 2 * (xv @ eye + eye.sum()))
    _run_split(compile_(g, [], [update.node], [delta]), sessions, {delta: np.ones((2, 2), np.float32)})
    np.testing.assert_array_equal(ps.state.variables["w"], eye + 1)
    (out,) = _run_split(compile_(g, [y], [], [x]), sessions, {x: xv})
    np.testing.assert_allclose(out, 2 * (xv @ (eye + 1) + (eye + 1).sum()))
