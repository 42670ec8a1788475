"""Training on ``GPU:0``: the same steps give the CPU's losses and weights, and the variables stay
on the device between steps. Skipped where CuPy finds no GPU."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T


def train_cnn(device: str, steps: int = 4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 1, 12, 12)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    g = T.Graph()
    with g.as_default(), T.device(device):
        xs = T.placeholder(np.float32, (None, 1, 12, 12))
        ys = T.placeholder(np.int64, (None,))
        w1 = T.Variable(rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.3, name="w1")
        h = T.nn.relu(T.nn.conv2d_nchw(xs, w1, padding="VALID"))
        h = T.reshape(T.nn.max_pool_nchw(h, (2, 2)), (-1, 8 * 5 * 5))
        w2 = T.Variable(rng.standard_normal((200, 10)).astype(np.float32) * 0.1, name="w2")
        logits = T.matmul(h, w2)
        loss = T.losses.sparse_softmax_cross_entropy(ys, logits)
        train = T.train.AdamOptimizer(1e-2).minimize(loss)
        init = T.global_variables_initializer()
    session = T.Session(g)
    session.run(init)
    losses = [float(session.run([loss, train], {xs: x, ys: y})[0]) for _ in range(steps)]
    return session, losses, session.variable_values()


@pytest.mark.gpu
def test_training_on_gpu_matches_the_cpu_and_keeps_variables_on_the_device() -> None:
    gpu_session, gpu_losses, gpu_weights = train_cnn("/GPU:0")
    _, cpu_losses, cpu_weights = train_cnn("/CPU:0")
    assert gpu_losses[-1] < gpu_losses[0], f"training lowers the loss: {gpu_losses}"
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-3, atol=1e-4)
    for name in cpu_weights:
        np.testing.assert_allclose(gpu_weights[name], cpu_weights[name], rtol=1e-3, atol=1e-4, err_msg=name)
    stored = [v for v in gpu_session._state.variables.values()]
    assert stored and not any(isinstance(v, np.ndarray) for v in stored), "variables live on the GPU between steps"
