"""Model pipelines: Triton's ensemble scheduling, a model whose steps are other models.

A config.json with ``"platform": "ensemble"`` lists ``ensemble_scheduling.step``: each step names a
model of the repository (``model_version`` -1 for its newest) and maps its inputs from, and its
outputs to, tensors of the ensemble by name (``input_map``: step model input -> ensemble tensor;
``output_map``: step model output -> ensemble tensor). The ensemble's inputs and outputs are
declared (Triton's ``input`` / ``output``, ``dims`` without the batch dimension) or, left out,
inferred: tensors some step reads and none writes are inputs, tensors some step writes and none
reads are outputs.

``EnsembleConfig`` checks what the file alone decides (each tensor written once, no cycle, every
tensor read is an input or some step's output); ``Ensemble.resolve`` checks the steps against the
models being served (each exists, every input of each is mapped, datatypes agree) and gives the
runnable pipeline. A request runs the steps in dependency order, independent steps at once, each
through its own model's batcher, so every step batches with that model's other traffic.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

import numpy as np

from serving import datatypes
from serving.errors import ConfigError

ENSEMBLE_PLATFORM = "ensemble"
# The fields an ensemble's config.json may hold (batching fields belong to its steps' models).
ENSEMBLE_FIELDS = frozenset({"name", "platform", "max_batch_size", "input", "output", "ensemble_scheduling", "version_policy",
                    "version_labels"})
_TYPE_NAMES = {config_name: name for name, config_name in datatypes.CONFIG_TYPE_NAMES.items()}


@dataclass(frozen=True)
class Step:
    """One step: a model of the repository and how its tensors map to the ensemble's."""

    position: int  # in ensemble_scheduling.step
    model_name: str
    model_version: int  # -1: the newest ready version
    input_map: tuple[tuple[str, str], ...]  # (step model input, ensemble tensor)
    output_map: tuple[tuple[str, str], ...]  # (step model output, ensemble tensor)

    @property
    def where(self) -> str:
        return f"step {self.position} (model {self.model_name!r})"

    @property
    def version(self) -> str:
        """The version to request, as a request gives it ("" for the newest)."""
        return "" if self.model_version == -1 else str(self.model_version)

    def to_json(self) -> dict:
        return {"model_name": self.model_name, "model_version": self.model_version,
                "input_map": dict(self.input_map), "output_map": dict(self.output_map)}


@dataclass(frozen=True)
class TensorDecl:
    """A declared ensemble input or output: its protocol datatype and dims (no batch dimension)."""

    name: str
    datatype: str
    dims: tuple[int, ...]


@dataclass(frozen=True)
class EnsembleConfig:
    """The steps of an ensemble and its declared tensors, checked as far as the file decides."""

    steps: tuple[Step, ...]
    inputs: tuple[TensorDecl, ...] = ()  # () with outputs (): inferred from the steps
    outputs: tuple[TensorDecl, ...] = ()

    @classmethod
    def from_dict(cls, raw: dict, where: str) -> "EnsembleConfig":
        scheduling = raw.get("ensemble_scheduling")
        items = scheduling.get("step") if isinstance(scheduling, dict) else None
        if not isinstance(items, list) or not items:
            raise ConfigError(f"{where}: an ensemble needs ensemble_scheduling.step, a non-empty list of steps")
        steps = tuple(_step(item, position, where) for position, item in enumerate(items))
        inputs = _declared(raw.get("input"), "input", where)
        outputs = _declared(raw.get("output"), "output", where)
        if bool(inputs) != bool(outputs):
            raise ConfigError(f"{where}: declare both the ensemble's 'input' and 'output', or neither (to infer them from the steps)")
        config = cls(steps, inputs, outputs)
        config.check(where)
        return config

    def writers(self) -> dict[str, Step]:
        return {tensor: step for step in self.steps for _, tensor in step.output_map}

    def input_names(self) -> list[str]:
        if self.inputs:
            return [t.name for t in self.inputs]
        written = self.writers()
        return _unique(tensor for step in self.steps for _, tensor in step.input_map if tensor not in written)

    def output_names(self) -> list[str]:
        if self.outputs:
            return [t.name for t in self.outputs]
        read = {tensor for step in self.steps for _, tensor in step.input_map}
        return _unique(tensor for step in self.steps for _, tensor in step.output_map if tensor not in read)

    def check(self, where: str) -> None:
        """Each tensor written by one step, and not also an ensemble input; every tensor read is
        an input or written by a step; every output written; no cycle."""
        writers: dict[str, Step] = {}
        for step in self.steps:
            for _, tensor in step.output_map:
                if tensor in writers:
                    raise ConfigError(f"{where}: ensemble tensor {tensor!r} is written by both {writers[tensor].where} "
                                      f"and {step.where}")
                writers[tensor] = step
        inputs = set(self.input_names())
        for tensor in inputs & set(writers):
            raise ConfigError(f"{where}: ensemble input {tensor!r} is also written by {writers[tensor].where}")
        for step in self.steps:
            for model_input, tensor in step.input_map:
                if tensor not in inputs and tensor not in writers:
                    raise ConfigError(f"{where}: {step.where}: input {model_input!r} is mapped from tensor {tensor!r}, which is "
                                      f"neither an ensemble input ({sorted(inputs)}) nor written by any step")
        self.waves(where)
        for tensor in self.output_names():
            if tensor not in writers:
                raise ConfigError(f"{where}: ensemble output {tensor!r} is written by no step (no output_map maps to it)")
        if not self.output_names():
            raise ConfigError(f"{where}: the ensemble has no output: every tensor its steps write is read by another step")

    def waves(self, where: str) -> list[list[Step]]:
        """The steps in dependency order, grouped so that each group needs only earlier ones;
        a ConfigError naming the steps of a cycle."""
        writers = self.writers()
        needs = {step: {writers[t] for _, t in step.input_map if t in writers} for step in self.steps}
        done: set[Step] = set()
        waves = []
        while len(done) < len(self.steps):
            wave = [step for step in self.steps if step not in done and needs[step] <= done]
            if not wave:
                stuck = [step for step in self.steps if step not in done]
                cycle = " -> ".join(s.where for s in _cycle(stuck, needs))
                raise ConfigError(f"{where}: the ensemble's steps form a cycle: {cycle}")
            waves.append(wave)
            done.update(wave)
        return waves

    def to_json(self) -> dict:
        return {"step": [step.to_json() for step in self.steps]}


