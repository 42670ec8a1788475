"""``tf.keras.preprocessing.sequence``: lists of token ids made into one padded array."""

from __future__ import annotations

import numpy as np

__all__ = ["pad_sequences"]


def pad_sequences(sequences, maxlen: int | None = None, dtype="int32", padding: str = "pre",
                  truncating: str = "pre", value=0.0) -> np.ndarray:
    """[n, maxlen] (``maxlen`` defaults to the longest): each sequence cut at the start (``truncating="pre"``)
    or end, and padded with ``value`` before (``padding="pre"``) or after it, as Keras does.

    >>> pad_sequences([[1, 2, 3], [4]], maxlen=2).tolist()
    [[2, 3], [0, 4]]
    """
    for name, option in (("padding", padding), ("truncating", truncating)):
        if option not in ("pre", "post"):
            raise ValueError(f'{name} type "{option}" not understood (expected "pre" or "post")')
    sequences = [list(s) for s in sequences]
    maxlen = maxlen if maxlen is not None else max((len(s) for s in sequences), default=0)
    trailing = next((np.asarray(s).shape[1:] for s in sequences if len(s)), ())
    out = np.full((len(sequences), maxlen) + trailing, value, dtype=dtype)
    for i, s in enumerate(sequences):
        if not s or maxlen == 0:
            continue
        kept = np.asarray(s[-maxlen:] if truncating == "pre" else s[:maxlen], dtype=dtype)
        if padding == "post":
            out[i, :len(kept)] = kept
        else:
            out[i, maxlen - len(kept):] = kept
    return out
