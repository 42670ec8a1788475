"""The partition pass on graphs with while_loops and conds whose nodes span tasks.

Variables live on a PS, loops and conds read them on the worker: each variable crosses tasks once
per step, before the loop (through the loop's Enter), and its gradient after the gradient loop
(through its Exit). Two tasks in one process, as in test_partitions.py; each case trains three
steps and must match a single-process session step for step.
"""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from trainer.distributed.partitions import run_partition
from trainer.errors import GraphError
from trainer.passes.fuse_loops import CONTROL_FLOW_OPS
from trainer.placement import PlacementError
from trainer.plan import DataflowPlan
from trainer.saver import graph_from_dict, graph_to_dict

from .test_partitions import TwoTasks

PS = "/job:ps/task:0"
BATCH, STEPS, UNITS = 4, 3, 2


def _variables():
    with T.device(PS):
        w = T.Variable(np.full((2, UNITS), 0.3, np.float32), name="w")
        u = T.Variable(np.full((UNITS, UNITS), -0.2, np.float32), name="u")
        emb = T.Variable(np.arange(10 * 2, dtype=np.float32).reshape(10, 2) / 20, name="emb")
    return w, u, emb


def _loop(body):
    h0 = T.zeros((BATCH, UNITS))
    return T.while_loop(lambda i, h: i < STEPS, body, [T.constant(0), h0])[1]


def _rnn_body(xs, w, u, *, nested=False, pinned=False, emb=None, ids=None):
    def body(i, h):
        x_t = T.gather(xs, i)
        if emb is not None:  # embedding_lookup colocates its Gather with the table: on the PS
            x_t = x_t + T.nn.embedding_lookup(emb, T.gather(ids, i))
        pre = T.matmul(x_t, w) + T.matmul(h, u)
        if pinned:
            with T.device(PS):
                pre = pre * 0.5
        if nested:
            pre = T.cond(i > 0, lambda: pre * 0.9, lambda: pre)
        return i + 1, T.tanh(pre)
    return body


