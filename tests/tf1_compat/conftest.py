"""scikit-learn's digits, split once, as TF1 tutorials feed MNIST: float pixels in [0, 1], one-hot labels."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import trainer as tf


@pytest.fixture(scope="session")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    onehot = np.eye(10, dtype=np.float32)[y]
    n = 1400
    return {"x_train": x[:n], "y_train": y[:n], "y_train_1h": onehot[:n],
            "x_test": x[n:], "y_test": y[n:], "y_test_1h": onehot[n:]}


@pytest.fixture(autouse=True)
def fresh_graph():
    """Each script starts as a TF1 script does: on an empty default graph."""
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


@pytest.fixture
def tf_log(caplog):
    """What ``tf.logging`` (the "tensorflow" logger) says, whatever other tests did to its level,
    handlers or propagation."""
    logger = logging.getLogger("tensorflow")
    logger.addHandler(caplog.handler)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        yield caplog
    logger.removeHandler(caplog.handler)
