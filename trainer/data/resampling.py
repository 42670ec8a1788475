"""``tf.data.experimental.rejection_resample``: elements drawn so that their classes follow a target
distribution, by TensorFlow 1.15's scheme.

With ``p`` the input's class distribution (``initial_dist``, or estimated from the classes seen so
far) and ``t`` the target, ``r = t / p`` (0 where undefined), ``m = min(r)``: each output comes, with
probability ``m``, straight from one pass over the input, else from a second pass in which an
element of class ``c`` is kept with probability ``(r[c] - m) / (max(r) - m)``. Elements are
``(class, element)``. The draws are NumPy's, so the exact sequence differs from TensorFlow's; the
distribution is the same.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.dataset import Dataset
from trainer.data.structure import DataStructureError, flatten
from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["RejectionResampleDataset", "rejection_resample"]


def acceptance_and_mixing(initial: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """``(a, m)``: each class's acceptance probability in the filtered pass and the probability of
    taking an element from the unfiltered pass instead."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = target / initial
    ratio = np.where(np.isnan(ratio), 0.0, ratio)
    low, high = float(ratio.min()), float(ratio.max())
    if high == low:
        return np.ones_like(ratio), 1.0 if np.isfinite(low) else 0.0
    with np.errstate(invalid="ignore"):
        accept = (ratio - low) / (high - low)
    return np.where(np.isnan(accept), 1.0, accept), min(low, 1.0)


def _distribution(value, what: str) -> np.ndarray:
    dist = np.asarray(value, np.float64)
    if dist.ndim != 1 or not len(dist) or (dist < 0).any() or not np.isclose(dist.sum(), 1.0):
        raise ValueError(f"rejection_resample: {what} must be a vector of class probabilities summing to 1, got "
                         f"{np.asarray(value).tolist()}")
    return dist


class RejectionResampleDataset(Dataset):
    """Over ``(class, element)`` pairs: see the module docstring."""

    def __init__(self, classed: Dataset, target, initial, seed):
        self.input = classed
        self.target = _distribution(target, "target_dist")
        self.initial = None if initial is None else _distribution(initial, "initial_dist")
        if self.initial is not None and len(self.initial) != len(self.target):
            raise ValueError(f"rejection_resample: initial_dist has {len(self.initial)} classes, target_dist "
                             f"{len(self.target)}")
        self.seed = seed
        self.element_spec = classed.element_spec

    def input_datasets(self):
        return [self.input]

    def _class(self, comps) -> int:
        c = int(np.asarray(comps[0]).reshape(()))
        if not 0 <= c < len(self.target):
            raise InvalidArgumentError(f"rejection_resample: class_func gave class {c}, not in [0, "
                                       f"{len(self.target)}) (the classes of target_dist)")
        return c

    def elements(self, ctx):
        pipeline_seed, n = ctx.next_pass(self)
        rng = np.random.default_rng([pipeline_seed if self.seed is None else int(self.seed), n])
        counts = np.zeros(len(self.target))
        original, filtered = self.input.elements(ctx), self.input.elements(ctx)
        live = [True, True]

        def dist() -> np.ndarray:
            return self.initial if self.initial is not None else counts / max(counts.sum(), 1.0)

        def next_accepted():
            for comps in filtered:
                c = self._class(comps)
                counts[c] += 1
                accept, _ = acceptance_and_mixing(dist(), self.target)
                if rng.random() < accept[c]:
                    return comps
            return None

        try:
            while any(live):
                seen = dist()
                _, mix = acceptance_and_mixing(seen, self.target) if seen.sum() > 0 else (None, 0.0)
                use_original = live[0] and (not live[1] or rng.random() < mix)
                comps = next(original, None) if use_original else next_accepted()
                if comps is None:
                    live[0 if use_original else 1] = False
                    continue
                if use_original:
                    self._class(comps)
                yield comps
        finally:
            original.close()
            filtered.close()


def rejection_resample(class_func: Callable, target_dist, initial_dist=None,
                       seed: int | None = None) -> Callable[[Dataset], Dataset]:
    """Resamples so that the integer ``class_func(element)`` follows ``target_dist``; elements
    become ``(class, element)``."""
    def apply(dataset: Dataset) -> Dataset:
        classes = dataset.map(class_func)
        specs = flatten(classes.element_spec)
        if len(specs) != 1 or np.dtype(specs[0].dtype).kind not in "iu" or specs[0].shape not in ((), None):
            raise DataStructureError(f"rejection_resample: class_func must return a scalar integer tensor, got "
                                     f"{classes.output_types} of shape {classes.output_shapes}")
        return RejectionResampleDataset(Dataset.zip((classes, dataset)), target_dist, initial_dist, seed)

    return apply
