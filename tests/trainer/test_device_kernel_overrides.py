"""A device's own kernels (``Device.kernel_overrides``): lowering uses them for the steps placed on
that device and the portable kernels everywhere else. A CPU device stands in for the GPU here; the
CUDA table itself (``trainer.gpu_kernels``) is checked in ``test_gpu_kernels.py``."""

from __future__ import annotations

import sys

import numpy as np

import trainer as T
from trainer.devices import GPU_KERNELS_MODULE
from trainer.kernels.training import apply_adam


def adam_on_two_devices():
    """Two variables trained by one Adam step each, ``w0`` on CPU:0 and ``w1`` on CPU:1."""
    g = T.Graph()
    with g.as_default():
        with T.device("CPU:0"):
            w0 = T.Variable(np.full((3,), 1.0, np.float32), name="w0")
        with T.device("CPU:1"):
            w1 = T.Variable(np.full((2, 2), 2.0, np.float32), name="w1")
        with T.device("CPU:0"):
            loss = T.reduce_sum(w0 * w0) + T.reduce_sum(w1 * w1)
            train = T.train.AdamOptimizer(0.1).minimize(loss)
            init = T.global_variables_initializer()
    session = T.Session(g, num_cpu_devices=2)
    return session, init, train


def test_a_device_override_replaces_the_kernel_of_steps_placed_on_that_device_only() -> None:
    reference, init, train = adam_on_two_devices()
    reference.run(init)
    reference.run(train)
    expected = reference.variable_values()

    session, init, train = adam_on_two_devices()
    calls = []

    def recording_adam(rctx, var, *inputs, xp):
        calls.append((var.shape, rctx is not None))
        return apply_adam(rctx, var, *inputs, xp=xp)

    session.device("CPU:1").kernel_overrides = {("flowstack", "ApplyAdam"): recording_adam}
    session.run(init)
    session.run(train)
    assert calls == [((2, 2), True)], "only w1's update (on CPU:1) runs the override, with the run context"
    assert session.device("CPU:0").kernel_overrides == {}
    for name, value in expected.items():
        np.testing.assert_array_equal(session.variable_values()[name], value, err_msg=name)


def test_cpu_devices_have_no_overrides_and_never_import_the_gpu_kernels(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, GPU_KERNELS_MODULE, None)  # importing it now raises ImportError
    session, init, train = adam_on_two_devices()
    session.run(init)
    session.run(train)
    assert all(session.device(name).kernel_overrides == {} for name in ("CPU:0", "CPU:1"))
