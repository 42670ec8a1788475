"""The device seam on the CPU: what stays on the host, how values cross, and the CuPy compat layer
(checked over NumPy and over a stand-in with CuPy's narrower signatures)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from edge_runtime import devices
from edge_runtime.devices import HOST, ArrayDevice, host_only, open_device
from edge_runtime.plan import _placed
from edge_runtime.xp_compat import compat_namespace


class Boxed:
    """A stand-in device array: a host array in a box, so every crossing is visible."""

    def __init__(self, array):
        self.array = array


class BoxDevice(ArrayDevice):
    def __init__(self):
        super().__init__("box", np, Boxed)
        self.uploads = 0

    def upload(self, array):
        self.uploads += 1
        return Boxed(array)

    def download(self, array):
        return array.array


def test_strings_objects_and_bfloat16_stay_on_the_host() -> None:
    assert host_only(np.array(["a"], dtype=object))
    assert host_only(np.array(["a"]))
    assert host_only([np.zeros(2, np.float32), np.array([b"x"], dtype=object)])
    assert not host_only(np.zeros(2, np.float16))
    assert not host_only([np.zeros(2, np.int64)])
    assert not host_only(None)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert host_only(np.zeros(2, ml_dtypes.bfloat16))


def test_values_cross_element_by_element_and_strings_never_go_up() -> None:
    device = BoxDevice()
    text = np.array(["x"], dtype=object)
    up = device.to_device([np.ones(2, np.float32), text, None, 3])
    assert isinstance(up[0], Boxed) and up[1] is text and up[2] is None and up[3] == 3
    down = device.to_host(up)
    assert isinstance(down[0], np.ndarray) and down[1] is text
    assert device.uploads == 1


def test_a_step_with_a_host_only_input_runs_on_numpy_with_its_inputs_brought_down() -> None:
    device = BoxDevice()
    on_device = device.to_device(np.ones(2, np.float32))
    xp, values = _placed(device, [on_device, np.array(["a", "b"], dtype=object)])
    assert xp is np and isinstance(values[0], np.ndarray)
    xp, values = _placed(device, [on_device, np.zeros(2, np.float32)])
    assert xp is device.xp and all(isinstance(v, Boxed) for v in values)


def test_the_host_device_copies_nothing() -> None:
    x = np.ones(3)
    assert open_device("cpu") is HOST and HOST.to_device(x) is x and HOST.to_host(x) is x
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        open_device("tpu")


def test_gpu_without_cupy_fails_with_what_is_missing(monkeypatch) -> None:
    def no_module(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(devices.importlib, "import_module", no_module)
    with pytest.raises(RuntimeError, match="device 'gpu' needs CuPy and a CUDA GPU"):
        open_device("gpu")


def narrow_numpy() -> types.ModuleType:
    """NumPy with CuPy's signatures for the calls the compat layer replaces."""
    base = types.ModuleType("narrow")
    base.__dict__.update(vars(np))

    def as_strided(x, shape=None, strides=None):
        return np.lib.stride_tricks.as_strided(x, shape, strides)

    def indices(dimensions, dtype=int):
        return np.indices(dimensions, dtype=dtype)

    base.lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(as_strided=as_strided))
    base.indices = indices
    return base


@pytest.mark.parametrize("base", [np, narrow_numpy()], ids=["numpy", "cupy-like"])
def test_compat_namespace_takes_numpy_signatures(base) -> None:
    xp = compat_namespace(base)
    assert xp.__name__ == base.__name__ and xp.float32 is np.float32
    x = np.arange(6.0)
    view = xp.lib.stride_tricks.as_strided(x, (4, 3), (8, 8), writeable=False)
    np.testing.assert_array_equal(view[1], [1, 2, 3])
    sparse = xp.indices((2, 3), sparse=True)
    for got, want in zip(sparse, np.indices((2, 3), sparse=True)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xp.indices((2, 3)), np.indices((2, 3)))


@pytest.mark.parametrize("index_shape, data_shape", [((7,), (4,)), ((5,), (4, 3)), ((2, 3), (3, 3))])
def test_multiply_at_in_rounds_equals_numpy(index_shape, data_shape) -> None:
    rng = np.random.default_rng(len(index_shape) + len(data_shape))
    lead = len(index_shape) if len(index_shape) == len(data_shape) else 1
    index = tuple(rng.integers(-data_shape[k], data_shape[k], index_shape) for k in range(lead))
    updates = rng.uniform(0.5, 2, index_shape + data_shape[lead:]).astype(np.float32)
    want = rng.standard_normal(data_shape).astype(np.float32)
    got = want.copy()
    np.multiply.at(want, index, updates)
    compat_namespace(np).multiply.at(got, index, updates)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_compat_multiply_still_multiplies() -> None:
    xp = compat_namespace(np)
    out = np.empty(3)
    xp.multiply(np.arange(3.0), 2.0, out=out)
    np.testing.assert_array_equal(out, [0, 2, 4])
    assert xp.multiply.reduce(np.array([2.0, 3.0])) == 6.0
