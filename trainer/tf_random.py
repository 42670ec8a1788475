"""``tf.random``: TF 1.15's random namespace, resolved to flowstack's ``tf.random_*`` functions."""

from __future__ import annotations

from trainer.tf1_aliases import resolve

_RENAMED = {"uniform": "random_uniform", "normal": "random_normal", "shuffle": "random_shuffle",
            "categorical": "multinomial", "gamma": "random_gamma", "poisson": "random_poisson"}


def __getattr__(name: str):
    return resolve("tf.random", name, _RENAMED, globals())
