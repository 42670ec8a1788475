"""``load(path)`` and ``Model``: a loaded .flow file, run as dict in, dict out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from edge_runtime.allocator import keep_freed_memory
from edge_runtime.devices import open_device
from edge_runtime.format import ModelDef, ModelFormatError, parse, read_file
from edge_runtime.plan import GraphPlan
from edge_runtime.quantized import AT_LOAD, prepare, release_pages
from schemas import dtypes


@dataclass(frozen=True)
class TensorSpec:
    """A public input or output: its name, NumPy dtype and shape (-1 = dynamic dim)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    index: int = -1  # tensor index in subgraph 0


DEFAULT_SIGNATURE = "serving_default"


@dataclass(frozen=True)
class Signature:
    """A named entry point into the main graph: its inputs and outputs under their public names."""

    key: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def output(self, name: str) -> TensorSpec:
        for spec in self.outputs:
            if spec.name == name:
                return spec
        raise ValueError(f"unknown output {name!r}; signature {self.key!r} has {[s.name for s in self.outputs]}")


class Model:
    """A loaded .flow model. Thread-safe: one Model may serve many concurrent ``run`` calls."""

    def __init__(self, model_def: ModelDef, backing: Any = None, device: str = "cpu"):
        self.definition = model_def
        self._backing = backing  # keeps the memory map alive as long as weights are viewed
        self.device = device
        self.device_backend = open_device(device)
        self.xp = self.device_backend.xp
        if self.device_backend.is_host:
            keep_freed_memory()
        self.plans: dict[int, GraphPlan] = {}  # every subgraph's plan by index, the main graph's first
        self.plan = GraphPlan(model_def, 0, self.device_backend, self.plans)
        main = model_def.subgraphs[0]
        self._input_position = {i: pos for pos, i in enumerate(main.inputs)}
        self._output_position = {i: pos for pos, i in enumerate(main.outputs)}
        self.entry_points = self._entry_points()
        default = self.entry_points.get(DEFAULT_SIGNATURE) or next(iter(self.entry_points.values()))
        self.inputs = list(default.inputs)
        self.outputs = list(default.outputs)
        self._default = default

    def replanned(self) -> "Model":
        """The same model (definition, weights, device) with execution plans of its own: what the
        op profiler instruments without touching this model's."""
        return Model(self.definition, self._backing, self.device)

    def _entry_points(self) -> dict[str, "Signature"]:
        """Every signature of the file, checked against the main graph; a file without any gets
        ``serving_default`` over the main graph's own inputs and outputs."""
        main = self.definition.subgraphs[0]
        defs = self.definition.signatures
        if not defs:
            maps = {DEFAULT_SIGNATURE: ({main.tensors[i].name: i for i in main.inputs},
                                        {main.tensors[i].name: i for i in main.outputs}, 0)}
        else:
            maps = {key: (sig.inputs, sig.outputs, sig.subgraph) for key, sig in defs.items()}
        entries = {}
        for key, (in_map, out_map, subgraph) in maps.items():
            if subgraph != 0:
                raise ModelFormatError(f"signature {key!r} runs subgraph {subgraph}; only the main graph (0) can be an entry point")
            inputs = tuple(self._spec(name, i) for name, i in in_map.items())
            outputs = tuple(self._spec(name, i) for name, i in out_map.items())
            for specs, positions, role in ((inputs, self._input_position, "inputs"), (outputs, self._output_position, "outputs")):
                missing = [spec.name for spec in specs if spec.index not in positions]
                if missing:
                    raise ModelFormatError(f"signature {key!r}: {role} {missing} are not {role} of the main graph")
            unfed = sorted(set(self._input_position) - {spec.index for spec in inputs})
            if unfed:
                names = [main.tensors[i].name for i in unfed]
                raise ModelFormatError(f"signature {key!r} leaves main-graph inputs {names} without a feed")
            entries[key] = Signature(key, inputs, outputs)
        return entries

    def _spec(self, name: str, index: int) -> TensorSpec:
        tensor = self.definition.subgraphs[0].tensors[index]
        try:
            dtype = dtypes.to_numpy(tensor.dtype)
        except dtypes.MissingDTypePackage as exc:
            raise ModelFormatError(f"tensor {name!r}: {exc}") from None
        except dtypes.DTypeError:
            dtype = np.dtype(object)
        shape = tuple(tensor.shape) if tensor.shape is not None else ()
        return TensorSpec(name, dtype, shape, index)

    @property
    def metadata(self) -> dict[str, str]:
        return self.definition.metadata

    @property
    def signatures(self):
        return self.definition.signatures

    def check_input(self, spec: TensorSpec, value: Any) -> np.ndarray:
        """Coerce and validate one feed: dtype, rank and static dims must match the declaration."""
        tensor = self.definition.subgraphs[0].tensors[spec.index]
        if tensor.dtype in (dtypes.SEQUENCE, dtypes.OPTIONAL):
            return value  # sequences and optionals pass through as the kernels represent them
        if isinstance(value, np.ndarray) or (not self.device_backend.is_host and isinstance(value, self.device_backend.array_type)):
            array = value
            if spec.dtype != np.dtype(object) and array.dtype != spec.dtype:
                array = native_byte_order(spec, array)
        else:
            array = converted(spec, value)
        if tensor.shape is not None:
            if array.ndim != len(spec.shape):
                raise ValueError(
                    f"input {spec.name!r}: expected rank {len(spec.shape)} (shape {list(spec.shape)}), "
                    f"got rank {array.ndim} (shape {list(array.shape)})"
                )
            for axis, (want, got) in enumerate(zip(spec.shape, array.shape)):
                if want != -1 and want != got:
                    raise ValueError(
                        f"input {spec.name!r}: dimension {axis} must be {want}, got {got} "
                        f"(expected shape {list(spec.shape)}, got {list(array.shape)})"
                    )
        return array

    def signature(self, key: str | None = None) -> "Signature":
        """The entry point ``key`` (default: ``serving_default``, else the file's first signature)."""
        if key is None:
            return self._default
        try:
            return self.entry_points[key]
        except KeyError:
            raise ValueError(f"no signature {key!r}; the model has {sorted(self.entry_points)}") from None

    def run(self, feeds: Mapping[str, Any], outputs: list[str] | None = None, *, signature: str | None = None) -> dict[str, Any]:
        """Run the main graph through one signature (default: ``serving_default``): ``feeds`` maps its
        input names to arrays; returns its output names (or the ``outputs`` asked for) -> arrays.

        On the GPU, feeds may be host or device arrays; each host feed is copied up once, the run
        stays on the device, and each output comes back to the host once."""
        device = self.device_backend
        entry = self.signature(signature)
        unknown = set(feeds) - {s.name for s in entry.inputs}
        if unknown:
            raise ValueError(f"unknown input(s) {sorted(unknown)}; the model takes {[s.name for s in entry.inputs]}")
        args: list[Any] = [None] * len(self._input_position)
        for spec in entry.inputs:
            if spec.name not in feeds:
                raise ValueError(f"missing input {spec.name!r} (dtype {spec.dtype}, shape {list(spec.shape)})")
            args[self._input_position[spec.index]] = device.to_device(self.check_input(spec, feeds[spec.name]))
        results = self.plan.execute(args)
        wanted = entry.outputs if outputs is None else [entry.output(n) for n in outputs]
        out = {}
        for spec in wanted:
            out[spec.name] = device.to_host(results[self._output_position[spec.index]])
        return out