def _cycle(stuck: list[Step], needs: dict[Step, set[Step]]) -> list[Step]:
    """One cycle among ``stuck`` (steps each needing another stuck step), first step repeated last."""
    path, step = [], stuck[0]
    while step not in path:
        path.append(step)
        step = min((s for s in needs[step] if s in stuck), key=lambda s: s.position)
    return path[path.index(step):] + [step]


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _step(item: Any, position: int, where: str) -> Step:
    here = f"{where}: ensemble_scheduling.step[{position}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{here} must be an object with model_name, input_map and output_map")
    unknown = sorted(set(item) - {"model_name", "model_version", "input_map", "output_map"})
    if unknown:
        raise ConfigError(f"{here}: unknown field(s) {unknown}; known fields are model_name, model_version, input_map, output_map")
    name = item.get("model_name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{here}: model_name must be a model's name")
    version = item.get("model_version", -1)
    if isinstance(version, str) and version.lstrip("-").isdigit():  # protobuf JSON writes int64 as a string
        version = int(version)
    if not isinstance(version, int) or isinstance(version, bool) or (version < 1 and version != -1):
        raise ConfigError(f"{here} (model {name!r}): model_version must be -1 (the newest) or a version number, got {version!r}")
    maps = []
    for key in ("input_map", "output_map"):
        mapping = item.get(key)
        if not isinstance(mapping, dict) or not mapping or not all(isinstance(k, str) and isinstance(v, str) and v
                                                                    for k, v in mapping.items()):
            raise ConfigError(f"{here} (model {name!r}): {key} must be a non-empty object of "
                              f"{'model input' if key == 'input_map' else 'model output'} -> ensemble tensor name")
        maps.append(tuple(mapping.items()))
    return Step(position, name, version, maps[0], maps[1])


def _declared(raw: Any, kind: str, where: str) -> tuple[TensorDecl, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: {kind} must be a non-empty list of {{\"name\", \"data_type\", \"dims\"}}")
    declared = []
    for position, item in enumerate(raw):
        here = f"{where}: {kind}[{position}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{here} must be an object with a string 'name'")
        type_name = item.get("data_type")
        datatype = _TYPE_NAMES.get(type_name, type_name if type_name in datatypes.CONFIG_TYPE_NAMES else None)
        if datatype is None:
            raise ConfigError(f"{here} ({item['name']!r}): data_type {type_name!r} is not one of {sorted(_TYPE_NAMES)}")
        dims = item.get("dims")
        if isinstance(dims, list):  # protobuf JSON writes int64 as strings
            dims = [int(d) if isinstance(d, str) and d.lstrip("-").isdigit() else d for d in dims]
        if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) and (d > 0 or d == -1) for d in dims):
            raise ConfigError(f"{here} ({item['name']!r}): dims must be a list of positive sizes or -1, got {dims!r}")
        declared.append(TensorDecl(item["name"], datatype, tuple(dims)))
    names = [t.name for t in declared]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: {kind} names a tensor more than once: {names}")
    return tuple(declared)