def build(kind: str):
    """(graph, feeds, loss, train op, init) of a tiny RNN-like model of ``kind``."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (BATCH, STEPS, 2), name="x")
        ids = T.placeholder(np.int64, (STEPS, BATCH), name="ids")
        w, u, emb = _variables()
        xs = T.transpose(x, [1, 0, 2])
        feeds = [x]
        if kind == "cond":
            h = T.cond(T.reduce_sum(x) > 0, lambda: T.tanh(T.matmul(x[:, 0], w)), lambda: T.matmul(x[:, 1], w))
            h = T.matmul(h, u)
        elif kind == "dynamic_rnn":
            cell = T.nn.rnn_cell.BasicRNNCell(UNITS)
            with T.device(T.train.replica_device_setter(ps_tasks=1)), \
                    T.variable_scope("rnn", initializer=T.constant_initializer(0.1)):
                _, h = T.nn.dynamic_rnn(cell, x, dtype=np.float32)
            h = T.matmul(h, u)
        elif kind == "embedding":
            h = _loop(_rnn_body(xs, w, u, emb=emb, ids=ids))
            feeds = [x, ids]
        else:
            h = _loop(_rnn_body(xs, w, u, nested=kind == "nested", pinned=kind == "pinned"))
        loss = T.reduce_mean(T.square(h - 0.5))
        train = T.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = T.global_variables_initializer()
    return g, feeds, loss, train, init


def feed_values(feeds):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH, STEPS, 2)).astype(np.float32)
    ids = rng.integers(0, 10, size=(STEPS, BATCH))
    return [x, ids][:len(feeds)]


def single_process_losses(kind: str) -> list[float]:
    g, feeds, loss, train, init = build(kind)
    sess = T.Session(g, config=T.ConfigProto(allow_soft_placement=True))  # every node on this task
    sess.run(init)
    values = dict(zip(feeds, feed_values(feeds)))
    return [float(sess.run([loss, train], values)[0]) for _ in range(3)]


def train_on_two_tasks(kind: str, **worker_options):
    g, feeds, loss, train, init = build(kind)
    tasks = TwoTasks(g)
    for name, value in worker_options.items():
        setattr(tasks.worker, name, value)
    tasks.run(tasks.compile([], [init], []))
    compiled = tasks.compile([loss], [train], feeds)
    losses = [float(tasks.run(compiled, feed_values(feeds))[0]) for _ in range(3)]
    tasks.pool.shutdown()
    return tasks, compiled, losses


def shipped_ops(compiled) -> list[str]:
    return [sn.op for sn in compiled[1].subgraph]


@pytest.mark.parametrize("kind", ["nested", "cond", "dynamic_rnn", "embedding", "pinned"])
def test_loops_and_conds_reading_ps_variables_train_as_in_one_process(kind):
    tasks, compiled, losses = train_on_two_tasks(kind)
    np.testing.assert_allclose(losses, single_process_losses(kind), rtol=1e-5)
    assert losses[-1] < losses[0]
    ops = shipped_ops(compiled)
    # The PS keeps its variables and their updates; every loop and cond node stays on the worker,
    # so nothing crosses tasks per iteration.
    assert not set(ops) & CONTROL_FLOW_OPS, ops
    assert {"Variable", "ApplyGradientDescent"} <= set(ops)
    assert set(tasks.ps_state.variables) >= {"w", "u"} and not tasks.worker.state.variables


def test_each_variable_crosses_once_per_step_into_the_loop_and_its_gradient_once_out():
    _, compiled, _ = train_on_two_tasks("nested")
    rp = compiled[1]
    sent = [k.tensor_name for k in rp.sends if not k.tensor_name.startswith("^")]
    received = [k.tensor_name for k in rp.recvs if not k.tensor_name.startswith("^")]
    assert sorted(sent) == ["u:0", "w:0"]
    assert len(received) == 2 and all("while_grad/exit" in name for name in received), received


def test_unfused_loops_span_tasks_too():
    _, compiled, losses = train_on_two_tasks("plain", fuse_loops=False)
    assert isinstance(compiled[0], DataflowPlan) and compiled[0].remote_partitions
    np.testing.assert_allclose(losses, single_process_losses("plain"), rtol=1e-5)


def test_a_loop_with_a_colocated_gather_in_its_body_is_still_fused():
    _, compiled, losses = train_on_two_tasks("embedding")
    plan = compiled[0]
    assert any(s.node.op_type == "WhileLoop" for s in plan.steps)  # one LoopStep, on the worker
    np.testing.assert_allclose(losses, single_process_losses("embedding"), rtol=1e-5)


def test_a_loop_placed_on_the_ps_runs_there():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (BATCH, STEPS, 2), name="x")
        w, u, _ = _variables()
        with T.device(PS):
            h = _loop(_rnn_body(T.transpose(x, [1, 0, 2]), w, u, nested=True))
            loss = T.reduce_mean(T.square(h - 0.5))
            train = T.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = T.global_variables_initializer()
    tasks = TwoTasks(g)
    tasks.run(tasks.compile([], [init], []))
    compiled = tasks.compile([loss], [train], [x])
    (xv,) = feed_values([x])
    losses = [float(tasks.run(compiled, [xv])[0]) for _ in range(3)]
    tasks.pool.shutdown()
    assert {"Enter", "Exit", "NextIteration"} <= set(shipped_ops(compiled))  # the PS runs the loops
    np.testing.assert_allclose(losses, single_process_losses("nested"), rtol=1e-5)


def _nested_loops():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2, 2), name="x")
        with T.device(PS):
            w = T.Variable(np.full((2, 2), 0.5, np.float32), name="w")
            total = T.Variable(np.float32(0.0), name="total")

        def outer(i, h):
            inner = T.while_loop(lambda j, a: j < 2, lambda j, a: (j + 1, T.tanh(T.matmul(a, w))),
                                 [T.constant(0), h])[1]
            return i + 1, inner + x
        h = T.while_loop(lambda i, h: i < 3, outer, [T.constant(0), x])[1]
        with T.control_dependencies([total.assign_add(T.reduce_sum(h))]):  # an update after the loops
            out = T.identity(h)
        init = T.global_variables_initializer()
    return g, x, out, init


def test_nested_loops_read_a_ps_variable_entered_once_into_the_outer_loop():
    g, x, out, init = _nested_loops()
    tasks = TwoTasks(g)
    tasks.run(tasks.compile([], [init], []))
    compiled = tasks.compile([out], [], [x])
    xv = np.arange(4, dtype=np.float32).reshape(2, 2) / 4
    (got,) = tasks.run(compiled, [xv])
    tasks.pool.shutdown()
    assert [k.tensor_name for k in compiled[1].sends] == ["w:0", "^total/AssignAdd"]  # w once, and a token

    g1, x1, out1, init1 = _nested_loops()
    sess = T.Session(g1, config=T.ConfigProto(allow_soft_placement=True))
    sess.run(init1)
    np.testing.assert_allclose(got, sess.run(out1, {x1: xv}), rtol=1e-6)
    np.testing.assert_allclose(tasks.ps_state.variables["total"], got.sum(), rtol=1e-6)


def test_assigning_a_ps_variable_inside_the_loop_names_node_loop_and_tasks():
    g = T.Graph()
    with g.as_default():
        w, u, _ = _variables()
        with T.device(PS):
            count = T.Variable(0.0, name="count")

        def body(i, h):
            with T.control_dependencies([count.assign_add(1.0)]):
                return i + 1, T.tanh(T.matmul(h, u))
        h = _loop(body)
    tasks = TwoTasks(g)
    with pytest.raises(PlacementError) as e:
        tasks.compile([h], [], [])
    message = str(e.value)
    for part in ("'count/AssignAdd'", "while_loop 'while'", "/job:ps/task:0", "/job:worker/task:0", "Colocate"):
        assert part in message, message


def test_a_gradient_loop_on_another_task_than_its_forward_loop_is_refused():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (BATCH, STEPS, 2), name="x")
        w, u, _ = _variables()
        with T.device(PS):  # the forward loop on the PS, its gradient (built below) on the worker
            h = _loop(_rnn_body(T.transpose(x, [1, 0, 2]), w, u))
        train = T.train.GradientDescentOptimizer(0.5).minimize(T.reduce_sum(h))
    with pytest.raises(PlacementError, match="StackPop.*same device scope"):
        TwoTasks(g).compile([], [train], [x])


def test_a_control_edge_from_the_ps_into_a_graph_with_control_flow_waits_for_its_token():
    g = T.Graph()
    with g.as_default():
        delta = T.placeholder(np.float32, (), name="delta")
        with T.device(PS):
            v = T.Variable(0.0, name="v")
            bump = v.assign_add(delta)
        with T.control_dependencies([bump]):
            after = T.cond(delta > 0, lambda: T.constant(1.0), lambda: T.constant(-1.0))
        init = T.global_variables_initializer()
    tasks = TwoTasks(g)
    tasks.run(tasks.compile([], [init], []))
    compiled = tasks.compile([after], [], [delta])
    assert [float(tasks.run(compiled, [d])[0]) for d in (2.0, -0.5)] == [1.0, -1.0]
    assert float(tasks.ps_state.variables["v"]) == 1.5  # each step's update ran before the cond
    tasks.pool.shutdown()


def _conditional_updates():
    """A top-level cond updating PS variables in one branch: gradients applied only when finite,
    and an assign_add only for positive inputs."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2,), name="x")
        with T.device(PS):
            w = T.Variable(np.ones(2, np.float32), name="w")
            total = T.Variable(np.float32(0.0), name="total")
        loss = T.reduce_sum(T.square(w * x - 1.0))
        opt = T.train.GradientDescentOptimizer(0.1)
        grads = opt.compute_gradients(loss, [w])

        def apply():
            with T.control_dependencies([opt.apply_gradients(grads)]):
                return T.constant(1.0)
        applied = T.cond(T.reduce_all(T.is_finite(grads[0][0])), apply, lambda: T.constant(0.0))
        summed = T.cond(T.reduce_sum(x) > 0, lambda: total.assign_add(T.reduce_sum(x)), lambda: T.identity(total))
        init = T.global_variables_initializer()
    return g, x, [loss, applied, summed], init


