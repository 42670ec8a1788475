"""What the master registers on a task: the partition pass's subgraph, shipped as node records and
compiled on the task by the single-process pipeline. Two tasks in one process, without gRPC:
each task's step table stands in for its server."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import trainer as T
from trainer.distributed import wire
from trainer.distributed.partitions import RegisteredPartition, describe, run_partition, sending_task
from trainer.distributed.rendezvous import StepTable
from trainer.executor import compile_plan
from trainer.state import SessionState

WORKER, PS = "/job:worker/task:0", "/job:ps/task:0"


class Pull:
    """What a peer's ``start_recv`` returns, over another task's table in this process."""

    def __init__(self, table, step_id, key, timeout):
        self.table, self.step_id, self.key, self.timeout = table, step_id, key, timeout

    def result(self):
        return self.table.take(self.step_id, self.key, self.timeout)

    def cancel(self):
        pass


def _model():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2, 2), name="x")
        delta = T.placeholder(np.float32, (2, 2), name="delta")
        with T.device("/job:ps/task:0"):
            w = T.Variable(np.eye(2, dtype=np.float32), name="w")
            update = w.assign_add(delta)
        y = T.matmul(x, w) + T.reduce_sum(w)  # w read twice on the worker
        train = T.group(update, name="train")  # a worker NoOp waiting on the PS: a control edge across tasks
        init = T.global_variables_initializer()
    return g, x, delta, update.node, y, train, init


class TwoTasks:
    """A worker session compiling plans and a PS registering their remote partitions."""

    def __init__(self, graph):
        self.graph = graph
        self.worker = T.Session(graph, local_task=("worker", 0))
        self.tables = {WORKER: StepTable(WORKER), PS: StepTable(PS)}
        self.ps_state = SessionState()
        self.pool = ThreadPoolExecutor(4)
        self.step_id = 0

    def receive_from(self, task):
        return lambda step_id, key, timeout: Pull(self.tables[task], step_id, key, timeout)

    def compile(self, fetches, targets, feeds):
        plan = compile_plan(self.graph, fetches, targets, feeds, self.worker, allow_remote=True)
        (rp,) = plan.remote_partitions
        desc, arrays = describe(rp)
        header, tensors = wire.decode(wire.encode({"partition": desc}, arrays))  # as it crosses the wire
        ps = RegisteredPartition(header["partition"], tensors, state=self.ps_state, table=self.tables[PS],
                                 receive_from=self.receive_from, pool=self.pool, timeout=5.0)
        sources = {k.key: self.receive_from(sending_task(k)) for k in rp.sends}
        return plan, rp, ps, sources

    def run(self, compiled, feed_values=()):
        plan, _, ps, sources = compiled
        self.step_id += 1
        errors = []

        def run_ps():
            try:
                ps.run(self.step_id)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        thread = threading.Thread(target=run_ps)
        thread.start()
        out = run_partition(plan, self.worker, self.tables[WORKER], self.step_id, sources, 5.0,
                            [spec.convert(v) for spec, v in zip(plan.feeds, feed_values)], self.pool)
        thread.join(10)
        assert not errors and not thread.is_alive(), errors
        assert all(t.pending() == 0 for t in self.tables.values())
        return out


def test_the_ps_compiles_and_runs_what_the_partition_pass_shipped():
    g, x, delta, update, y, train, init = _model()
    tasks = TwoTasks(g)
    tasks.run(tasks.compile([], [init], []))
    assert set(tasks.ps_state.variables) == {"w"} and not tasks.worker.state.variables  # w lives on the PS only

    compiled = tasks.compile([y], [train], [x, delta])
    _, rp, ps, _ = compiled
    shipped = {sn.name: sn for sn in rp.subgraph}
    recvs = [sn for sn in rp.subgraph if sn.op == "Recv"]
    sends = [sn for sn in rp.subgraph if sn.op == "Send"]
    assert [sn.key.tensor_name for sn in recvs] == ["delta:0"]  # the fed value, once
    # w once whatever the number of readers, and one token for the worker's NoOp waiting on the update
    assert sorted(sn.key.tensor_name for sn in sends) == sorted(["w:0", f"^{update.name}"])
    assert shipped[update.name].inputs == ["w:0", "_recv/delta_0:0"]
    assert shipped["_token/" + update.name].control_inputs == [update.name]
    assert ps.plan.remote_partitions == [] and {st.node.op_type for st in ps.plan.steps} >= {"Send", "Recv"}

    xv = np.arange(4, dtype=np.float32).reshape(2, 2)
    eye = np.eye(2, dtype=np.float32)
    for k in range(3):  # one registration, several steps
        (out,) = tasks.run(compiled, [xv, np.ones((2, 2), np.float32)])
        # (y's read of w and the update are unordered within a step, as in TensorFlow)
        assert any(np.allclose(out, xv @ (eye + j) + (eye + j).sum()) for j in (k, k + 1))
        # the NoOp waited for the update's token: the step ended after it ran
        np.testing.assert_array_equal(tasks.ps_state.variables["w"], eye + k + 1)


def test_every_cross_task_transfer_waits_for_the_tasks_previous_send():
    g, x, delta, update, y, train, init = _model()
    _, rp, _, _ = TwoTasks(g).compile([y], [train], [x, delta])
    last_send = None
    for sn in rp.subgraph:
        if sn.op in ("Send", "Recv"):
            assert sn.control_inputs == ([] if last_send is None else [last_send])
            if sn.op == "Send":
                last_send = sn.name
