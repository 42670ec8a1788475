"""One loaded model run from many threads at once: every result as a single-threaded run on a fresh
load gives it, across mixed batch sizes (0 and 1 included), spatial sizes, control flow (If, Loop,
Scan), recurrent ops and the fused convolution paths; models loaded from several threads at once
in a fresh process; and the BLAS thread count that concurrent interpreters put back."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edge_runtime
from benchmarks.edge_vs_onnxruntime import flow_bytes
from benchmarks.models import lenet, lstm, mobilenet_v2
from edge_runtime import Interpreter
from edge_runtime import threads as threads_module

ROOT = Path(__file__).resolve().parents[2]
THREADS = 8
OPSET = [helper.make_opsetid("", 17)]


def _value(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _control_flow() -> onnx.ModelProto:
    """If (on the sign of sum(x)) feeding a Loop (trip count an input; carries and scans a value),
    and a Scan (running sum over the batch axis)."""
    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((4, 4)) * 0.5).astype(np.float32), "w")
    then_branch = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [],
                                    [_value("t", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                                    [_value("e", TensorProto.FLOAT, None)])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("MatMul", ["acc_in", "w"], ["m"]),
            helper.make_node("Tanh", ["m"], ["t"]),
            helper.make_node("Mul", ["acc_in", "half"], ["h"]),
            helper.make_node("Add", ["h", "t"], ["acc_out"]),
            helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
        ],
        "loop_body",
        [_value("i", TensorProto.INT64, []), _value("cond_in", TensorProto.BOOL, []),
         _value("acc_in", TensorProto.FLOAT, None)],
        [_value("cond_out", TensorProto.BOOL, []), _value("acc_out", TensorProto.FLOAT, None),
         _value("s", TensorProto.FLOAT, None)],
    )
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["state_in", "row"], ["state_out"]),
         helper.make_node("Identity", ["state_out"], ["ys"])],
        "scan_body",
        [_value("state_in", TensorProto.FLOAT, None), _value("row", TensorProto.FLOAT, None)],
        [_value("state_out", TensorProto.FLOAT, None), _value("ys", TensorProto.FLOAT, None)],
    )
    constants = [w, numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(0.5), "half"),
                 numpy_helper.from_array(np.array(True), "true"),
                 numpy_helper.from_array(np.zeros(4, np.float32), "zeros")]
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
            helper.make_node("Greater", ["sum", "zero"], ["positive"]),
            helper.make_node("If", ["positive"], ["branch"], then_branch=then_branch, else_branch=else_branch),
            helper.make_node("Loop", ["trips", "true", "branch"], ["acc", "sums"], body=body),
            helper.make_node("Scan", ["zeros", "x"], ["total", "running"], body=scan_body, num_scan_inputs=1),
        ],
        "control_flow",
        [_value("x", TensorProto.FLOAT, ["N", 4]), _value("trips", TensorProto.INT64, [])],
        [_value("acc", TensorProto.FLOAT, ["N", 4]), _value("sums", TensorProto.FLOAT, ["T"]),
         _value("total", TensorProto.FLOAT, [4]), _value("running", TensorProto.FLOAT, ["N", 4])],
        constants,
    )
    return helper.make_model(graph, opset_imports=OPSET)


def _recurrent() -> onnx.ModelProto:
    """A bidirectional GRU and a reverse LSTM with per-sequence lengths, and an RNN."""
    rng = np.random.default_rng(1)
    hidden, size = 5, 3

    def weight(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    graph = helper.make_graph(
        [
            helper.make_node("GRU", ["x", "gw", "gr", "gb", "lens"], ["gy", "gh"], hidden_size=hidden,
                             direction="bidirectional", linear_before_reset=1),
            helper.make_node("RNN", ["x", "rw", "rr", "rb"], ["ry", "rh"], hidden_size=hidden),
            helper.make_node("LSTM", ["x", "lw", "lr", "lb", "lens"], ["ly", "lh", "lc"], hidden_size=hidden,
                             direction="reverse"),
        ],
        "recurrent",
        [_value("x", TensorProto.FLOAT, ["S", "N", size]), _value("lens", TensorProto.INT32, ["N"])],
        [_value(n, TensorProto.FLOAT, None) for n in ("gy", "gh", "ry", "rh", "ly", "lh", "lc")],
        [weight("gw", 2, 3 * hidden, size), weight("gr", 2, 3 * hidden, hidden), weight("gb", 2, 6 * hidden),
         weight("rw", 1, hidden, size), weight("rr", 1, hidden, hidden), weight("rb", 1, 2 * hidden),
         weight("lw", 1, 4 * hidden, size), weight("lr", 1, 4 * hidden, hidden), weight("lb", 1, 8 * hidden)],
    )
    return helper.make_model(graph, opset_imports=OPSET)


def _spatial_convs() -> onnx.ModelProto:
    """Convolutions (full, pointwise, strided depthwise) and a ceil-mode max pool over an image of
    any batch, height and width: the window and geometry caches see many shapes."""
    rng = np.random.default_rng(2)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"]),
            helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
            helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], group=16),
            helper.make_node("Relu", ["c3"], ["r3"]),
            helper.make_node("MaxPool", ["r3"], ["p"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
            helper.make_node("GlobalAveragePool", ["p"], ["g"]),
            helper.make_node("Flatten", ["g"], ["y"]),
        ],
        "spatial_convs",
        [_value("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [_value("y", TensorProto.FLOAT, ["N", 16])],
        [weight("w1", 8, 3, 3, 3), weight("b1", 8), weight("w2", 16, 8, 1, 1), weight("b2", 16),
         weight("w3", 16, 1, 3, 3), weight("b3", 16)],
    )
    return helper.make_model(graph, opset_imports=OPSET)


BATCHES = (0, 1, 2, 3, 5)


def _feeds(name: str, model: onnx.ModelProto, count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    feeds = []
    for i in range(count):
        batch = BATCHES[i % len(BATCHES)]
        if name == "control_flow":
            feeds.append({"x": rng.standard_normal((batch, 4)).astype(np.float32),
                          "trips": np.array(i % 4, np.int64)})
        elif name == "recurrent":
            steps = 1 + i % 4
            feeds.append({"x": rng.standard_normal((steps, batch, 3)).astype(np.float32),
                          "lens": rng.integers(1, steps + 1, batch).astype(np.int32)})
        elif name == "spatial_convs":
            height, width = ((8, 8), (11, 7), (5, 9))[i % 3]
            feeds.append({"x": rng.standard_normal((batch, 3, height, width)).astype(np.float32)})
        else:  # a benchmark model: its symbolic dim is the batch
            feeds.append({
                vi.name: rng.standard_normal([d.dim_value if d.HasField("dim_value") else batch
                                              for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
                for vi in model.graph.input
            })
    return feeds


MODELS = {
    "control_flow": _control_flow,
    "recurrent": _recurrent,
    "spatial_convs": _spatial_convs,
    "lenet_bn": lambda: lenet(),
    "mobilenet_v2": lambda: mobilenet_v2(image=32, width_mult=0.25),
    "lstm": lambda: lstm(seq=4, input_size=8, hidden=8),
}


def _assert_same(expected: dict, got: dict, where: str) -> None:
    assert set(expected) == set(got), where
    for key, want in expected.items():
        assert want.shape == got[key].shape, f"{where}: {key}"
        # not bit for bit: BLAS may split a product differently while other threads hold its pool
        np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-6, err_msg=f"{where}: {key}")


@pytest.mark.parametrize("optimized", [False, True], ids=["imported", "optimized"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_concurrent_runs_match_single_threaded_fresh_loads(name: str, optimized: bool) -> None:
    model = MODELS[name]()
    data = flow_bytes(model, optimized=optimized)
    feeds = _feeds(name, model, 10)
    expected = [edge_runtime.load(data).run(f) for f in feeds]  # one fresh load per call: no cache carried over
    shared = edge_runtime.load(data)
    for i, f in enumerate(feeds):  # alternating shapes, one thread
        _assert_same(expected[i], shared.run(f), f"sequential call {i}")
    order = list(range(len(feeds))) * 4
    random.Random(0).shuffle(order)
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda i: shared.run(feeds[i]), order, timeout=60))
    for i, got in zip(order, results):
        _assert_same(expected[i], got, f"threaded call on feeds {i}")


def test_separate_interpreters_on_one_model_run_concurrently() -> None:
    model = _control_flow()
    shared = edge_runtime.load(flow_bytes(model))
    feeds = _feeds("control_flow", model, 8)
    expected = [shared.run(f) for f in feeds]

    def run(i: int) -> dict[str, np.ndarray]:
        it = Interpreter(model=shared)
        for spec in it.get_input_details():
            it.resize_tensor_input(spec["index"], feeds[i][spec["name"]].shape)
        it.allocate_tensors()
        for spec in it.get_input_details():
            it.set_tensor(spec["index"], feeds[i][spec["name"]])
        it.invoke()
        return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, list(range(len(feeds))) * 3, timeout=60))
    for i, got in enumerate(results):
        _assert_same(expected[i % len(feeds)], got, f"interpreter {i}")


LOAD_IN_THREADS = """
import threading
from edge_runtime import load
from exporter import flow_writer
from tests.edge_runtime.flow_models import mlp
data = flow_writer.to_bytes(mlp())
errors = []
def go():
    try:
        load(data)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=go) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
