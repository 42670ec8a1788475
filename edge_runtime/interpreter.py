"""``Interpreter``: the TensorFlow Lite / LiteRT Python API over a loaded .flow model.

Code written for ``tf.lite.Interpreter`` runs unchanged: the same method names, and the same
keys in the detail dicts. Tensor indices are indices into the main subgraph's tensor table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edge_runtime.model import Model, Signature, TensorSpec, load
from edge_runtime.threads import BlasThreads


def _details(spec: TensorSpec, shape: tuple[int, ...]) -> dict[str, Any]:
    return {
        "name": spec.name,
        "index": spec.index,
        "shape": np.array([1 if d == -1 else d for d in shape], dtype=np.int32),
        "shape_signature": np.array(spec.shape, dtype=np.int32),
        "dtype": spec.dtype.type,
        "quantization": (0.0, 0),
        "quantization_parameters": {
            "scales": np.zeros(0, np.float32),
            "zero_points": np.zeros(0, np.int32),
            "quantized_dimension": 0,
        },
        "sparsity_parameters": {},
    }


class Interpreter:
    """Run a .flow model the way LiteRT's Interpreter does: set tensors, invoke, get tensors.

    One Interpreter holds one set of input and output tensors, so (as in LiteRT) it is not for
    concurrent use; share the underlying ``Model`` and give each thread its own Interpreter.
    ``num_threads`` (LiteRT's meaning: -1 the default, 0 one thread) sets NumPy's BLAS thread
    count around each ``invoke`` and signature call (see ``edge_runtime.threads``).
    """

    def __init__(self, model_path: str | Path | None = None, model_content: bytes | None = None,
                 num_threads: int | None = None, *, model: Model | None = None, device: str = "cpu"):
        if model is None:
            if (model_path is None) == (model_content is None):
                raise ValueError("give exactly one of model_path or model_content")
            model = load(model_path if model_path is not None else model_content, device=device)
        self.model = model
        self._threads = BlasThreads(num_threads)
        self._specs = {s.index: s for s in model.inputs}
        self._outputs = {s.index: s for s in model.outputs}
        self._shapes = {s.index: s.shape for s in model.inputs}
        self._inputs: dict[int, np.ndarray] = {}
        self._results: dict[int, np.ndarray] = {}
        self._allocated = False

    def allocate_tensors(self) -> None:
        self._allocated = True

    def get_input_details(self) -> list[dict[str, Any]]:
        return [_details(s, self._shapes[s.index]) for s in self.model.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        details = []
        for spec in self.model.outputs:
            shape = self._results[spec.index].shape if spec.index in self._results else spec.shape
            details.append(_details(spec, tuple(shape)))
        return details

    def resize_tensor_input(self, input_index: int, tensor_size, strict: bool = False) -> None:
        spec = self._input(input_index)
        new = tuple(int(d) for d in tensor_size)
        if len(new) != len(spec.shape):
            raise ValueError(f"input {spec.name!r}: cannot resize rank {len(spec.shape)} to {list(new)}")
        for axis, (declared, want) in enumerate(zip(spec.shape, new)):
            if declared != -1 and declared != want and strict:
                raise ValueError(f"input {spec.name!r}: dimension {axis} is fixed at {declared}; strict resize refused {want}")
        self._shapes[input_index] = new
        self._allocated = False

    def set_tensor(self, tensor_index: int, value) -> None:
        spec = self._input(tensor_index)
        array = np.asarray(value)
        want = self._shapes[tensor_index]
        if array.dtype != spec.dtype:
            raise ValueError(f"input {spec.name!r}: got dtype {array.dtype} but expected {spec.dtype}")
        if len(want) != array.ndim or any(w != -1 and w != g for w, g in zip(want, array.shape)):
            raise ValueError(f"input {spec.name!r}: got shape {list(array.shape)} but expected {list(want)}")
        self._inputs[tensor_index] = np.array(array, copy=True)

    def invoke(self) -> None:
        if not self._allocated:
            raise RuntimeError("call allocate_tensors() before invoke()")
        missing = [s.name for s in self.model.inputs if s.index not in self._inputs]
        if missing:
            raise ValueError(f"input tensor(s) {missing} were not set")
        with self._threads.applied():
            outputs = self.model.run({self._specs[i].name: v for i, v in self._inputs.items()})
        self._results = {s.index: outputs[s.name] for s in self.model.outputs}

    def get_tensor(self, tensor_index: int) -> np.ndarray:
        if tensor_index in self._results:
            return np.array(self._results[tensor_index], copy=True)
        if tensor_index in self._inputs:
            return np.array(self._inputs[tensor_index], copy=True)
        raise ValueError(f"tensor {tensor_index} has no value (not an input or output, or invoke() has not run)")

    def tensor(self, tensor_index: int):
        return lambda: self.get_tensor(tensor_index)

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {
            key: {"inputs": [s.name for s in sig.inputs], "outputs": [s.name for s in sig.outputs]}
            for key, sig in self.model.entry_points.items()
        }

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        return SignatureRunner(self.model, self.model.signature(signature_key), self._threads)

    def _input(self, index: int) -> TensorSpec:
        if index not in self._specs:
            raise ValueError(f"tensor {index} is not an input; inputs are {sorted(self._specs)}")
        return self._specs[index]


class SignatureRunner:
    """``runner(**inputs) -> dict`` for one signature, as LiteRT's SignatureRunner."""

    def __init__(self, model: Model, signature: Signature, threads: BlasThreads | None = None):
        self.model = model
        self._signature = signature
        self._threads = threads or BlasThreads(None)

    @property
    def key(self) -> str:
        return self._signature.key

    def __call__(self, **inputs) -> dict[str, np.ndarray]:
        with self._threads.applied():
            return self.model.run(inputs, signature=self.key)

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {s.name: _details(s, s.shape) for s in self._signature.inputs}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {s.name: _details(s, s.shape) for s in self._signature.outputs}
