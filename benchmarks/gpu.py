"""The GPU paths against PyTorch eager on CUDA, same weights, same card, in one run.

    python benchmarks/gpu.py                          # edge ResNet-18 and encoder at batch 1 and 32, trainer CNN at 256
    python benchmarks/gpu.py --cases resnet18 --batches 32 --json out.json
    python benchmarks/gpu.py --device cpu --small     # the same code on NumPy and PyTorch CPU (what CI runs)

Edge runtime: torchvision's ResNet-18 (random weights; an identical local definition where
torchvision is missing) and a BERT-style encoder (nn.TransformerEncoder, post-norm, GELU) are
exported with ``torch.onnx.export``, converted to .flow, loaded with ``load(..., device="gpu")``
and timed host to host (input up, run, output down) against the PyTorch module on the same
device, host to host too; onnxruntime's CUDA provider is a third column where the installed
onnxruntime has it. Trainer: one training step (forward, backward, Adam) of the CNN of
benchmarks/train_vs_peers.py at batch 256, the whole graph on ``GPU:0``, against the same model
in PyTorch. Each figure is the median over repeats of the mean time per call, the device
synchronized before and after each repeat. PyTorch runs in float32 with TF32 off (as ours); the
peer with PyTorch's default TF32 convolutions is printed beside it. Ratios are ours / peer.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- models ------------------------------------------------------------------------------------
def resnet18_module(torch, classes: int = 1000):
    """torchvision's ResNet-18 with random weights; the same architecture defined here without it."""
    try:
        from torchvision.models import resnet18

        return resnet18(weights=None, num_classes=classes)
    except ImportError:
        return _LocalResNet18(torch, classes)


def _LocalResNet18(torch, classes: int):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def encoder_module(torch, d_model: int, heads: int, layers: int):
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation="gelu",
                                             batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def export_onnx(torch, module, example) -> bytes:
    """``module`` (eval mode) through the TorchScript exporter, opset 17, batch dim dynamic."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (example,), buffer, input_names=["x"], output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, dynamo=False)
    return buffer.getvalue()


def to_flow(onnx_bytes: bytes, workdir: Path, name: str) -> Path:
    import onnx

    from exporter.onnx_import import convert_onnx

    path = workdir / f"{name}.flow"
    convert_onnx(onnx.load_from_string(onnx_bytes), path, verify=False)
    return path


# -- timing ------------------------------------------------------------------------------------
def median_seconds(call: Callable[[], Any], sync: Callable[[], None], iters: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean seconds per call, the device idle before and after each repeat."""
    call()
    call()
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            call()
        sync()
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


class Setup:
    """The device both sides run on, and how to wait for it."""

    def __init__(self, device: str):
        import torch

        self.device = device
        self.torch = torch
        self.torch_device = torch.device("cuda" if device == "gpu" else "cpu")
        if device == "gpu":
            import cupy

            self.card = torch.cuda.get_device_name(0)
            self.sync_ours = cupy.cuda.Device().synchronize
            self.sync_peer = torch.cuda.synchronize
        else:
            self.card = f"CPU ({os.cpu_count()} cores)"
            self.sync_ours = self.sync_peer = lambda: None

    def set_tf32(self, enabled: bool) -> None:
        self.torch.backends.cudnn.allow_tf32 = enabled
        self.torch.backends.cuda.matmul.allow_tf32 = enabled