XS = [[1, 2], [np.nan, 1], [-1, -2], [3, 0]]


def test_a_cond_updating_ps_variables_in_one_branch_sends_dead_values_for_the_other():
    g, x, fetches, init = _conditional_updates()
    tasks = TwoTasks(g)
    tasks.run(tasks.compile([], [init], []))
    compiled = tasks.compile(fetches, [], [x])
    shipped = compiled[1].subgraph
    # The updates stay with their variables; what the branches exchange with them may be dead.
    assert {"AssignAdd", "ApplyGradientDescent"} <= {sn.op for sn in shipped}
    assert any(sn.op == "Recv" and sn.may_be_dead for sn in shipped)
    got = [[float(v) for v in tasks.run(compiled, [np.asarray(xv, np.float32)])] for xv in XS]
    tasks.pool.shutdown()

    g1, x1, fetches1, init1 = _conditional_updates()
    sess = T.Session(g1, config=T.ConfigProto(allow_soft_placement=True))
    sess.run(init1)
    want = [[float(v) for v in sess.run(fetches1, {x1: np.asarray(xv, np.float32)})] for xv in XS]
    np.testing.assert_array_equal(got, want)
    assert [row[1] for row in got] == [1.0, 0.0, 1.0, 1.0]  # the NaN gradient was not applied
    assert [row[2] for row in got] == [3.0, 3.0, 3.0, 6.0]
    np.testing.assert_array_equal(tasks.ps_state.variables["w"], sess.run(g1.get_tensor_by_name("w:0")))


def test_an_imported_graph_sending_from_inside_a_loop_frame_fails_at_once():
    # An imported graph has no loop records for passes/frames.py to check: the executor refuses
    # the first Send it would make inside a frame instead of sending one value per iteration.
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2, 2), name="x")

        def body(i, h):
            with T.device(PS):
                h = T.tanh(h)  # stateless and pinned: confined to the worker in the built graph
            return i + 1, h
        h = _loop(lambda i, h: body(i, h + x[:1]))
    imported = graph_from_dict(*graph_to_dict(g))
    tasks = TwoTasks(imported)
    plan, _, _, _ = tasks.compile([imported.get_tensor_by_name(h.name)], [], [imported.get_tensor_by_name("x:0")])
    with pytest.raises(GraphError, match="from inside while_loop frame 'while'"):
        run_partition(plan, tasks.worker, tasks.tables["/job:worker/task:0"], 1, {}, 1.0,
                      [np.ones((2, 2), np.float32)], tasks.pool)
    tasks.pool.shutdown()
