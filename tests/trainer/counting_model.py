"""A model whose variable counts the steps trained, for checkpoint tests: its value is the progress a
restore resumes with, so a lost or repeated step shows in the number."""

from __future__ import annotations

import numpy as np

import trainer as T


def counting_model(width: int, name: str = "v"):
    """(graph, variable ``name`` of ``width`` zeros, train op adding one to it and to the global step)."""
    g = T.Graph()
    with g.as_default():
        v = T.Variable(np.zeros(width, np.float32), name=name)
        step = T.train.get_or_create_global_step()
        with T.control_dependencies([v.assign_add(np.ones(width, np.float32))]):
            train = step.assign_add(np.int64(1))
    return g, v, train
