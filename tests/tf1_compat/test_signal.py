"""``tf.signal`` / ``tf.spectral`` and the top-level ``tf.fft`` family: transforms against an explicit
DFT matrix and NumPy, gradients against central differences through real and imaginary parts,
framing and windows against TensorFlow's formulas, STFT round trips, bad input, and a script."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.gradient_check import numeric_gradient_check

RNG = np.random.default_rng(11)


def run(fetches, feed=None):
    return tf.Session().run(fetches, feed)


def dft_matrix(n: int) -> np.ndarray:
    k = np.arange(n)
    return np.exp(-2j * np.pi * np.outer(k, k) / n)


def complex_input(shape, dtype=np.complex64):
    return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)


def parts(z):
    """A complex tensor's real and imaginary parts side by side (a real tensor to take a loss of)."""
    return tf.concat([tf.real(z), tf.imag(z)], -1)


# -- transforms ------------------------------------------------------------------------------------
def test_fft_and_ifft_against_the_dft_matrix():
    x = complex_input((3, 8), np.complex128)
    y, back = run([tf.signal.fft(x), tf.ifft(x)])
    np.testing.assert_allclose(y, x @ dft_matrix(8).T, atol=1e-12)
    np.testing.assert_allclose(back, x @ dft_matrix(8).conj().T / 8, atol=1e-12)
    single = run(tf.fft(complex_input((5,))))
    assert single.dtype == np.complex64 and single.shape == (5,)


