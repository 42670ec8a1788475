"""A GPU partition's inputs that no step of it produces (feeds, constants placed elsewhere) get
device copies: constants once at plan time, feeds once per run. Checked with a stand-in device."""

from __future__ import annotations

import numpy as np

from edge_runtime.devices import HOST
from tests.edge_runtime.test_devices import BoxDevice, Boxed
from trainer.devices import stage_host_inputs


class FakeStep:
    def __init__(self, ins, outs):
        self.ins, self.outs = tuple(ins), outs


class FakeDevice:
    def __init__(self, backend):
        self.backend = backend

    def from_host(self, value):
        return self.backend.to_device(value)


def test_constants_are_copied_once_and_feeds_are_staged_per_run() -> None:
    box = BoxDevice()
    devices = {"CPU:0": FakeDevice(HOST), "GPU:0": FakeDevice(box)}
    weight = np.ones((2, 2), np.float32)
    template = [None, weight, None, None, None]  # 0: feed, 1: host constant, 2..4: step outputs
    cpu_step = FakeStep([0, 1], 2)
    gpu_first = FakeStep([0, 1], 3)
    gpu_second = FakeStep([3, 1, 0], 4)
    uploads = stage_host_inputs([("CPU:0", [cpu_step]), ("GPU:0", [gpu_first, gpu_second])], template, [0],
                                devices.__getitem__)
    assert cpu_step.ins == (0, 1), "host steps read the host values"
    feed_copy, weight_copy = gpu_first.ins
    assert gpu_second.ins == (3, weight_copy, feed_copy), "one copy per value, shared by the partition's steps"
    assert isinstance(template[weight_copy], Boxed) and box.uploads == 1
    assert uploads == [(0, feed_copy, devices["GPU:0"])] and template[feed_copy] is None
