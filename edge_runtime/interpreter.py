"""``Interpreter``: the TensorFlow Lite / LiteRT Python API over a loaded .flow model.

Code written for ``tf.lite.Interpreter`` runs unchanged: the same method names, and the same
keys in the detail dicts. Tensor indices are indices into the main subgraph's tensor table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edge_runtime.format import TensorDef
from edge_runtime.model import Model, Signature, TensorSpec, load, native_byte_order
from edge_runtime.plan import GraphPlan
from edge_runtime.threads import BlasThreads
from schemas import dtypes


def _quantization(tensor: TensorDef) -> dict[str, Any]:
    """LiteRT's ``quantization`` and ``quantization_parameters``: empty for a float tensor, and the
    legacy ``(scale, zero_point)`` pair only for per-tensor quantization (one scale), as LiteRT."""
    q = tensor.quantization
    scales = np.zeros(0, np.float32) if q is None else np.asarray(q.scale, np.float32).reshape(-1)
    zero_points = np.zeros(0, np.int32) if q is None else np.asarray(q.zero_point, np.int32).reshape(-1)
    legacy = (float(scales[0]), int(zero_points[0]) if zero_points.size else 0) if scales.size == 1 else (0.0, 0)
    return {
        "quantization": legacy,
        "quantization_parameters": {
            "scales": scales,
            "zero_points": zero_points,
            "quantized_dimension": 0 if q is None else int(q.axis),
        },
    }


def _details(name: str, index: int, tensor: TensorDef, shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """A LiteRT tensor-details dict: ``shape`` the current shape (unknown dims as 1, as LiteRT
    before a resize), ``shape_signature`` the declared one (-1 for unknown dims)."""
    declared = tuple(tensor.shape) if tensor.shape is not None else ()
    current = declared if shape is None else shape
    try:
        dtype = dtypes.to_numpy(tensor.dtype).type
    except dtypes.DTypeError:
        dtype = np.object_
    return {
        "name": name,
        "index": int(index),
        "shape": np.array([1 if d == -1 else d for d in current], dtype=np.int32),
        "shape_signature": np.array(declared, dtype=np.int32),
        "dtype": dtype,
        **_quantization(tensor),
        "sparsity_parameters": {},
    }


class Interpreter:
    """Run a .flow model the way LiteRT's Interpreter does: set tensors, invoke, get tensors.

    One Interpreter holds one set of input and output tensors, so (as in LiteRT) it is not for
    concurrent use; share the underlying ``Model`` (``Interpreter(model=...)``) and give each thread
    its own Interpreter. ``num_threads`` (LiteRT's meaning: -1 the default, 0 one thread) sets
    NumPy's BLAS thread count around each ``invoke`` and signature call (see ``edge_runtime.threads``).

    The LiteRT arguments that choose TensorFlow Lite kernels (``experimental_op_resolver_type``,
    delegate clustering and features) are accepted and have nothing to choose here; delegates are
    TensorFlow Lite libraries and are refused. As in LiteRT, ``set_tensor`` takes a value of the
    input's current shape only (an unknown (-1) dimension is 1 until ``resize_tensor_input`` and
    ``allocate_tensors`` give it another size), and a resize may change unknown dimensions only.
    """

    def __init__(self, model_path: str | Path | None = None, model_content: bytes | None = None,
                 experimental_delegates: list | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = None, experimental_preserve_all_tensors: bool = False,
                 experimental_disable_delegate_clustering: bool = False,
                 experimental_default_delegate_latest_features: bool = False,
                 *, model: Model | None = None, device: str = "cpu"):
        if experimental_delegates:
            raise ValueError("experimental_delegates are TensorFlow Lite libraries; the edge runtime runs its own "
                             "kernels (device='gpu' runs them on CuPy)")
        if model is None:
            if (model_path is None) == (model_content is None):
                raise ValueError("give exactly one of model_path or model_content")
            model = load(model_path if model_path is not None else model_content, device=device)
        self.model = model
        self._threads = BlasThreads(num_threads)
        self._main = model.definition.subgraphs[0]
        self._specs = {s.index: s for s in model.inputs}
        self._shapes = {s.index: s.shape for s in model.inputs}
        self._inputs: dict[int, np.ndarray] = {}  # the input buffers: allocate_tensors makes them
        self._written: set[int] = set()  # inputs given a value (set_tensor, or a view from tensor())
        self._results: dict[int, Any] = {}
        self._allocated = False
        # every value of a run kept for get_tensor, as LiteRT's experimental_preserve_all_tensors
        self._preserving = GraphPlan(model.definition, 0, model.device_backend, {}, preserve_all=True) \
            if experimental_preserve_all_tensors else None

    def allocate_tensors(self) -> None:
        """Give each input a buffer of its current shape (zeros; an input already set at that
        shape keeps its value), which ``tensor()`` views and ``set_tensor`` fills. Outputs of
        another shape than the inputs now have are dropped with the inputs they came from."""
        for index, spec in self._specs.items():
            current = self._inputs.get(index)
            if current is None or not _fits(self._shapes[index], current.shape):
                self._inputs[index] = np.zeros([1 if d == -1 else d for d in self._shapes[index]], dtype=spec.dtype)
                self._written.discard(index)
                self._results = {}
        self._allocated = True

    def get_input_details(self) -> list[dict[str, Any]]:
        return [_details(s.name, s.index, self._main.tensors[s.index], self._input_shape(s.index))
                for s in self.model.inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        details = []
        for spec in self.model.outputs:
            result = self._results.get(spec.index)
            shape = tuple(result.shape) if hasattr(result, "shape") else None
            details.append(_details(spec.name, spec.index, self._main.tensors[spec.index], shape))
        return details

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        """Details of every tensor of the main graph (with ``experimental_preserve_all_tensors``,
        each one ``get_tensor`` can read after ``invoke``)."""
        if subgraph_index != 0:
            raise ValueError(f"subgraph_index {subgraph_index}: only the main graph (0) has tensor details here")
        names = {**{s.index: s.name for s in self.model.inputs}, **{s.index: s.name for s in self.model.outputs}}
        details = []
        for index, tensor in enumerate(self._main.tensors):
            value = self._results.get(index, self._inputs.get(index))
            shape = tuple(value.shape) if hasattr(value, "shape") else None
            details.append(_details(names.get(index, tensor.name), index, tensor, shape))
        return details

    def resize_tensor_input(self, input_index: int, tensor_size, strict: bool = False) -> None:
        """Take ``tensor_size`` as the input's shape from the next ``allocate_tensors`` on. With
        ``strict``, only the dimensions that are unknown (-1) in its shape signature may change."""
        spec = self._input(input_index)
        new = tuple(int(d) for d in np.asarray(tensor_size).reshape(-1))
        if len(new) != len(spec.shape):
            raise ValueError(f"input {spec.name!r}: cannot resize rank {len(spec.shape)} to {list(new)}")
        if any(d < 0 for d in new):
            raise ValueError(f"input {spec.name!r}: cannot resize to {list(new)}: dimensions must be >= 0")
        for axis, (declared, want) in enumerate(zip(spec.shape, new)):
            if declared != -1 and declared != want:
                # LiteRT's non-strict resize may let the model reshape itself; a .flow model's
                # fixed dimension holds (the run would refuse the input)
                refusal = "strict resize refused" if strict else "the model cannot take"
                raise ValueError(f"input {spec.name!r}: dimension {axis} is fixed at {declared}; {refusal} {want}")
        self._shapes[input_index] = new
        self._allocated = False

    def set_tensor(self, tensor_index: int, value) -> None:
        """Copy ``value`` into the input: its dtype must be the input's, its shape the current one
        (as allocated: another batch size needs ``resize_tensor_input`` and ``allocate_tensors``)."""
        spec = self._input(tensor_index)
        array = np.asarray(value)
        want = tuple(1 if d == -1 else d for d in self._input_shape(tensor_index))
        if array.dtype != spec.dtype:
            try:
                array = native_byte_order(spec, array)
            except ValueError:
                raise ValueError(f"input {spec.name!r}: got dtype {array.dtype} but expected {spec.dtype}") from None
        if tuple(array.shape) != tuple(want):
            hint = ""
            if _fits(spec.shape, array.shape):
                hint = (f"; call resize_tensor_input({tensor_index}, {list(array.shape)}) and allocate_tensors() "
                        f"first to run this shape")
            raise ValueError(f"input {spec.name!r}: got shape {list(array.shape)} but expected {list(want)}{hint}")
        self._inputs[tensor_index] = np.array(array, copy=True, order="C")
        self._written.add(tensor_index)

    def invoke(self) -> None:
        if not self._allocated:
            raise RuntimeError("call allocate_tensors() before invoke()")
        missing = [s.name for s in self.model.inputs if s.index not in self._written]
        if missing:
            raise ValueError(f"input tensor(s) {missing} were not set")
        feeds = {self._specs[i].name: self._inputs[i] for i in self._specs}
        with self._threads.applied():
            if self._preserving is None:
                outputs = self.model.run(feeds)
                self._results = {s.index: outputs[s.name] for s in self.model.outputs}
            else:
                self._results = self._run_preserving(feeds)

    def _run_preserving(self, feeds: dict[str, np.ndarray]) -> dict[int, Any]:
        device = self.model.device_backend
        specs = [self._specs[i] for i in self._main.inputs]
        args = [device.to_device(self.model.check_input(spec, feeds[spec.name])) for spec in specs]
        values = [device.to_host(v) for v in self._preserving.execute(args)]
        return dict(zip(self._preserving.outputs, values))

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of an output (after ``invoke``) or an input (after ``set_tensor`` or
        ``allocate_tensors``); any tensor after ``invoke`` with ``experimental_preserve_all_tensors``."""
        if subgraph_index != 0:
            raise ValueError(f"subgraph_index {subgraph_index}: only the main graph's (0) tensors can be read")
        return np.array(self._value(tensor_index), copy=True)

    def tensor(self, tensor_index: int):
        """A function returning the tensor's buffer itself, as LiteRT's: an input's can be written
        (``interpreter.tensor(i)()[...] = x`` then ``invoke()``). Call it again after each
        ``allocate_tensors``, ``set_tensor`` or ``invoke``: the buffer it returned may be replaced."""

        def view() -> np.ndarray:
            value = self._value(tensor_index)
            if tensor_index in self._specs:
                self._written.add(tensor_index)
            return value

        return view

    def _value(self, tensor_index: int) -> Any:
        if tensor_index in self._inputs:  # before the results: a set_tensor after invoke is the value now
            return self._inputs[tensor_index]
        if tensor_index in self._results:
            return self._results[tensor_index]
        if tensor_index in self._specs:
            raise ValueError(f"input tensor {tensor_index} ({self._specs[tensor_index].name!r}) has no buffer: "
                             "call allocate_tensors() or set_tensor() first")
        raise ValueError(f"tensor {tensor_index} has no value (not an input or output, or invoke() has not run; "
                         "intermediates are kept with experimental_preserve_all_tensors=True)")

    def _input_shape(self, index: int) -> tuple[int, ...]:
        """The input's current shape: its buffer's once allocated or set, else its resized or declared shape."""
        buffer = self._inputs.get(index)
        return tuple(buffer.shape) if buffer is not None else self._shapes[index]

    def num_subgraphs(self) -> int:
        return len(self.model.definition.subgraphs)

    def reset_all_variables(self) -> None:
        """LiteRT resets its variable tensors; a .flow model has none (each run starts afresh)."""

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


def _fits(want: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``shape`` matches ``want`` (-1: any size)."""
    return len(want) == len(shape) and all(w == -1 or w == g for w, g in zip(want, shape))


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
        return {s.name: self._details(s) for s in self._signature.inputs}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {s.name: self._details(s) for s in self._signature.outputs}

    def _details(self, spec: TensorSpec) -> dict[str, Any]:
        return _details(spec.name, spec.index, self.model.definition.subgraphs[0].tensors[spec.index])