def native_byte_order(spec: TensorSpec, array: np.ndarray) -> np.ndarray:
    """``array`` if it holds ``spec``'s dtype in the other byte order (big-endian data read from a
    file or the network), converted to the machine's; anything else is the wrong dtype."""
    if array.dtype.newbyteorder("=") != spec.dtype:
        raise ValueError(f"input {spec.name!r}: expected dtype {spec.dtype}, got {array.dtype}")
    return array.astype(spec.dtype)


# The kinds of value a Python scalar or list may hold for an input of each kind: a float is not
# taken for an integer input (2.7 would run as 2), nor a number for a bool input, nor text.
_CONVERTIBLE_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}


def converted(spec: TensorSpec, value: Any) -> np.ndarray:
    """A Python or NumPy scalar or a nested list as an array of ``spec``'s dtype, where its values
    are of a kind that dtype holds (integers out of its range are refused too)."""
    if spec.dtype == np.dtype(object):
        return np.asarray(value)
    try:
        natural = np.asarray(value)
        if natural.dtype.kind not in _CONVERTIBLE_KINDS.get(spec.dtype.kind, natural.dtype.kind):
            raise ValueError(f"{natural.dtype} values would change")
        return np.asarray(value, dtype=spec.dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"input {spec.name!r}: cannot convert to {spec.dtype}: {exc}") from None


def load(source: str | Path | bytes | bytearray | memoryview, device: str = "cpu", verify: bool | None = None,
         dequantize: str = AT_LOAD) -> Model:
    """Load a .flow model from a path (memory-mapped, zero-copy weights) or from bytes in memory.

    ``verify`` checks the weights against the checksums the file records (a ``ModelFormatError``
    naming the corrupt buffer). By default bytes are verified, being read whole already, and a
    mapped file is not: that would read every page of it at load.

    ``dequantize`` says when a quantized model's stored weights become float32: ``"at_load"``
    once (runs as fast as the float model), or ``"per_call"`` on every run (only the stored
    weights stay resident); see ``edge_runtime.quantized``."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        model_def = prepare(parse(source, verify=verify is not False), dequantize)
        return Model(model_def, backing=source, device=device)
    model_def, mapping = read_file(source, verify=bool(verify))
    prepared = prepare(model_def, dequantize, str(source))
    if prepared is not model_def:
        release_pages(mapping)
    return Model(prepared, backing=mapping, device=device)
