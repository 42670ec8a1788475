"""The checks ``fit``/``evaluate``/``predict`` make of the arrays they are given, with Keras' messages
("Error when checking input: expected dense_input to have shape (64,) but got array with shape (32,)"),
and the per-sample weights they derive from ``sample_weight`` and ``class_weight``."""

from __future__ import annotations

import numpy as np

from trainer.keras.engine.base_layer import to_list

__all__ = ["class_weights", "standardize_arrays", "standardize_weights", "weight_arrays"]


def standardize_arrays(data, shapes: list[tuple], dtypes: list, names: list[str], what: str) -> list[np.ndarray]:
    """``data`` (an array, a list, or a dict by name) as one array per expected ``shapes`` entry, cast to
    ``dtypes``. A trailing axis of 1 is dropped or added where that is all that differs (sparse targets
    given as (N, 1), binary targets given as (N,))."""
    if isinstance(data, dict):
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"No data provided for {missing}. Need data for each key in: {names}")
        arrays = [data[n] for n in names]
    else:
        arrays = to_list(data) if isinstance(data, (list, tuple)) else [data]
    if len(arrays) != len(shapes):
        raise ValueError(f"Error when checking model {what}: the list of Numpy arrays that you are passing to your "
                         f"model is not the size the model expected. Expected to see {len(shapes)} array(s), but "
                         f"instead got {len(arrays)}.")
    out = []
    for array, shape, dtype, name in zip(arrays, shapes, dtypes, names):
        array = np.asarray(array)
        if array.ndim == len(shape) + 1 and array.shape[-1] == 1:
            array = array.reshape(array.shape[:-1])
        elif array.ndim == len(shape) - 1 and shape[-1] == 1:
            array = array[..., None]
        if array.ndim != len(shape):
            raise ValueError(f"Error when checking {what}: expected {name} to have {len(shape)} dimensions, but got "
                             f"array with shape {array.shape}")
        for expected, got in zip(shape[1:], array.shape[1:]):
            if expected is not None and expected != got:
                raise ValueError(f"Error when checking {what}: expected {name} to have shape {shape[1:]} but got "
                                 f"array with shape {array.shape[1:]}")
        out.append(array.astype(dtype, copy=False))
    if len({len(a) for a in out}) > 1:
        raise ValueError(f"All {what} arrays should have the same number of samples. Got array shapes: "
                         f"{[a.shape for a in out]}")
    return out


def standardize_weights(sample_weight, class_weight, ys: list, names: list[str]) -> list | None:
    """One float32 weight per sample for each output (None: all ones), from ``sample_weight`` (an array, a
    list or a dict by output name) or else ``class_weight`` ({class: weight}, or such dicts by output)."""
    weights = [None] * len(ys)
    if sample_weight is not None:
        given = [sample_weight.get(n) for n in names] if isinstance(sample_weight, dict) else \
            list(sample_weight) if isinstance(sample_weight, list) and len(ys) > 1 else [sample_weight]
        if len(given) != len(ys):
            raise ValueError(f"sample_weight: {len(given)} arrays for a model with {len(ys)} outputs")
        for i, (w, y) in enumerate(zip(given, ys)):
            if w is not None:
                w = np.asarray(w, np.float32)
                if w.shape != (len(y),):
                    raise ValueError(f"Found a sample_weight array with shape {w.shape} for an input with shape "
                                     f"{y.shape}. sample_weight cannot be broadcast.")
                weights[i] = w
    if class_weight is not None:
        per_output = [class_weight.get(n) for n in names] if set(class_weight) <= set(names) else \
            [class_weight] * len(ys)
        for i, (table, y) in enumerate(zip(per_output, ys)):
            if table is not None and weights[i] is None:
                weights[i] = class_weights(table, y)
    return weights if any(w is not None for w in weights) else None


def weight_arrays(ys: list, weights: list | None) -> list:
    """The sample-weight feeds: the given weights, ones where none were given."""
    weights = weights or [None] * len(ys)
    return [w if w is not None else np.ones(len(y), np.float32) for w, y in zip(weights, ys)]


def class_weights(table: dict, y: np.ndarray) -> np.ndarray:
    """Each sample's weight from its class: the target itself, or the argmax of a one-hot target."""
    if y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
        classes = y.reshape(len(y)).astype(np.int64)
    elif y.ndim == 2:
        classes = y.argmax(axis=1)
    else:
        raise NotImplementedError("class_weight with temporal targets is not built in flowstack's Keras; pass "
                                  "sample_weight instead")
    missing = sorted(set(np.unique(classes).tolist()) - set(table))
    if missing:
        raise ValueError(f"`class_weight` must contain all classes in the data. The classes {missing} exist in the "
                         "data but not in `class_weight`.")
    return np.asarray([table[c] for c in classes], np.float32)
