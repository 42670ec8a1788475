"""``tf.random``: TF 1.15's random namespace, resolved to flowstack's ``tf.random_*`` functions."""

from __future__ import annotations

from trainer.random_ops import (  # noqa: F401 - tf.random's own names
    fixed_unigram_candidate_sampler, log_uniform_candidate_sampler, uniform_candidate_sampler)
from trainer.stateless_random import (  # noqa: F401
    stateless_categorical, stateless_multinomial, stateless_normal, stateless_truncated_normal, stateless_uniform)
from trainer.tf1_aliases import resolve

_RENAMED = {"uniform": "random_uniform", "normal": "random_normal", "shuffle": "random_shuffle",
            "categorical": "multinomial", "gamma": "random_gamma", "poisson": "random_poisson"}


def __getattr__(name: str):
    return resolve("tf.random", name, _RENAMED, globals())
