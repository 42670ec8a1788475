"""Memory soak for ``flowstack serve``: versions loaded, replaced and unloaded under requests.

A real server process polls a repository in which this process replaces the one version of a
model (about ``--model-mib`` of weights) again and again, and every ``--unload-every`` steps
removes the model altogether and adds it back, while ``--clients`` threads send requests. The
server's resident memory is sampled throughout (from /proc). Reported: its resident memory after
the first load, the peak, and after the last unload, against the bounds the serving issue set
(after the last unload within 1.5x of the first load's; at most 2 model sizes above the first
load's at any time), and the requests answered. A server that keeps each unloaded version until
Python's cyclic collector runs grows by a model per reload (55 MB models: 121 -> 812 MiB over ten
swaps).

    python benchmarks/serving_soak.py                      # 3 minutes
    python benchmarks/serving_soak.py --duration 60 --model-mib 16
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IN_DIM = 1024
MODEL = "wide"


def write_model(path: Path, model_mib: int, seed: int) -> Path:
    """A MatMul of ``IN_DIM`` inputs onto enough outputs for ``model_mib`` of float32 weights."""
    from onnx import TensorProto, helper, numpy_helper

    sys.path.insert(0, str(ROOT))
    from exporter.onnx_import import convert_onnx

    out_dim = max(1, (model_mib << 20) // (4 * IN_DIM))
    w = np.random.default_rng(seed).standard_normal((IN_DIM, out_dim)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", IN_DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", out_dim])],
        [numpy_helper.from_array(w, "w")],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def drain_and_close(stream) -> None:
    """Read the server's log to its end (a full pipe would stall the server), then close it."""
    with stream:
        for _ in stream:
            pass


def start_server(repo: Path, poll_interval: float) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(repo), "--http-port", "0",
         "--grpc-port", "-1", "--poll-interval", str(poll_interval)],
        cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    for line in process.stderr:
        if time.monotonic() > deadline:
            break
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "serving":
            threading.Thread(target=drain_and_close, args=(process.stderr,), daemon=True).start()
            return process, event["http_port"]
    process.kill()
    raise RuntimeError("server did not start")


class Repository:
    """The repository this process edits as an operator would: versions renamed in atomically."""

    def __init__(self, root: Path, sources: list[Path]):
        self.root, self.sources = root, sources
        self.version = 0

    def place(self, version: int) -> None:
        staging = self.root / f".staging-{version}"
        staging.mkdir(parents=True)
        shutil.copyfile(self.sources[version % len(self.sources)], staging / "model.flow")
        (self.root / MODEL).mkdir(exist_ok=True)
        staging.replace(self.root / MODEL / str(version))

    def replace(self) -> int:
        """A new version in, the old one out; returns the new version."""
        self.version += 1
        self.place(self.version)
        for old in (self.root / MODEL).iterdir():
            if old.name != str(self.version):
                shutil.rmtree(old)
        return self.version

    def remove_model(self) -> None:
        aside = self.root / ".removed"
        (self.root / MODEL).replace(aside)
        shutil.rmtree(aside)


def served_versions(client, timeout: float = 60.0) -> list[str] | None:
    response = client.get(f"/v2/models/{MODEL}")
    return response.json()["versions"] if response.status_code == 200 else None


def wait_until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not pick up a repository change in time")
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of reloads (default 180)")
    parser.add_argument("--model-mib", type=int, default=32, help="weights per version, MiB (default 32)")
    parser.add_argument("--clients", type=int, default=4, help="threads sending requests throughout (default 4)")
    parser.add_argument("--unload-every", type=int, default=5, help="remove the model and add it back every N steps (default 5)")
    parser.add_argument("--poll-interval", type=float, default=0.1, help="the server's --poll-interval (default 0.1)")
    args = parser.parse_args()

    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sources = [write_model(work / "src" / str(seed) / "model.flow", args.model_mib, seed) for seed in (0, 1)]
        model_bytes = sources[0].stat().st_size
        repo = Repository(work / "models", sources)
        repo.root.mkdir()
        repo.replace()
        process, port = start_server(repo.root, args.poll_interval)
        url = f"http://127.0.0.1:{port}"
        counts = {"ok": 0, "not_served": 0, "failed": 0}
        failures: list[str] = []
        stop = threading.Event()
        peak = [0]
        body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, IN_DIM],
                                       "data": [0.5] * IN_DIM}]}).encode()

        def send() -> None:
            with httpx.Client(base_url=url, timeout=60) as client:
                while not stop.is_set():
                    try:
                        response = client.post(f"/v2/models/{MODEL}/infer", content=body)
                    except httpx.HTTPError as exc:
                        counts["failed"] += 1
                        failures.append(f"{type(exc).__name__}: {exc}")
                        continue
                    if response.status_code == 200:
                        counts["ok"] += 1
                    elif response.status_code == 404:  # between an unload and the model's return
                        counts["not_served"] += 1
                    else:
                        counts["failed"] += 1
                        failures.append(f"{response.status_code}: {response.text[:200]}")

        def sample() -> None:
            while not stop.wait(0.02):
                try:
                    peak[0] = max(peak[0], rss_bytes(process.pid))
                except OSError:
                    return

        try:
            with httpx.Client(base_url=url, timeout=60) as control:
                wait_until(lambda: served_versions(control) == ["1"])
                threads = [threading.Thread(target=send, daemon=True) for _ in range(args.clients)]
                for thread in threads:
                    thread.start()
                time.sleep(1.0)
                first = rss_bytes(process.pid)
                peak[0] = first
                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                steps = reloads = unloads = 0
                end = time.monotonic() + args.duration
                while time.monotonic() < end:
                    steps += 1
                    if steps % args.unload_every == 0:
                        repo.remove_model()
                        wait_until(lambda: served_versions(control) is None)
                        unloads += 1
                    version = str(repo.replace())
                    wait_until(lambda: served_versions(control) == [version])
                    reloads += 1
                repo.remove_model()
                wait_until(lambda: served_versions(control) is None)
                unloads += 1
                time.sleep(1.0)  # the last version's requests drain; its pages are trimmed
                last = rss_bytes(process.pid)
                stop.set()
                for thread in threads:
                    thread.join(60)
                sampler.join(5)
        finally:
            stop.set()
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    mib = 1 << 20
    within_last = last <= 1.5 * first
    within_peak = peak[0] <= first + 2 * model_bytes
    print(f"model: {model_bytes / mib:.1f} MiB of weights per version; {args.duration:.0f} s, {reloads} loads "
          f"({unloads} whole-model unloads), {args.clients} clients, poll every {args.poll_interval} s")
    print(f"server resident memory: first load {first / mib:.0f} MiB | peak {peak[0] / mib:.0f} MiB "
          f"(+{(peak[0] - first) / model_bytes:.2f} models) | after the last unload {last / mib:.0f} MiB "
          f"({last / first:.2f}x the first load's)")
    print(f"bounds: after the last unload <= 1.5x first load: {'yes' if within_last else 'NO'}; "
          f"peak <= first load + 2 models: {'yes' if within_peak else 'NO'}")
    print(f"requests: {counts['ok']} answered, {counts['not_served']} 404 while the model was unloaded, "
          f"{counts['failed']} failed{': ' + failures[0] if failures else ''}")
    return 0 if within_last and within_peak and not counts["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