def test_2d_3d_and_real_transforms_against_numpy():
    x = complex_input((2, 4, 6))
    np.testing.assert_allclose(run(tf.fft2d(x)), np.fft.fft2(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(tf.spectral.ifft3d(x)), np.fft.ifftn(x, axes=(0, 1, 2)), rtol=1e-4, atol=1e-5)
    r = RNG.normal(size=(3, 10)).astype(np.float32)
    y = tf.signal.rfft(r)
    assert y.dtype == np.complex64 and y.shape == (3, 6)
    np.testing.assert_allclose(run(y), np.fft.rfft(r), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(tf.signal.rfft(r, [6])), np.fft.rfft(r, 6), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(tf.signal.rfft(r, [16])), np.fft.rfft(r, 16), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(tf.signal.irfft(tf.signal.rfft(r))), r, atol=1e-5)
    odd = tf.signal.irfft(tf.signal.rfft(r[:, :9]), [9])
    assert odd.shape == (3, 9)
    np.testing.assert_allclose(run(odd), r[:, :9], atol=1e-5)
    img = RNG.normal(size=(2, 6, 8))
    np.testing.assert_allclose(run(tf.signal.rfft2d(img)), np.fft.rfft2(img), atol=1e-10)
    np.testing.assert_allclose(run(tf.spectral.irfft2d(tf.signal.rfft2d(img))), img, atol=1e-12)


def test_fft_gradients():
    re, im = RNG.normal(size=(2, 5)), RNG.normal(size=(2, 5))
    numeric_gradient_check(lambda a, b: parts(tf.fft(tf.complex(a, b))), [re.copy(), im.copy()], RNG)
    numeric_gradient_check(lambda a, b: parts(tf.ifft(tf.complex(a, b))), [re.copy(), im.copy()], RNG)
    numeric_gradient_check(lambda a, b: parts(tf.fft2d(tf.complex(a, b))), [re.copy(), im.copy()], RNG)


@pytest.mark.parametrize("length", [None, [6], [8], [11]])
def test_rfft_gradient(length):
    numeric_gradient_check(lambda a: parts(tf.signal.rfft(a, length)), [RNG.normal(size=(2, 8))], RNG)


@pytest.mark.parametrize("length", [None, [7], [4]])
def test_irfft_gradient(length):
    re, im = RNG.normal(size=(2, 5)), RNG.normal(size=(2, 5))
    numeric_gradient_check(lambda a, b: tf.signal.irfft(tf.complex(a, b), length), [re, im], RNG)


def test_rfft2d_gradient():
    numeric_gradient_check(lambda a: parts(tf.signal.rfft2d(a)), [RNG.normal(size=(3, 4))], RNG)


def test_transform_bad_input():
    with pytest.raises(TypeError, match="FFT: input must be complex64 or complex128"):
        tf.fft(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="RFFT: input_tensor must be float32 or float64"):
        tf.signal.rfft(complex_input((4,)))
    with pytest.raises(ValueError, match="fft_length must hold 1 non-negative sizes"):
        tf.signal.rfft(np.ones(4, np.float32), [2, 2])
    with pytest.raises(Exception, match="must have rank >= 2"):
        tf.fft2d(complex_input((4,)))


# -- framing and windows ---------------------------------------------------------------------------
def test_frame_matches_sliding_windows():
    x = RNG.normal(size=(2, 11)).astype(np.float32)
    f = tf.signal.frame(x, 4, 3)
    assert f.shape == (2, 3, 4)
    np.testing.assert_array_equal(run(f), np.stack([x[:, i * 3:i * 3 + 4] for i in range(3)], 1))
    padded = run(tf.signal.frame(x, 4, 3, pad_end=True, pad_value=-1))
    assert padded.shape == (2, 4, 4)  # ceil(11 / 3) frames
    np.testing.assert_array_equal(padded[:, 3], np.concatenate([x[:, 9:], -np.ones((2, 2), np.float32)], 1))
    on_axis0 = run(tf.signal.frame(x.T, 5, 2, axis=0))
    assert on_axis0.shape == (4, 5, 2)
    numeric_gradient_check(lambda a: tf.signal.frame(a, 3, 2), [RNG.normal(size=(7,))], RNG)
    with pytest.raises(ValueError, match="frame_length and frame_step must be positive"):
        tf.signal.frame(x, 0, 1)


def test_windows_follow_tensorflows_formula():
    n = np.arange(8)
    np.testing.assert_allclose(run(tf.signal.hann_window(8)), 0.5 - 0.5 * np.cos(2 * np.pi * n / 8), atol=1e-7)
    np.testing.assert_allclose(run(tf.signal.hann_window(8, periodic=False)),
                               0.5 - 0.5 * np.cos(2 * np.pi * n / 7), atol=1e-7)
    np.testing.assert_allclose(run(tf.signal.hamming_window(8, dtype=tf.float64)),
                               0.54 - 0.46 * np.cos(2 * np.pi * n / 8), atol=1e-15)
    # TensorFlow's quirk: an odd periodic window is the symmetric one
    np.testing.assert_allclose(run(tf.signal.hann_window(5)), [0, 0.5, 1, 0.5, 0], atol=1e-7)
    np.testing.assert_array_equal(run(tf.signal.hann_window(1)), [1.0])
    with pytest.raises(TypeError, match="floating point"):
        tf.signal.hann_window(4, dtype=tf.int32)


def test_overlap_and_add_inverts_frame_of_a_rectangular_split():
    x = RNG.normal(size=(3, 12))
    frames = tf.signal.frame(x, 4, 4)
    np.testing.assert_allclose(run(tf.signal.overlap_and_add(frames, 4)), x)
    overlapped = run(tf.signal.overlap_and_add(np.ones((5, 4)), 2))
    np.testing.assert_array_equal(overlapped, [1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1])


# -- STFT ------------------------------------------------------------------------------------------
def test_stft_against_numpy_and_round_trip():
    x = RNG.normal(size=(2, 64)).astype(np.float32)
    spectra = tf.signal.stft(x, frame_length=16, frame_step=4)
    assert spectra.shape == (2, 13, 9)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)
    want = np.stack([np.fft.rfft(x[:, i * 4:i * 4 + 16] * window, 16) for i in range(13)], 1)
    np.testing.assert_allclose(run(spectra), want, rtol=1e-4, atol=1e-4)
    back = tf.signal.inverse_stft(spectra, 16, 4, window_fn=tf.signal.inverse_stft_window_fn(4))
    assert back.shape == (2, 64)
    # away from the ends, where fewer frames overlap, the signal comes back
    np.testing.assert_allclose(run(back)[:, 16:-16], x[:, 16:-16], atol=1e-5)
    with pytest.raises(TypeError, match="stft: signals must be float32 or float64"):
        tf.signal.stft(np.ones(8, np.int32), 4, 2)


# -- DCT and mel features --------------------------------------------------------------------------
def dct_by_sums(x, kind):
    """The DCT of ``kind`` over the last axis, summed term by term from its definition."""
    n = x.shape[-1]
    out = np.zeros_like(x)
    for k in range(n):
        if kind == 1:
            terms = [x[..., 0], (-1) ** k * x[..., -1]] + [2 * x[..., j] * np.cos(np.pi * k * j / (n - 1))
                                                         for j in range(1, n - 1)]
        elif kind == 2:
            terms = [2 * x[..., j] * np.cos(np.pi * k * (2 * j + 1) / (2 * n)) for j in range(n)]
        else:
            terms = [x[..., 0]] + [2 * x[..., j] * np.cos(np.pi * j * (2 * k + 1) / (2 * n)) for j in range(1, n)]
        out[..., k] = np.sum(terms, axis=0)
    return out


