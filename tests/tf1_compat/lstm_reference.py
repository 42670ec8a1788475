"""TensorFlow 1.x's LSTM written from its published equations in NumPy, independent of our kernels:
one kernel [depth + units, 4 units] and bias [4 units] whose column blocks are the gates i, j, f, o,

    new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j),   new_h = tanh(new_c) * sigmoid(o),

with LSTMCell's options (peepholes, cell and projection clipping, a projection of h)."""

from __future__ import annotations

import numpy as np


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def tf_lstm(xs, kernel, bias, forget_bias, c=None, h=None, *, peepholes=None, cell_clip=None, projection=None,
            proj_clip=None, act=np.tanh):
    """TF's LSTM over time-major ``xs`` [time, batch, depth]: (outputs [time, batch, out], c, h); LSTMCell's
    options: ``peepholes`` {"i", "f", "o": [units]}, ``cell_clip``, ``projection`` [units, out], ``proj_clip``."""
    units = kernel.shape[1] // 4
    peep = peepholes or {"i": 0.0, "f": 0.0, "o": 0.0}
    c = np.zeros((xs.shape[1], units)) if c is None else c
    h = np.zeros((xs.shape[1], units if projection is None else projection.shape[1])) if h is None else h
    outputs = []
    for x in xs:
        z = np.concatenate([x, h], axis=1) @ kernel + bias
        i, j, f, o = z[:, :units], z[:, units:2 * units], z[:, 2 * units:3 * units], z[:, 3 * units:]
        c = c * sigmoid(f + forget_bias + peep["f"] * c) + sigmoid(i + peep["i"] * c) * act(j)
        if cell_clip is not None:
            c = np.clip(c, -cell_clip, cell_clip)
        h = act(c) * sigmoid(o + peep["o"] * c)
        if projection is not None:
            h = h @ projection
            if proj_clip is not None:
                h = np.clip(h, -proj_clip, proj_clip)
        outputs.append(h)
    return (np.stack(outputs) if outputs else np.zeros((0,) + h.shape)), c, h


def tf_values(seed: int, depth: int, units: int):
    """A kernel and bias, each gate's block on a different scale so a mixed-up order shows."""
    rng = np.random.default_rng(seed)
    scale = np.repeat([0.9, 0.5, 0.7, 1.1], units)
    kernel = rng.uniform(-1, 1, (depth + units, 4 * units)) * scale
    bias = rng.uniform(-1, 1, 4 * units) * scale
    return kernel, bias
