"""Queues and queue runners, TensorBoard event files, devices, placement and Send/Recv partitions."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import trainer as T
from tests.trainer.plan_compiles import count_compiles
from trainer.placement import PlacementError


def test_fifo_queue_enqueue_dequeue_close():
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(10, [np.float32, np.int64], shapes=[(2,), ()])
        x = T.placeholder(np.float32, (2,))
        y = T.placeholder(np.int64, ())
        enq = q.enqueue([x, y])
        batch_x, batch_y = q.dequeue_many(2)
        size = q.size()
        close = q.close()
    s = T.Session(g)
    for i in range(3):
        s.run(enq, {x: np.full(2, i, np.float32), y: np.int64(i)})
    assert s.run(size) == 3
    bx, by = s.run([batch_x, batch_y])
    assert bx.shape == (2, 2) and list(by) == [0, 1]
    s.run(close)
    with pytest.raises(T.OutOfRangeError):
        s.run([batch_x, batch_y])  # one element left, two needed, queue closed
    assert batch_x.shape == (2, 2)  # dequeue_many(2): a static batch dimension, as in TensorFlow


def test_queue_runner_feeds_training_concurrently():
    g = T.Graph()
    with g.as_default():
        q = T.RandomShuffleQueue(50, 5, [np.float32], shapes=[(3,)], seed=1)
        source = iter(np.arange(300, dtype=np.float32).reshape(100, 3))
        row = T.placeholder(np.float32, (3,))
        runner = T.QueueRunner(q, [q.enqueue([row])], feed_fn=lambda: {row: next(source)})
        batch = q.dequeue_many(10)
        total = T.reduce_sum(batch)
    s = T.Session(g)
    coord = T.start_queue_runners(s)
    seen = 0.0
    batches = 0
    try:
        while True:
            seen += s.run(total)
            batches += 1
    except T.OutOfRangeError:
        pass
    coord.join()
    assert batches == 10 and seen == np.arange(300).sum()
    assert runner.errors == []


def test_summaries_are_readable_by_tensorboard(tmp_path):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None,))
        T.summary.scalar("loss", T.reduce_mean(x))
        T.summary.histogram("values", x)
        merged = T.summary.merge_all()
    s = T.Session(g)
    with T.summary.FileWriter(str(tmp_path)) as w:
        for step in range(3):
            w.add_summary(s.run(merged, {x: np.arange(4, dtype=np.float32) + step}), step)
        w.add_scalar("lr", 0.5, 7)
    acc = ea.EventAccumulator(str(tmp_path), size_guidance={ea.HISTOGRAMS: 0, ea.SCALARS: 0})
    acc.Reload()
    assert [e.value for e in acc.Scalars("loss")] == [1.5, 2.5, 3.5]
    assert [e.step for e in acc.Scalars("loss")] == [0, 1, 2]
    assert acc.Scalars("lr")[0].value == 0.5
    hist = acc.Histograms("values")[2].histogram_value
    assert hist.num == 4 and hist.min == 2.0 and hist.max == 5.0


def test_progress_bar_writes_rate(capsys):
    import io

    out = io.StringIO()
    bar = T.summary.ProgressBar(10, stream=out, min_interval=0)
    for i in range(1, 11):
        bar.update(i, loss=1.0 / i)
    assert "10/10" in out.getvalue() and "steps/s" in out.getvalue() and "loss=0.1" in out.getvalue()


def _two_device_graph():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 4), name="x")
        with T.device("CPU:0"):
            w0 = T.Variable(np.eye(4, dtype=np.float32), name="w0")
            h = T.nn.relu(T.matmul(x, w0))
        with T.device("CPU:1"):
            w1 = T.Variable(np.ones((4, 2), np.float32), name="w1")
            y = T.matmul(h, w1)
        loss = T.reduce_sum(y)
        train = T.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = T.global_variables_initializer()
    return g, x, y, loss, train, init, w1


def test_partitioned_across_two_cpu_devices_matches_single_device(monkeypatch):
    g, x, y, loss, train, init, w1 = _two_device_graph()
    s = T.Session(g, num_cpu_devices=2)
    s.run(init)
    feed = {x: np.arange(8, dtype=np.float32).reshape(2, 4)}
    compiles = count_compiles(monkeypatch)
    out = s.run(y, feed)
    plan = compiles[-1].plan
    assert {d for d, _ in plan.partitions} == {"CPU:0", "CPU:1"}
    kinds = [st.node.op_type for _, steps in plan.partitions for st in steps]
    assert "Send" in kinds and "Recv" in kinds
    np.testing.assert_allclose(out, np.arange(8, dtype=np.float32).reshape(2, 4) @ np.ones((4, 2)))
    s.run(train, feed)
    # The update of w1 ran where w1 lives (colocation) and changed it.
    assert not np.allclose(s.run(w1), 1.0)
    placed = s.placer.place(g.nodes)
    upd = next(n for n in g.nodes if n.op_type == "ApplyGradientDescent" and n.inputs[0].node.name == "w1")
    assert placed[upd] == "CPU:1"


def test_concurrent_partitioned_runs():
    g, x, y, loss, train, init, w1 = _two_device_graph()
    s = T.Session(g, num_cpu_devices=2)
    s.run(init)
    feed = {x: np.ones((3, 4), np.float32)}
    want = s.run(y, feed)
    errors = []

    def work():
        try:
            for _ in range(50):
                np.testing.assert_allclose(s.run(y, feed), want)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_unknown_device_constraint_is_an_error():
    g = T.Graph()
    with g.as_default():
        with T.device("CPU:3"):
            c = T.constant(1.0) + 1.0
    with pytest.raises(PlacementError, match="CPU:3.*only"):
        T.Session(g).run(c)
    with pytest.raises(ValueError, match="unknown device"):
        T.device("TPU:0").__enter__()


def test_cost_model_refined_by_measurements():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (64, 64))
        y = T.matmul(x, x)
    s = T.Session(g)
    before = s.cost_model.estimate(y.node)
    s.run(y, {x: np.ones((64, 64), np.float32)}, trace=True)
    assert y.node.name in s.cost_model.measured
    assert s.cost_model.estimate(y.node) != before


@pytest.mark.gpu
def test_gpu_device_runs_cupy():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 8))
        with T.device("GPU:0"):
            w = T.Variable(np.ones((8, 4), np.float32))
            y = T.matmul(x, w)
        loss = T.reduce_sum(y)
        train = T.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    out = s.run(y, {x: np.ones((2, 8), np.float32)})
    assert isinstance(out, np.ndarray) and np.allclose(out, 8.0)
    s.run(train, {x: np.ones((2, 8), np.float32)})
    assert np.allclose(s.run(w), 1.0 - 0.02)
