"""A GPU partition's inputs that no step of it produces (feeds, constants placed elsewhere) get
device copies: constants once at plan time, feeds once per run, except the inputs a kernel reads as
host values (shapes, axes). Checked with a stand-in device; the lowering side is checked on a graph."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import trainer as T
from edge_runtime.devices import HOST
from tests.edge_runtime.test_devices import BoxDevice, Boxed
from trainer.devices import stage_host_inputs
from trainer.passes.lower import host_read_tensors


class FakeStep:
    def __init__(self, ins, outs, op_type: str = "Add"):
        self.ins, self.outs = tuple(ins), outs
        self.node = SimpleNamespace(op_type=op_type, domain="")


class FakeDevice:
    def __init__(self, backend):
        self.backend = backend

    def from_host(self, value):
        return self.backend.to_device(value)


def test_constants_are_copied_once_and_feeds_are_staged_per_run() -> None:
    box = BoxDevice()
    devices = {"CPU:0": FakeDevice(HOST), "GPU:0": FakeDevice(box)}
    weight = np.ones((2, 2), np.float32)
    shape = np.asarray([4, 1], np.int64)
    template = [None, weight, None, None, None, shape, None]  # 0: feed, 1 and 5: host constants, others: outputs
    cpu_step = FakeStep([0, 1], 2)
    gpu_first = FakeStep([0, 1], 3)
    gpu_second = FakeStep([3, 1, 0], 4)
    gpu_reshape = FakeStep([4, 5], 6, "Reshape")
    uploads = stage_host_inputs([("CPU:0", [cpu_step]), ("GPU:0", [gpu_first, gpu_second, gpu_reshape])], template,
                                [0], devices.__getitem__)
    assert cpu_step.ins == (0, 1), "host steps read the host values"
    feed_copy, weight_copy = gpu_first.ins
    assert gpu_second.ins == (3, weight_copy, feed_copy), "one copy per value, shared by the partition's steps"
    assert isinstance(template[weight_copy], Boxed) and box.uploads == 1
    assert uploads == [(0, feed_copy, devices["GPU:0"])] and template[feed_copy] is None
    assert gpu_reshape.ins == (4, 5) and template[5] is shape, "a shape input stays on the host"


def test_constants_read_only_as_shapes_or_axes_are_host_read() -> None:
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 4))
        shape = T.constant(np.asarray([-1, 2], np.int64))
        repeats = T.constant(np.asarray([2, 1], np.int64))
        both = T.constant(np.asarray([1], np.int64))
        T.tile(T.reshape(x, shape), repeats)
        T.reshape(x, both) + T.cast(both, np.float32)
    host = host_read_tensors(g.get_operations())
    assert shape in host and repeats in host, "read only as a Reshape shape and Tile repeats"
    assert both not in host and x not in host, "read as data by one of its readers"