@pytest.mark.parametrize("kind", [1, 2, 3])
def test_dct_against_its_definition_and_idct_scaling(kind):
    x = RNG.normal(size=(2, 3, 7))
    y = run(tf.signal.dct(x, type=kind))
    np.testing.assert_allclose(y, dct_by_sums(x, kind), atol=1e-10)
    scale = 2 * (7 - 1) if kind == 1 else 2 * 7  # TensorFlow's documented re-normalization
    np.testing.assert_allclose(run(tf.spectral.idct(tf.constant(y), type=kind)) / scale, x, atol=1e-10)


def test_dct_ortho_length_and_gradient():
    x = RNG.normal(size=(4, 6))
    ortho = tf.signal.dct(x, norm="ortho")
    np.testing.assert_allclose(run(tf.signal.idct(ortho, norm="ortho")), x, atol=1e-12)
    energy = run(tf.reduce_sum(tf.square(ortho), -1))
    np.testing.assert_allclose(energy, np.sum(x ** 2, -1))  # orthonormal: Parseval
    np.testing.assert_allclose(run(tf.signal.dct(x, n=4)), dct_by_sums(x[:, :4], 2), atol=1e-10)
    np.testing.assert_allclose(run(tf.signal.dct(x, n=8)), dct_by_sums(np.pad(x, [[0, 0], [0, 2]]), 2), atol=1e-10)
    numeric_gradient_check(lambda a: tf.signal.dct(a, type=2, norm="ortho"), [RNG.normal(size=(2, 5))], RNG)
    with pytest.raises(ValueError, match="types 1, 2 and 3"):
        tf.signal.dct(x, type=4)
    with pytest.raises(ValueError, match="not supported for type 1"):
        tf.signal.dct(x, type=1, norm="ortho")


def test_mfccs_and_mel_matrix():
    log_mel = RNG.normal(size=(5, 10))
    np.testing.assert_allclose(run(tf.signal.mfccs_from_log_mel_spectrograms(log_mel)),
                               dct_by_sums(log_mel, 2) / np.sqrt(2 * 10), atol=1e-10)
    m = run(tf.signal.linear_to_mel_weight_matrix(num_mel_bins=8, num_spectrogram_bins=65, sample_rate=16000,
                                                  lower_edge_hertz=100.0, upper_edge_hertz=7000.0))
    assert m.shape == (65, 8) and m.dtype == np.float32
    assert np.all(m[0] == 0) and np.all((m >= 0) & (m <= 1))
    # each filter is a triangle on the mel scale: build it from the edges, entry by entry
    mel = lambda f: 1127.0 * np.log(1 + f / 700.0)  # noqa: E731
    edges = np.linspace(mel(100.0), mel(7000.0), 10)
    for b in range(1, 65):
        f = mel(b * 8000.0 / 64)
        for j in range(8):
            lo, mid, hi = edges[j], edges[j + 1], edges[j + 2]
            want = (f - lo) / (mid - lo) if lo <= f <= mid else (hi - f) / (hi - mid) if mid < f <= hi else 0.0
            assert m[b, j] == pytest.approx(max(want, 0.0), abs=1e-6)
    with pytest.raises(ValueError, match="exceeds the Nyquist"):
        tf.signal.linear_to_mel_weight_matrix(sample_rate=8000, upper_edge_hertz=5000.0)


def test_tf1_script_spectral_loss_trains_a_filter():
    """A TF1 script: learn a 1-D convolution filter by matching STFT magnitudes of its output."""
    tf.set_random_seed(2)
    rng = np.random.default_rng(4)
    signal = rng.normal(size=(4, 128)).astype(np.float32)
    kernel = np.array([0.25, 0.5, 0.25], np.float32)
    target = np.stack([np.convolve(s, kernel, mode="same") for s in signal]).astype(np.float32)
    x = tf.placeholder(tf.float32, (None, 128))
    y = tf.placeholder(tf.float32, (None, 128))
    w = tf.get_variable("w", (3, 1, 1), initializer=tf.constant_initializer(0.1))
    out = tf.squeeze(tf.nn.conv1d(x[:, :, None], w, stride=1, padding="SAME"), -1)
    spec = lambda s: tf.abs(tf.signal.stft(s, frame_length=32, frame_step=16))  # noqa: E731
    loss = tf.reduce_mean(tf.square(spec(out) - spec(y)))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: signal, y: target})
        for _ in range(150):
            sess.run(train, {x: signal, y: target})
        last, learned = sess.run([loss, w], {x: signal, y: target})
    assert last < first / 20
    np.testing.assert_allclose(np.abs(learned.ravel()), kernel, atol=0.05)
