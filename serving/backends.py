"""Backends: run a model on a list of requests (``infer_batch``), concatenating along the batch dim.

``EdgeRuntimeBackend`` loads a .flow file once with the edge runtime, on
NumPy (``device="cpu"``) or CuPy (``device="gpu"``). One loaded ``Model`` is thread-safe, so the
batcher's instance threads all share it and its weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from edge_runtime import TensorSpec, load
from edge_runtime.example_records import RecordError
from edge_runtime.plan import ExecutionError
from serving.errors import InvalidRequest

Feeds = dict[str, np.ndarray]


def check_device(device: str) -> None:
    """Fail fast, with a message saying what is missing, when ``device`` cannot be used here."""
    if device == "cpu":
        return
    if device != "gpu":
        raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'gpu'")
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, or CUDA driver/runtime errors
        raise RuntimeError(f"--device gpu needs CuPy and a CUDA GPU, and none is usable here: {type(exc).__name__}: {exc}") from None
    if count < 1:
        raise RuntimeError("--device gpu needs a CUDA GPU, and CUDA reports none")


class EdgeRuntimeBackend:
    """A .flow model on the edge runtime.

    ``batched`` says whether dim 0 of every input and output is a batch dimension, so that
    requests may be concatenated along it and outputs split back.
    """

    def __init__(self, path: str | Path, device: str = "cpu", flow: bytes | None = None):
        """The model of the .flow file at ``path``, or of ``flow``, a .flow's bytes made from the
        file at ``path`` (a converted model.onnx)."""
        self.path = Path(path)
        self.device = device
        # Read into memory rather than memory-map: a mapped file rewritten in place (``cp`` over
        # it) would silently change the served weights, or kill the process with SIGBUS if
        # truncated. One private copy per version, shared by all of its instance threads.
        self.model = load(self.path.read_bytes() if flow is None else flow, device=device)
        self.inputs: list[TensorSpec] = list(self.model.inputs)
        self.outputs: list[TensorSpec] = list(self.model.outputs)
        self.metadata: dict[str, str] = dict(self.model.metadata)
        self.batched = all(s.shape and s.shape[0] == -1 for s in self.inputs + self.outputs)
        self._concat_rows = np.concatenate if device == "cpu" else self.model.device_backend.concat_rows

    @property
    def platform(self) -> str:
        return "flowstack_gpu" if self.device == "gpu" else "flowstack"

    def infer_batch(self, requests: Sequence[Feeds]) -> list[Feeds]:
        """Outputs for each request, in order. Requests whose non-batch dims agree run as one call.
        Records that do not parse as the model's features (ParseExample's ``RecordError``) are the
        request's fault: InvalidRequest, naming the record."""
        try:
            return self._infer_grouped(requests)
        except ExecutionError as exc:
            if isinstance(exc.__cause__, RecordError):
                raise InvalidRequest(str(exc.__cause__)) from None
            raise

    def _infer_grouped(self, requests: Sequence[Feeds]) -> list[Feeds]:
        if len(requests) == 1 or not self.batched:
            return [self.model.run(r) for r in requests]
        groups: dict[tuple, list[int]] = {}
        for i, feeds in enumerate(requests):
            items = sorted(feeds.items()) if len(feeds) > 1 else feeds.items()
            key = tuple((name, a.dtype, a.shape[1:]) for name, a in items)
            groups.setdefault(key, []).append(i)
        results: list[Feeds | None] = [None] * len(requests)
        for members in groups.values():
            if len(members) == 1:
                results[members[0]] = self.model.run(requests[members[0]])
                continue
            names = requests[members[0]].keys()
            # On the GPU the batch is gathered in pinned host memory and copied up once.
            joined = {n: self._concat_rows([requests[i][n] for i in members]) for n in names}
            outputs = self.model.run(joined)
            # Row offsets of each request; slicing views is ~5x cheaper than np.split's Python loop.
            bounds = [0]
            for i in members:
                bounds.append(bounds[-1] + len(next(iter(requests[i].values()))))
            total = bounds[-1]
            for n, v in outputs.items():
                if v.shape[:1] != (total,):
                    raise RuntimeError(f"output {n!r} has shape {list(v.shape)}, not {total} batch rows; cannot split it")
            named_outputs = list(outputs.items())
            for k, i in enumerate(members):
                start, end = bounds[k], bounds[k + 1]
                results[i] = {n: v[start:end] for n, v in named_outputs}
        return results  # type: ignore[return-value]