def ort_cuda_session(onnx_bytes: bytes):
    """An onnxruntime session on its CUDA provider, or None where the installed onnxruntime lacks it."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return None
    return ort.InferenceSession(onnx_bytes, providers=["CUDAExecutionProvider"])


# -- cases -------------------------------------------------------------------------------------
def edge_case(setup: Setup, name: str, module, example_shape: tuple[int, ...], batches: list[int], iters: int,
              repeats: int, workdir: Path, record: Callable[[dict], None], profile: bool = False) -> None:
    from edge_runtime import load
    from edge_runtime.profiler import profile_ops

    torch = setup.torch
    torch.manual_seed(0)
    module = module.eval()
    onnx_bytes = export_onnx(torch, module, torch.zeros((1,) + example_shape))
    model = load(to_flow(onnx_bytes, workdir, name), device=setup.device)
    peer = module.to(setup.torch_device)
    ort_session = ort_cuda_session(onnx_bytes) if setup.device == "gpu" else None
    rng = np.random.default_rng(0)
    for batch in batches:
        x = rng.standard_normal((batch,) + example_shape).astype(np.float32)

        def ours():
            return model.run({"x": x})["y"]

        def torch_call():
            with torch.inference_mode():
                return peer(torch.from_numpy(x).to(setup.torch_device)).cpu().numpy()

        if setup.device == "gpu":
            setup.set_tf32(False)
        want = torch_call()
        got = ours()
        row = {"case": name, "batch": batch, "max_abs_diff": float(np.max(np.abs(got - want))),
               "ours_ms": 1e3 * median_seconds(ours, setup.sync_ours, iters, repeats),
               "peer_ms": 1e3 * median_seconds(torch_call, setup.sync_peer, iters, repeats)}
        if setup.device == "gpu":
            setup.set_tf32(True)
            row["peer_tf32_ms"] = 1e3 * median_seconds(torch_call, setup.sync_peer, iters, repeats)
            setup.set_tf32(False)
        if ort_session is not None:
            row["ort_cuda_ms"] = 1e3 * median_seconds(lambda: ort_session.run(None, {"x": x}), lambda: None, iters, repeats)
        row["ratio"] = row["ours_ms"] / row["peer_ms"]
        record(row)
        if profile and batch == max(batches):
            print(f"{name} batch {batch}: our ops, each timed with a device sync after it")
            print(profile_ops(model, {"x": x}, runs=3, warmup=1).table(top=12), flush=True)


def profile_train_step(session, run_step: Callable[[], Any], sync: Callable[[], None], steps: int = 3,
                       top: int = 12) -> None:
    """Our training step's kernels, each timed with a device sync after it, slowest first. Reaches
    into the session's compiled plans (benchmark code: the trainer has no synced op profiler)."""
    from collections import defaultdict

    timings: dict = defaultdict(float)
    wrapped_plans = []
    for compiled in list(session._plans.values()):
        plan = compiled.plan
        if not hasattr(plan, "fast"):
            continue
        original = [list(part) for part in plan.fast]
        for part, steps_of in zip(plan.fast, (p[1] for p in plan.partitions)):
            for i, ((fn, ins, outs, attrs, wants), step) in enumerate(zip(list(part), steps_of)):
                label = (step.node.op_type, step.node.name)

                def timed(*args, _fn=fn, _label=label, **kwargs):
                    start = time.perf_counter()
                    result = _fn(*args, **kwargs)
                    sync()
                    timings[_label] += time.perf_counter() - start
                    return result

                part[i] = (timed, ins, outs, attrs, wants)
        wrapped_plans.append((plan, original))
    try:
        run_step()
        timings.clear()
        for _ in range(steps):
            run_step()
    finally:
        for plan, original in wrapped_plans:
            plan.fast[:] = original
    by_type: dict = defaultdict(float)
    for (op_type, _), seconds in timings.items():
        by_type[op_type] += seconds
    total = sum(timings.values()) / steps
    print(f"train step: {total * 1e3:.3f} ms a step in kernels (each followed by a sync)")
    for op_type, seconds in sorted(by_type.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {op_type:28} {seconds / steps * 1e3:8.3f} ms")
    print("slowest nodes:")
    for (op_type, name), seconds in sorted(timings.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds / steps * 1e3:8.3f} ms  {name} ({op_type})")


def host_and_device_time(setup: Setup, run_step: Callable[[], Any], steps: int = 30, traced: int = 5,
                         top: int = 8) -> None:
    """Whether the step waits on the interpreter or on the device: host time a step (no sync),
    wall time a step, and on CUDA the kernels a step with their device time (PyTorch's CUPTI
    profiler sees CuPy's kernels too: it records every kernel of the process)."""
    from collections import defaultdict

    setup.sync_ours()
    start = time.perf_counter()
    for _ in range(steps):
        run_step()
    host = time.perf_counter() - start
    setup.sync_ours()
    wall = time.perf_counter() - start
    print(f"train step: host {host / steps * 1e3:.3f} ms a step, wall {wall / steps * 1e3:.3f} ms a step")
    if setup.device != "gpu":
        return
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(traced):
            run_step()
        setup.sync_ours()
    kernels = [e for e in prof.events() if e.device_type == setup.torch.autograd.DeviceType.CUDA]
    by_name: dict = defaultdict(lambda: [0, 0.0])
    for e in kernels:
        by_name[e.name][0] += 1
        by_name[e.name][1] += e.device_time
    print(f"CUDA kernels: {len(kernels) / traced:.0f} a step, "
          f"{sum(e.device_time for e in kernels) / traced / 1e3:.3f} ms of device time a step")
    for name, (count, micros) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {micros / traced / 1e3:8.3f} ms {count / traced:5.1f} a step  {name[:90]}")


def train_case(setup: Setup, batch: int, iters: int, repeats: int, record: Callable[[dict], None],
               profile: bool = False) -> None:
    import trainer as T

    torch = setup.torch
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    g = T.Graph()
    with g.as_default(), T.device("/GPU:0" if setup.device == "gpu" else "/CPU:0"):
        xs = T.placeholder(np.float32, (None, 1, 28, 28))
        ys = T.placeholder(np.int64, (None,))
        h = T.layers.conv2d(xs, 32, 3, padding="valid", activation="relu", name="c1", data_format="channels_first")
        h = T.layers.conv2d(h, 64, 3, padding="valid", activation="relu", name="c2", data_format="channels_first")
        h = T.layers.flatten(T.layers.max_pooling2d(h, 2, data_format="channels_first"))
        h = T.layers.dense(h, 128, activation="relu", name="fc")
        logits = T.layers.dense(h, 10, name="out")
        loss = T.losses.sparse_softmax_cross_entropy(ys, logits)
        train = T.train.AdamOptimizer(1e-3).minimize(loss)
        init = T.global_variables_initializer()
    session = T.Session(g)
    session.run(init)
    feed = {xs: x, ys: y}
    first_loss = float(session.run(loss, feed))

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(9216, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(setup.torch_device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def peer_step():
        opt.zero_grad()
        loss_t = torch.nn.functional.cross_entropy(model(xt.to(setup.torch_device)), yt.to(setup.torch_device))
        loss_t.backward()
        opt.step()

    if setup.device == "gpu":
        setup.set_tf32(False)
    row = {"case": "train_cnn", "batch": batch,
           "ours_ms": 1e3 * median_seconds(lambda: session.run(train, feed), setup.sync_ours, iters, repeats),
           "peer_ms": 1e3 * median_seconds(peer_step, setup.sync_peer, iters, repeats)}
    last_loss = float(session.run(loss, feed))
    row["loss_first_last"] = [first_loss, last_loss]
    row["ratio"] = row["ours_ms"] / row["peer_ms"]
    record(row)
    if profile:
        host_and_device_time(setup, lambda: session.run(train, feed))
        profile_train_step(session, lambda: session.run(train, feed), setup.sync_ours)


def print_row(row: dict) -> None:
    extra = "".join(f"  {k} {row[k]:.3f}" for k in ("peer_tf32_ms", "ort_cuda_ms") if k in row)
    check = f"  max|diff| {row['max_abs_diff']:.2e}" if "max_abs_diff" in row else \
        f"  loss {row['loss_first_last'][0]:.3f} -> {row['loss_first_last'][1]:.3f}"
    print(f"{row['case']:10} batch {row['batch']:>4} | ours {row['ours_ms']:9.3f} ms | peer {row['peer_ms']:9.3f} ms | "
          f"ours/peer {row['ratio']:6.2f}{extra}{check}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--cases", default="resnet18,encoder,train", help="comma list of resnet18, encoder, train")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 32], help="edge batch sizes (default 1 32)")
    p.add_argument("--train-batch", type=int, default=256)
    p.add_argument("--iters", type=int, default=10, help="calls per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--image", type=int, default=224, help="ResNet-18 input size")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--small", action="store_true", help="tiny shapes, for checking the script itself")
    p.add_argument("--profile", action="store_true", help="also print our slowest ops at the largest batch")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    if args.small:
        args.image, args.d_model, args.layers, args.seq, args.train_batch = 32, 32, 1, 8, 8
        args.iters, args.repeats, args.batches = 1, 1, [1, 2]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - {"resnet18", "encoder", "train"}
    if unknown:
        p.error(f"unknown case(s) {sorted(unknown)}; expected resnet18, encoder, train")
    setup = Setup(args.device)
    torch = setup.torch
    print(f"card: {setup.card}; torch {torch.__version__}; peer = PyTorch eager on the same device, float32 "
          f"(TF32 off; peer_tf32_ms = PyTorch's default TF32 convolutions); {args.iters} calls x {args.repeats} repeats, median")
    rows: list[dict] = []

    def record(row: dict) -> None:
        """Print a row and rewrite the JSON: a run cut short keeps the rows it finished."""
        rows.append(row)
        print_row(row)
        if args.json:
            args.json.write_text(json.dumps({"card": setup.card, "device": args.device, "rows": rows}, indent=1))

    heads = max(1, args.d_model // 64)
    runs = {
        "resnet18": lambda: edge_case(setup, "resnet18", resnet18_module(torch), (3, args.image, args.image),
                                      args.batches, args.iters, args.repeats, workdir, record, args.profile),
        "encoder": lambda: edge_case(setup, "encoder", encoder_module(torch, args.d_model, heads, args.layers),
                                     (args.seq, args.d_model), args.batches, args.iters, args.repeats, workdir, record,
                                     args.profile),
        "train": lambda: train_case(setup, args.train_batch, args.iters, args.repeats, record, args.profile),
    }
    failed = []
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        workdir = Path(tmp)
        for case in cases:
            try:
                runs[case]()
            except Exception:  # one broken case must not cost the others their figures
                failed.append(case)
                traceback.print_exc()
    if failed:
        print(f"FAILED cases: {failed}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
