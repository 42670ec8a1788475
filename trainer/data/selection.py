"""Datasets that draw each element from one of several inputs: at random by weights
(``tf.data.experimental.sample_from_datasets``) or as a dataset of indices says
(``choose_from_datasets``). An input that runs out is skipped from then on, as TensorFlow 1.x's
directed interleave does; the output ends when every input has (or the choices run out)."""

from __future__ import annotations

import numpy as np

from trainer.data.dataset import Dataset
from trainer.data.structure import DataStructureError, describe, flatten
from trainer.graph import Tensor


def _kinds(spec) -> str:
    """An element's nesting and component dtypes, as ``(x, x) [float32, int64]``."""
    return f"{describe(spec)} [{', '.join(np.dtype(s.dtype).name for s in flatten(spec))}]"


def _same_structure(datasets) -> None:
    if not datasets or not all(isinstance(d, Dataset) for d in datasets):
        raise DataStructureError("datasets must be a non-empty list of Datasets")
    first = _kinds(datasets[0].element_spec)
    for i, d in enumerate(datasets[1:], 1):
        if _kinds(d.element_spec) != first:
            raise DataStructureError(f"datasets[{i}] gives {_kinds(d.element_spec)}, datasets[0] gives {first}: "
                                     "all must give the same structure and types")


class SampleDataset(Dataset):
    """Each element from input i with probability ``weights[i]`` (renormalized over the inputs left)."""

    def __init__(self, datasets, weights, seed):
        self.datasets = list(datasets)
        _same_structure(self.datasets)
        if weights is None:
            weights = np.full(len(self.datasets), 1.0 / len(self.datasets))
        self.weights = weights if isinstance(weights, Tensor) else np.asarray(weights, np.float64)
        if not isinstance(self.weights, Tensor):
            if self.weights.shape != (len(self.datasets),) or (self.weights < 0).any() or self.weights.sum() <= 0:
                raise ValueError(f"weights must be {len(self.datasets)} non-negative numbers, not all 0, "
                                 f"got {weights!r}")
        self.seed = None if seed is None else int(seed)
        self.element_spec = self.datasets[0].element_spec

    def input_datasets(self):
        return self.datasets

    def _own_captured(self):
        return [self.weights] if isinstance(self.weights, Tensor) else []

    def elements(self, ctx):
        pipeline_seed, n = ctx.next_pass(self)
        rng = np.random.default_rng([self.seed if self.seed is not None else pipeline_seed, n])
        weights = np.asarray(ctx.value(self.weights) if isinstance(self.weights, Tensor) else self.weights, np.float64)
        iters = [d.elements(ctx) for d in self.datasets]
        live = weights > 0
        try:
            while live.any():
                p = np.where(live, weights, 0.0)
                i = int(rng.choice(len(iters), p=p / p.sum()))
                comps = next(iters[i], None)
                if comps is None:
                    live[i] = False
                    continue
                yield comps
        finally:
            for it in iters:
                it.close()


class ChooseDataset(Dataset):
    """Each element from input ``choice``, for each scalar int64 ``choice`` of ``choice_dataset``."""

    def __init__(self, datasets, choice_dataset: Dataset):
        self.datasets = list(datasets)
        _same_structure(self.datasets)
        specs = flatten(choice_dataset.element_spec) if isinstance(choice_dataset, Dataset) else []
        if len(specs) != 1 or np.dtype(specs[0].dtype) != np.int64 or specs[0].shape not in (None, ()):
            got = _kinds(choice_dataset.element_spec) if isinstance(choice_dataset, Dataset) else \
                type(choice_dataset).__name__
            raise DataStructureError(f"choice_dataset must give scalar int64 elements, gives {got}")
        self.choices = choice_dataset
        self.element_spec = self.datasets[0].element_spec

    def input_datasets(self):
        return self.datasets + [self.choices]

    def elements(self, ctx):
        iters = [d.elements(ctx) for d in self.datasets]
        done = [False] * len(iters)
        choices = self.choices.elements(ctx)
        try:
            for (choice,) in choices:
                i = int(np.asarray(choice).reshape(()))
                if not 0 <= i < len(iters):
                    raise ValueError(f"choose_from_datasets: choice {i} is not in [0, {len(iters)})")
                if done[i]:
                    continue
                comps = next(iters[i], None)
                if comps is None:
                    done[i] = True
                    continue
                yield comps
        finally:
            choices.close()
            for it in iters:
                it.close()
