"""A two-step model pipeline (Triton's ensemble scheduling) against calling its two models in turn
from the client.

A real ``flowstack serve`` process serves ``normalize`` (x * scale + shift, [n, 256]), the MLP of
``serving_load.py`` (256-1024-1024-10) and ``pipeline``, an ensemble running the one then the
other. Client threads on keep-alive connections send the same row: (a) to the ensemble, one
request; (b) to ``normalize``, then its answer to ``mlp``: two round trips, the intermediate
tensor written, sent, parsed twice more. Requests/s and p50 per cell, the ratio (a)/(b), and the
server's CPU time per pipeline answered (all threads, from /proc).

    python benchmarks/serving_pipeline.py                     # concurrency 1 and 16, 3 s each
    python benchmarks/serving_pipeline.py --duration 2 --concurrency 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving_load import IN_DIM, cpu_seconds, start_ours, write_repository  # noqa: E402

PIPELINE = {
    "platform": "ensemble",
    "ensemble_scheduling": {"step": [
        {"model_name": "normalize", "input_map": {"raw": "RAW"}, "output_map": {"x": "X"}},
        {"model_name": "mlp", "input_map": {"x": "X"}, "output_map": {"probs": "PROBS"}},
    ]},
}


def write_models(root: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    from exporter.onnx_import import convert_onnx

    write_repository(root, {"max_batch_size": 32}, 1024)
    rng = np.random.default_rng(3)
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Mul", ["raw", "scale"], ["scaled"]), helper.make_node("Add", ["scaled", "shift"], ["x"])],
        "normalize", [info("raw", TensorProto.FLOAT, ["n", IN_DIM])], [info("x", TensorProto.FLOAT, ["n", IN_DIM])],
        [numpy_helper.from_array(rng.uniform(0.5, 2, IN_DIM).astype(np.float32), "scale"),
         numpy_helper.from_array(rng.standard_normal(IN_DIM).astype(np.float32), "shift")],
    )
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), root / "normalize" / "1" / "model.flow")
    (root / "normalize" / "config.json").write_text(json.dumps({"max_batch_size": 32}))
    (root / "pipeline").mkdir()
    (root / "pipeline" / "config.json").write_text(json.dumps(PIPELINE))
    return root


def body(name: str, values: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": [1, IN_DIM], "data": values}]}).encode()


def client(port: int, pipelined: bool, row: list[float], until: float, warm_until: float, latencies: list, errors: list) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(model: str, payload: bytes) -> dict:
        connection.request("POST", f"/v2/models/{model}/infer", payload, {"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(data[:300])
        return json.loads(data)

    while (start := time.perf_counter()) < until:
        try:
            if pipelined:
                probs = post("pipeline", body("RAW", row))["outputs"][0]["data"]
            else:
                x = post("normalize", body("raw", row))["outputs"][0]["data"]
                probs = post("mlp", body("x", x))["outputs"][0]["data"]
            ok = len(probs) == 10
        except Exception:  # counted, the cell goes on
            ok = False
        if start >= warm_until:
            latencies.append(time.perf_counter() - start)
            if not ok:
                errors.append(1)
    connection.close()


def measure(port: int, pid: int, pipelined: bool, concurrency: int, duration: float, warmup: float) -> dict:
    row = [round(float(v), 6) for v in np.random.default_rng(1).standard_normal(IN_DIM)]
    latencies: list[float] = []
    errors: list[int] = []
    warm_until = time.perf_counter() + warmup
    until = warm_until + duration
    threads = [threading.Thread(target=client, args=(port, pipelined, row, until, warm_until, latencies, errors))
               for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, warm_until - time.perf_counter()))
    cpu_start = cpu_seconds(pid)
    for thread in threads:
        thread.join(duration + 60)
    cpu_us = (cpu_seconds(pid) - cpu_start) / max(len(latencies), 1) * 1e6
    ms = np.array(latencies) * 1000 if latencies else np.array([float("nan")])
    return {"rps": len(latencies) / duration, "p50": float(np.percentile(ms, 50)), "errors": len(errors), "cpu_us": cpu_us}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per cell (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds run before measuring (default 0.5)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        process, http_port, _ = start_ours(write_models(Path(tmp) / "models"))
        try:
            print("conc | pipeline req/s  p50 ms  cpu us | in turn req/s  p50 ms  cpu us | pipeline/in turn")
            for concurrency in args.concurrency:
                a = measure(http_port, process.pid, True, concurrency, args.duration, args.warmup)
                b = measure(http_port, process.pid, False, concurrency, args.duration, args.warmup)
                print(f"{concurrency:4d} | {a['rps']:14.0f} {a['p50']:7.2f} {a['cpu_us']:7.0f} | "
                      f"{b['rps']:13.0f} {b['p50']:7.2f} {b['cpu_us']:7.0f} | {a['rps'] / b['rps']:16.2f}"
                      + (f"  errors {a['errors']}/{b['errors']}" if a["errors"] or b["errors"] else ""))
        finally:
            process.terminate()
            process.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
