"""``tf.math``: TF 1.15's math namespace, resolved to flowstack's ``tf.*`` and ``tf.nn.*`` functions."""

from __future__ import annotations

from trainer.special_math import (  # noqa: F401 - tf.math's own names (not at tf.*)
    bessel_i0, bessel_i0e, bessel_i1, bessel_i1e, betainc, cumulative_logsumexp, igamma, igammac,
    multiply_no_nan, nextafter, polyval, reciprocal_no_nan, reduce_euclidean_norm, reduce_std, reduce_variance,
    xdivy, xlogy)
from trainer.tf1_aliases import resolve

_RENAMED = {"divide_no_nan": "div_no_nan"}


def __getattr__(name: str):
    return resolve("tf.math", name, _RENAMED, globals())
