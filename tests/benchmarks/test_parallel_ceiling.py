"""benchmarks/parallel_ceiling.py's measurements run on a small model: each gives a positive time,
the two-process one from real child processes, and the threads run the model concurrently."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from benchmarks.edge_vs_onnxruntime import flow_bytes
from benchmarks.parallel_ceiling import blas_spin_ms, median_ms, two_processes_ms, two_threads_ms
from edge_runtime.model import load


def _mlp(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                              "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path, feeds_path = tmp_path / "mlp.flow", tmp_path / "feeds.npz"
    path.write_bytes(flow_bytes(model))
    feeds = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    np.savez(feeds_path, **feeds)
    return str(path), str(feeds_path), feeds


def test_two_threads_run_the_model_at_the_same_time(tmp_path) -> None:
    path, _, feeds = _mlp(tmp_path)
    model = load(path)
    inside, most = [0], [0]
    lock = threading.Lock()

    def run():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            model.run(feeds)
            threading.Event().wait(0.002)  # long enough for the other thread to come in
        finally:
            with lock:
                inside[0] -= 1

    assert two_threads_ms(run, runs=5) > 0
    assert most[0] == 2
    assert median_ms(run, runs=3, warmup=1) > 0


@pytest.mark.slow
def test_two_processes_each_time_the_model(tmp_path) -> None:
    path, feeds_path, _ = _mlp(tmp_path)
    assert two_processes_ms(path, feeds_path, runs=5) > 0


def test_the_spin_probe_counts_other_threads_cpu() -> None:
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=busy)
    try:
        spent = blas_spin_ms(spinner.start)
    finally:
        stop.set()
        spinner.join(timeout=10)
    if spent is None:
        pytest.skip("no /proc/<pid>/task here")
    assert spent > 0
