"""``tf.nn.fractional_max_pool`` and ``tf.nn.fractional_avg_pool`` (Graham, "Fractional
Max-Pooling", 2014), TensorFlow 1.15's: pooling regions of random sizes (k or k + 1 rows and
columns, k = floor(ratio)) so the output is floor(input / ratio) for non-integer ratios.

Each returns ``(output, row_pooling_sequence, col_pooling_sequence)``: the region boundaries drawn
for this run. ``pseudo_random`` draws boundaries as ceil(alpha (i + u)) (else a random mix of
widths), ``overlapping`` lets neighbouring regions share their boundary row/column,
``deterministic`` draws the same regions every run (seeded by seed and seed2). Gradients route each
region's gradient to its first max (max) or spread it evenly (avg), as TF's do.
"""

from __future__ import annotations

from trainer.graph import TRAINER_DOMAIN
from trainer.ops import convert_to_tensor, make_op

__all__ = ["fractional_avg_pool", "fractional_max_pool"]


def _pool(op_type: str, value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2, name):
    ratio = [float(r) for r in pooling_ratio]
    x = convert_to_tensor(value)
    attrs = {"pooling_ratio": ratio, "pseudo_random": int(bool(pseudo_random)), "overlapping": int(bool(overlapping)),
             "deterministic": int(bool(deterministic)), "seed": int(seed), "seed2": int(seed2)}
    node = make_op(op_type, [x], attrs, domain=TRAINER_DOMAIN, name=name or op_type)
    node.attrs["stream"] = node.name  # the op's own random stream in each session
    return tuple(node.outputs)


def fractional_max_pool(value, pooling_ratio, pseudo_random: bool = False, overlapping: bool = False,
                        deterministic: bool = False, seed: int = 0, seed2: int = 0, name=None):
    """Max over random regions of ``value`` [batch, height, width, channels]; ``pooling_ratio`` is
    [1.0, row_ratio, col_ratio, 1.0] (each >= 1)."""
    return _pool("FractionalMaxPool", value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2,
                 name)


def fractional_avg_pool(value, pooling_ratio, pseudo_random: bool = False, overlapping: bool = False,
                        deterministic: bool = False, seed: int = 0, seed2: int = 0, name=None):
    """The mean over ``fractional_max_pool``'s kind of regions."""
    return _pool("FractionalAvgPool", value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2,
                 name)