assert not errors
"""


def test_models_loaded_from_several_threads_in_a_fresh_process() -> None:
    """The kernel families are imported on the first load: a second thread loading meanwhile once
    found the registry half-filled ("op 'MatMul' has no edge runtime kernel")."""
    done = subprocess.run([sys.executable, "-c", LOAD_IN_THREADS], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


class _FakeBlas:
    """A BLAS thread-pool controller that only records its count (threadpoolctl's interface)."""

    def __init__(self, count: int):
        self.count = count

    def get_num_threads(self) -> int:
        return self.count

    def set_num_threads(self, count: int) -> None:
        self.count = count


def test_overlapping_calls_put_back_the_thread_count_found_before_the_first(monkeypatch) -> None:
    """Two interpreters at num_threads=1 whose calls overlap: the second began at the first's count
    (1) and ended last, and once left the process at 1 thread instead of its 4."""
    blas = _FakeBlas(4)
    monkeypatch.setattr(threads_module, "_blas_controllers", lambda: (blas,))
    first, second = threads_module.BlasThreads(1), threads_module.BlasThreads(1)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def run_second() -> None:
        first_in.wait(10)
        with second.applied():
            second_in.set()
            first_out.wait(10)

    thread = threading.Thread(target=run_second)
    thread.start()
    with first.applied():
        first_in.set()
        second_in.wait(10)
        assert blas.count == 1
    first_out.set()
    thread.join(10)
    assert blas.count == 4
