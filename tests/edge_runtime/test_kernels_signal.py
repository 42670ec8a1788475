"""signal kernels: DFT/STFT against numpy.fft on the cases the ONNX node suite leaves out
(complex input, padding and truncation, round trips), MelWeightMatrix's triangles, SwiGLU dtypes,
and shape rules that agree with the kernels."""

from __future__ import annotations

import numpy as np
import pytest

from schemas import TensorType, get_schema, infer_types
from schemas.registry import UnsupportedOpError
from tests.edge_runtime.kernel_calls import run_kernel as run

R = np.random.default_rng(0)
F32 = np.dtype(np.float32)


def infer(op: str, *types, values=(), **attrs):
    schema = get_schema(op)
    return infer_types(schema, list(types), schema.resolve_attrs(attrs), input_values=list(values))[0]


def as_complex(y):
    return y[..., 0] + 1j * y[..., 1]


def test_dft_complex_input_along_axis_with_padding_and_truncation():
    z = R.standard_normal((2, 5, 3)) + 1j * R.standard_normal((2, 5, 3))
    x = np.stack([z.real, z.imag], axis=-1)
    for n in (3, 5, 8):
        y = run("DFT", x, np.int64(n), np.int64(1))
        assert y.dtype == x.dtype and y.shape == (2, n, 3, 2)
        np.testing.assert_allclose(as_complex(y), np.fft.fft(z, n=n, axis=1), atol=1e-12)


def test_dft_onesided_and_inverse_round_trip():
    x = R.standard_normal((3, 7, 1)).astype(np.float32)
    half = run("DFT", x, None, None, onesided=1)
    assert half.shape == (3, 4, 2)
    full = run("DFT", x)
    np.testing.assert_allclose(run("DFT", full, inverse=1)[..., 0], x[..., 0], atol=1e-5)
    back = run("DFT", half, np.int64(7), None, inverse=1, onesided=1)
    assert back.shape == x.shape and back.dtype == np.float32
    np.testing.assert_allclose(back, x, atol=1e-5)


def test_dft_rejects_the_complex_axis():
    with pytest.raises(UnsupportedOpError, match="axis"):
        run("DFT", np.zeros((2, 4, 1), np.float32), None, np.int64(-1))


def test_stft_frames_window_and_bins():
    signal = R.standard_normal((2, 20, 1))
    window = np.hanning(8)
    y = run("STFT", signal, np.int64(3), window)
    frames = np.stack([signal[:, s : s + 8, 0] * window for s in range(0, 13, 3)], axis=1)
    assert y.shape == (2, 5, 5, 2)
    np.testing.assert_allclose(as_complex(y), np.fft.rfft(frames, axis=-1), atol=1e-12)
    two_sided = run("STFT", signal, np.int64(3), None, np.int64(8), onesided=0)
    assert two_sided.shape == (2, 5, 8, 2)


def test_stft_needs_a_frame_length():
    with pytest.raises(UnsupportedOpError, match="frame_length"):
        run("STFT", np.zeros((1, 8, 1)), np.int64(2))


def test_mel_weight_matrix_triangles_peak_at_one():
    m = run("MelWeightMatrix", np.int64(8), np.int64(64), np.int64(8000), np.float32(0), np.float32(4000),
            output_datatype=11)
    assert m.shape == (33, 8) and m.dtype == np.float64
    assert np.all((m >= 0) & (m <= 1))
    np.testing.assert_allclose(m.max(axis=0), 1.0)


def test_swiglu_keeps_dtype():
    a, b = R.standard_normal((3, 4)).astype(np.float16), R.standard_normal((3, 4)).astype(np.float16)
    y = run("SwiGLU", a, b, alpha=1.5)
    assert y.dtype == np.float16
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(y, a64 / (1 + np.exp(-1.5 * a64)) * b, rtol=2e-3, atol=2e-3)


def test_shape_rules():
    x = TensorType(F32, (2, 9, 1))
    assert infer("DFT", x).shape == (2, 9, 2)
    assert infer("DFT", x, TensorType(np.dtype(np.int64), ()), values=[None, np.int64(16)], onesided=1).shape \
        == (2, 9, 2)
    assert infer("DFT", TensorType(F32, (2, 5, 2)), inverse=1, onesided=1).shape == (2, 8, 1)
    axis = TensorType(np.dtype(np.int64), ())
    assert infer("DFT", TensorType(F32, (2, 5, 3, 2)), None, axis, values=[None, None, None]).shape \
        == (None, None, None, 2)
    assert infer("STFT", x, axis, TensorType(F32, (4,)), values=[None, np.int64(2)]).shape == (2, 3, 3, 2)
    mel = infer("MelWeightMatrix", *[axis] * 3, *[TensorType(F32, ())] * 2,
                values=[np.int64(8), np.int64(64), np.int64(8000)])
    assert mel == TensorType(F32, (33, 8))