@dataclass(frozen=True)
class TensorSpec:
    """An ensemble input or output as the server describes tensors (``edge_runtime.TensorSpec``'s fields)."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


Feeds = dict[str, np.ndarray]
# run_step(step, its feeds by step-model input name) -> its outputs by step-model output name
StepRunner = Callable[[Step, Feeds], Awaitable[Feeds]]


class Ensemble:
    """A resolved ensemble: what a model version holds in place of a backend and a batcher."""

    platform = ENSEMBLE_PLATFORM

    def __init__(self, config: EnsembleConfig, inputs: list[TensorSpec], outputs: list[TensorSpec],
                 waves: list[list[Step]], max_batch_size: int):
        self.metadata: dict[str, str] = {}  # a backend's exporter metadata: an ensemble has none
        self.config = config
        self.inputs = inputs
        self.outputs = outputs
        self.waves = waves
        self.max_batch_size = max_batch_size

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.config.steps

    @classmethod
    def resolve(cls, config: EnsembleConfig, max_batch_size: int | None, lookup: Callable[[Step], Any], where: str) -> "Ensemble":
        """Check the steps against the versions ``lookup(step)`` gives (each with ``inputs``,
        ``outputs`` and ``max_batch_size``; it raises for a step whose model is not served)."""
        served = {step: lookup(step) for step in config.steps}
        types: dict[str, tuple[np.dtype, tuple[int, ...], str]] = {}  # tensor -> dtype, shape, who writes it
        for step, mv in served.items():
            outputs = {s.name: s for s in mv.outputs}
            for model_output, tensor in step.output_map:
                spec = outputs.get(model_output)
                if spec is None:
                    raise ConfigError(f"{where}: {step.where}: output_map names {model_output!r}, which model "
                                      f"{step.model_name!r} does not have; its outputs: {sorted(outputs)}")
                types[tensor] = (spec.dtype, tuple(spec.shape), f"output {model_output!r} of {step.where}")
        readers: dict[str, tuple[np.dtype, tuple[int, ...], str]] = {}
        for step, mv in served.items():
            inputs = {s.name: s for s in mv.inputs}
            mapped = dict(step.input_map)
            for model_input in inputs:
                if model_input not in mapped:
                    raise ConfigError(f"{where}: {step.where}: input {model_input!r} of model {step.model_name!r} is not "
                                      f"mapped (input_map maps {sorted(mapped)})")
            for model_input, tensor in step.input_map:
                spec = inputs.get(model_input)
                if spec is None:
                    raise ConfigError(f"{where}: {step.where}: input_map names {model_input!r}, which model "
                                      f"{step.model_name!r} does not have; its inputs: {sorted(inputs)}")
                wanted = (spec.dtype, tuple(spec.shape), f"input {model_input!r} of {step.where}")
                for known in (types.get(tensor), readers.get(tensor)):
                    if known is not None and known[0] != spec.dtype:
                        raise ConfigError(f"{where}: tensor {tensor!r} is {datatypes.from_numpy(known[0])} as {known[2]} "
                                          f"but {datatypes.from_numpy(spec.dtype)} as {wanted[2]}")
                readers.setdefault(tensor, wanted)
        batch_limits = [mv.max_batch_size for mv in served.values()]
        if max_batch_size is None:
            max_batch_size = min(batch_limits) if all(limit > 0 for limit in batch_limits) else 0
        for step, mv in served.items():
            if max_batch_size > mv.max_batch_size:
                raise ConfigError(f"{where}: max_batch_size {max_batch_size} is over {step.where}'s max_batch_size "
                                  f"{mv.max_batch_size}")
        batch = (-1,) if max_batch_size > 0 else ()
        inputs = [_spec(name, readers[name], config.inputs, batch, where, "input") for name in config.input_names()]
        outputs = [_spec(name, types[name], config.outputs, batch, where, "output") for name in config.output_names()]
        return cls(config, inputs, outputs, config.waves(where), max_batch_size)

    async def run(self, feeds: Feeds, run_step: StepRunner) -> Feeds:
        """The ensemble's outputs for ``feeds`` (its inputs by name), each step through ``run_step``."""
        tensors = dict(feeds)
        for wave in self.waves:
            if len(wave) == 1:
                results = [await run_step(wave[0], _step_feeds(wave[0], tensors))]
            else:
                results = await asyncio.gather(*(run_step(step, _step_feeds(step, tensors)) for step in wave))
            for step, outputs in zip(wave, results):
                for model_output, tensor in step.output_map:
                    tensors[tensor] = outputs[model_output]
        return {spec.name: tensors[spec.name] for spec in self.outputs}

    def config_json(self) -> dict:
        """The Triton configuration fields particular to an ensemble."""
        return {"ensemble_scheduling": self.config.to_json()}


def _step_feeds(step: Step, tensors: Feeds) -> Feeds:
    return {model_input: tensors[tensor] for model_input, tensor in step.input_map}


def _spec(name: str, known: tuple[np.dtype, tuple[int, ...], str], declared: tuple[TensorDecl, ...], batch: tuple[int, ...],
          where: str, kind: str) -> TensorSpec:
    dtype, shape, who = known
    for decl in declared:
        if decl.name == name:
            if datatypes.to_numpy(decl.datatype) != dtype:
                raise ConfigError(f"{where}: ensemble {kind} {name!r} is declared {decl.datatype} but is "
                                  f"{datatypes.from_numpy(dtype)} as {who}")
            return TensorSpec(name, dtype, batch + decl.dims)
    return TensorSpec(name, dtype, shape)
