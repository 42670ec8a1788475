"""``tf.signal`` (and ``tf.spectral``, its TF 1.15 alias for the transforms): Fourier transforms of
complex and real tensors over their innermost 1, 2 or 3 dims, framing, the Hann and Hamming
windows, and the short-time Fourier transform and its inverse.

The transforms are ops (schemas/ops/signal.py) with TensorFlow's gradients; the rest is composed
from gathers, pads and segment sums, so gradients reach the signal through them.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import matmul, pad, unsorted_segment_sum
from trainer.dtypes import as_numpy_dtype
from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, gather, make_op, reshape, transpose

__all__ = ["dct", "fft", "fft2d", "fft3d", "frame", "hamming_window", "hann_window", "idct", "ifft", "ifft2d",
           "ifft3d", "inverse_stft", "inverse_stft_window_fn", "irfft", "irfft2d", "irfft3d",
           "linear_to_mel_weight_matrix", "mfccs_from_log_mel_spectrograms", "overlap_and_add", "rfft", "rfft2d",
           "rfft3d", "stft"]

D = "flowstack"


def _static_int(value, what: str) -> int:
    if isinstance(value, Tensor):
        if "value" in value.node.attrs:
            return int(np.asarray(value.node.attrs["value"]))
        raise TypeError(f"{what} must be a Python int or a constant, not a tensor computed at run time")
    return int(value)


# -- transforms ------------------------------------------------------------------------------------
def _complex_fft(x, rank: int, inverse: bool, name, op: str) -> Tensor:
    t = convert_to_tensor(x)
    if t.dtype is not None and t.dtype.kind != "c":
        raise TypeError(f"{op}: input must be complex64 or complex128, got {t.dtype} (tf.complex makes one)")
    return make_op("ComplexFFT", [t], {"fft_rank": rank, "inverse": int(inverse), "adjoint": 0}, domain=D,
                   name=name or op).outputs[0]


def fft(input, name=None) -> Tensor:  # noqa: A002 - TF's names
    """The discrete Fourier transform over the innermost dim of a complex tensor."""
    return _complex_fft(input, 1, False, name, "FFT")


def ifft(input, name=None) -> Tensor:  # noqa: A002
    """The inverse transform (divided by the size) over the innermost dim."""
    return _complex_fft(input, 1, True, name, "IFFT")


def fft2d(input, name=None) -> Tensor:  # noqa: A002
    return _complex_fft(input, 2, False, name, "FFT2D")


def ifft2d(input, name=None) -> Tensor:  # noqa: A002
    return _complex_fft(input, 2, True, name, "IFFT2D")


def fft3d(input, name=None) -> Tensor:  # noqa: A002
    return _complex_fft(input, 3, False, name, "FFT3D")


def ifft3d(input, name=None) -> Tensor:  # noqa: A002
    return _complex_fft(input, 3, True, name, "IFFT3D")


def _fft_length(fft_length, rank: int, op: str) -> list[int]:
    if fft_length is None:
        return [-1] * rank
    if isinstance(fft_length, Tensor):
        if "value" not in fft_length.node.attrs:
            raise TypeError(f"{op}: fft_length must be a list of ints or a constant, not a tensor computed at run "
                            f"time")
        fft_length = fft_length.node.attrs["value"]
    lengths = [int(n) for n in np.reshape(np.asarray(fft_length), -1)]
    if len(lengths) != rank or any(n < 0 for n in lengths):
        raise ValueError(f"{op}: fft_length must hold {rank} non-negative sizes, got {lengths}")
    return lengths


def _real_fft(x, fft_length, rank: int, name, op: str) -> Tensor:
    t = convert_to_tensor(x)
    if t.dtype is not None and t.dtype.kind != "f":
        raise TypeError(f"{op}: input_tensor must be float32 or float64, got {t.dtype}")
    return make_op("RealFFT", [t], {"fft_rank": rank, "fft_length": _fft_length(fft_length, rank, op)}, domain=D,
                   name=name or op).outputs[0]


def _inverse_real_fft(x, fft_length, rank: int, name, op: str) -> Tensor:
    t = convert_to_tensor(x)
    if t.dtype is not None and t.dtype.kind != "c":
        raise TypeError(f"{op}: input_tensor must be complex64 or complex128, got {t.dtype}")
    return make_op("InverseRealFFT", [t], {"fft_rank": rank, "fft_length": _fft_length(fft_length, rank, op)},
                   domain=D, name=name or op).outputs[0]


def rfft(input_tensor, fft_length=None, name=None) -> Tensor:
    """The transform of a real signal over its innermost dim (cropped or zero-padded to
    ``fft_length``): the ``fft_length // 2 + 1`` non-negative frequencies."""
    return _real_fft(input_tensor, fft_length, 1, name, "RFFT")


def irfft(input_tensor, fft_length=None, name=None) -> Tensor:
    """The real signal of ``fft_length`` samples (default ``2 * (size - 1)``) with these
    non-negative frequencies."""
    return _inverse_real_fft(input_tensor, fft_length, 1, name, "IRFFT")


def rfft2d(input_tensor, fft_length=None, name=None) -> Tensor:
    return _real_fft(input_tensor, fft_length, 2, name, "RFFT2D")


def irfft2d(input_tensor, fft_length=None, name=None) -> Tensor:
    return _inverse_real_fft(input_tensor, fft_length, 2, name, "IRFFT2D")


def rfft3d(input_tensor, fft_length=None, name=None) -> Tensor:
    return _real_fft(input_tensor, fft_length, 3, name, "RFFT3D")


def irfft3d(input_tensor, fft_length=None, name=None) -> Tensor:
    return _inverse_real_fft(input_tensor, fft_length, 3, name, "IRFFT3D")


# -- framing ---------------------------------------------------------------------------------------
def frame(signal, frame_length, frame_step, pad_end: bool = False, pad_value=0, axis: int = -1, name=None) -> Tensor:
    """Frames of ``frame_length`` samples every ``frame_step`` along ``axis`` (which becomes two dims:
    frames, samples). ``pad_end`` pads with ``pad_value`` so that every sample starts a frame's worth."""
    x = convert_to_tensor(signal)
    length, step = _static_int(frame_length, "frame: frame_length"), _static_int(frame_step, "frame: frame_step")
    if length <= 0 or step <= 0:
        raise ValueError(f"frame: frame_length and frame_step must be positive, got {length} and {step}")
    if x.shape is None:
        raise ValueError("frame: signal must have a known rank")
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise ValueError(f"frame: axis {axis} is out of range for a signal of rank {rank}")
    axis %= rank
    n = x.shape[axis]
    if n is None:
        raise ValueError("frame: the framed axis must have a static size")
    if pad_end:
        frames = -(-n // step)
        extra = max(0, (frames - 1) * step + length - n)
        paddings = [[0, 0]] * rank
        paddings[axis] = [0, extra]
        x = pad(x, paddings, constant_values=pad_value)
    else:
        frames = max(0, 1 + (n - length) // step)
    positions = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).astype(np.int64)
    return gather(x, convert_to_tensor(positions), axis=axis, name=name)


def overlap_and_add(signal, frame_step, name=None) -> Tensor:
    """The inverse of framing: ``[..., frames, frame_length]`` frames summed into one signal of
    ``(frames - 1) * frame_step + frame_length`` samples."""
    x = convert_to_tensor(signal)
    step = _static_int(frame_step, "overlap_and_add: frame_step")
    if x.shape is None or len(x.shape) < 2 or None in x.shape[-2:]:
        raise ValueError(f"overlap_and_add: signal must have rank >= 2 and static last two dims, got {x.shape}")
    if step <= 0:
        raise ValueError(f"overlap_and_add: frame_step must be positive, got {step}")
    frames, length = x.shape[-2:]
    out_len = (frames - 1) * step + length if frames else 0
    lead = list(x.shape[:-2])
    flat = transpose(reshape(x, [-1, frames * length]))  # [frames * length, batch]
    target = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).reshape(-1).astype(np.int64)
    summed = unsorted_segment_sum(flat, convert_to_tensor(target), out_len)  # [out_len, batch]
    return reshape(transpose(summed), [-1 if d is None else d for d in lead] + [out_len], name=name)


# -- windows ---------------------------------------------------------------------------------------
def _raised_cosine(window_length, periodic: bool, dtype, a: float, b: float, op: str) -> Tensor:
    # TensorFlow's formula: a periodic window of even length is the symmetric one of length + 1,
    # less its last sample; an odd length is the same either way.
    n = _static_int(window_length, f"{op}: window_length")
    if n < 0:
        raise ValueError(f"{op}: window_length must be non-negative, got {n}")
    dt = as_numpy_dtype(dtype)
    if dt is None or np.dtype(dt).kind != "f":
        raise TypeError(f"{op}: dtype must be a floating point type, got {dtype}")
    if n == 1:
        return convert_to_tensor(np.ones(1, dt))
    denominator = n - 1 + (1 if periodic and n % 2 == 0 else 0)
    window = a - b * np.cos(2 * np.pi * np.arange(n) / max(denominator, 1))
    return convert_to_tensor(window.astype(dt))


def hann_window(window_length, periodic: bool = True, dtype=np.float32, name=None) -> Tensor:
    """0.5 - 0.5 cos(2 pi n / N) for n < window_length."""
    return _raised_cosine(window_length, periodic, dtype, 0.5, 0.5, "hann_window")


def hamming_window(window_length, periodic: bool = True, dtype=np.float32, name=None) -> Tensor:
    """0.54 - 0.46 cos(2 pi n / N) for n < window_length."""
    return _raised_cosine(window_length, periodic, dtype, 0.54, 0.46, "hamming_window")


# -- short-time Fourier transform ------------------------------------------------------------------
def _default_fft_length(frame_length: int) -> int:
    return 1 << max(0, (frame_length - 1).bit_length())


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window, pad_end: bool = False,
         name=None) -> Tensor:
    """``[..., samples]`` real signals as ``[..., frames, fft_length // 2 + 1]`` spectra of windowed
    frames (``fft_length`` defaults to the smallest power of 2 holding a frame)."""
    x = convert_to_tensor(signals)
    if x.dtype is not None and x.dtype.kind != "f":
        raise TypeError(f"stft: signals must be float32 or float64, got {x.dtype}")
    length = _static_int(frame_length, "stft: frame_length")
    n_fft = _default_fft_length(length) if fft_length is None else _static_int(fft_length, "stft: fft_length")
    framed = frame(x, length, frame_step, pad_end=pad_end)
    if window_fn is not None:
        framed = framed * window_fn(length, dtype=x.dtype)
    return rfft(framed, [n_fft], name=name)


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """A window function for ``inverse_stft`` that undoes ``forward_window_fn``'s weighting where
    frames ``frame_step`` apart overlap (the forward window over the sum of its squared overlaps)."""
    step = _static_int(frame_step, "inverse_stft_window_fn: frame_step")

    def window_fn(frame_length, dtype):
        forward = _window_values(forward_window_fn, frame_length, dtype)
        overlaps = -(-frame_length // step)
        squares = np.pad(forward ** 2, (0, overlaps * step - frame_length)).reshape(overlaps, step).sum(0)
        denominator = np.tile(squares, overlaps)[:frame_length]
        return convert_to_tensor((forward / denominator).astype(forward.dtype))

    return window_fn


def _window_values(window_fn, frame_length: int, dtype) -> np.ndarray:
    """The values of ``window_fn(frame_length, dtype=dtype)``: a constant, read without a session."""
    window = window_fn(frame_length, dtype=dtype)
    if isinstance(window, Tensor):
        if "value" not in window.node.attrs:
            raise TypeError("inverse_stft_window_fn: forward_window_fn must return a constant window")
        return np.asarray(window.node.attrs["value"])
    return np.asarray(window)


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window, name=None) -> Tensor:
    """Signals back from ``[..., frames, fft_length // 2 + 1]`` spectra: each frame's real inverse
    transform, cut to ``frame_length``, windowed and overlap-added. With
    ``inverse_stft_window_fn(frame_step)`` as ``window_fn`` it inverts ``stft``."""
    spectra = convert_to_tensor(stfts)
    if spectra.dtype is not None and spectra.dtype.kind != "c":
        raise TypeError(f"inverse_stft: stfts must be complex64 or complex128, got {spectra.dtype}")
    length = _static_int(frame_length, "inverse_stft: frame_length")
    n_fft = _default_fft_length(length) if fft_length is None else _static_int(fft_length, "inverse_stft: fft_length")
    frames = irfft(spectra, [n_fft])
    if length > n_fft:
        rank = len(frames.shape)
        frames = pad(frames, [[0, 0]] * (rank - 1) + [[0, length - n_fft]])
    elif length < n_fft:
        frames = make_op("Slice", [frames, np.array([0], np.int64), np.array([length], np.int64),
                                   np.array([-1], np.int64)]).outputs[0]
    if window_fn is not None:
        frames = frames * window_fn(length, dtype=frames.dtype)
    return overlap_and_add(frames, frame_step, name=name)


# -- discrete cosine transforms and mel features ---------------------------------------------------
def _dct_matrix(n: int, kind: int, ortho: bool) -> np.ndarray:
    """M with ``y = x @ M`` the DCT of ``kind`` over ``n`` samples (SciPy's and TensorFlow's scaling)."""
    j = np.arange(n)[:, None]  # sample
    k = np.arange(n)[None, :]  # frequency
    if kind == 1:
        m = 2 * np.cos(np.pi * j * k / (n - 1))
        m[0, :], m[-1, :] = 1.0, (-1.0) ** np.arange(n)
        return m
    if kind == 2:
        m = 2 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
        if ortho:
            m[:, 0] *= np.sqrt(1 / (4 * n))
            m[:, 1:] *= np.sqrt(1 / (2 * n))
        return m
    m = 2 * np.cos(np.pi * j * (2 * k + 1) / (2 * n))  # kind 3
    m[0, :] = 1.0
    if ortho:
        m[0, :] *= np.sqrt(1 / n)
        m[1:, :] *= np.sqrt(1 / (2 * n))
    return m


def dct(input, type: int = 2, n=None, axis: int = -1, norm=None, name=None) -> Tensor:  # noqa: A002 - TF's names
    """The DCT of ``type`` 1, 2 or 3 over the innermost dim (cropped or zero-padded to ``n``);
    ``norm="ortho"`` scales types 2 and 3 to be orthonormal (each the other's inverse)."""
    x = convert_to_tensor(input)
    if type not in (1, 2, 3):
        raise ValueError(f"dct: only types 1, 2 and 3 are supported, got {type}")
    if axis != -1:
        raise NotImplementedError(f"dct: axis must be -1 (as in TensorFlow 1.15), got {axis}")
    if norm not in (None, "ortho"):
        raise ValueError(f"dct: norm must be None or 'ortho', got {norm!r}")
    if type == 1 and norm == "ortho":
        raise ValueError("dct: norm='ortho' is not supported for type 1")
    if x.dtype is not None and x.dtype.kind != "f":
        raise TypeError(f"dct: input must be float32 or float64, got {x.dtype}")
    if x.shape is None or not x.shape or x.shape[-1] is None:
        raise ValueError(f"dct: input must have a static innermost dim, got shape {x.shape}")
    size = x.shape[-1] if n is None else _static_int(n, "dct: n")
    if size < 1 or (type == 1 and size < 2):
        raise ValueError(f"dct: the transform length must be at least {2 if type == 1 else 1}, got {size}")
    if size != x.shape[-1]:
        rank = len(x.shape)
        if size < x.shape[-1]:
            x = make_op("Slice", [x, np.array([0], np.int64), np.array([size], np.int64),
                                  np.array([-1], np.int64)]).outputs[0]
        else:
            x = pad(x, [[0, 0]] * (rank - 1) + [[0, size - x.shape[-1]]])
    basis = convert_to_tensor(_dct_matrix(size, type, norm == "ortho").astype(np.dtype(x.dtype)))
    flat = reshape(x, [-1, size])
    lead = [-1 if d is None else d for d in x.shape[:-1]]
    return reshape(matmul(flat, basis), lead + [size], name=name)


def idct(input, type: int = 2, n=None, axis: int = -1, norm=None, name=None) -> Tensor:  # noqa: A002
    """The inverse of ``dct(type)``: the DCT of type 1, 3 or 2 for type 1, 2 or 3. Unnormalized, it
    scales by ``2 * (n - 1)`` for type 1 and ``2 * n`` otherwise (``norm="ortho"``: exact)."""
    if type not in (1, 2, 3):
        raise ValueError(f"idct: only types 1, 2 and 3 are supported, got {type}")
    return dct(input, type={1: 1, 2: 3, 3: 2}[type], n=n, axis=axis, norm=norm, name=name)


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None) -> Tensor:
    """MFCCs: the orthonormal-style type-2 DCT of log-mel spectrograms over their innermost (mel) dim."""
    x = convert_to_tensor(log_mel_spectrograms)
    if x.shape is None or not x.shape or x.shape[-1] is None:
        raise ValueError(f"mfccs_from_log_mel_spectrograms: the mel dim must be static, got shape {x.shape}")
    bins = x.shape[-1]
    return dct(x, type=2) * np.asarray(1 / np.sqrt(2.0 * bins), np.dtype(x.dtype))


def _hertz_to_mel(frequencies):
    return 1127.0 * np.log(1.0 + np.asarray(frequencies, np.float64) / 700.0)


def linear_to_mel_weight_matrix(num_mel_bins: int = 20, num_spectrogram_bins: int = 129, sample_rate=8000,
                                lower_edge_hertz: float = 125.0, upper_edge_hertz: float = 3800.0, dtype=np.float32,
                                name=None) -> Tensor:
    """``[num_spectrogram_bins, num_mel_bins]`` triangular filters, equally spaced on the mel scale
    between the edges, that map a linear spectrogram to a mel one (the DC bin gets none)."""
    mels, bins = int(num_mel_bins), int(num_spectrogram_bins)
    rate, low, high = float(_static_int(sample_rate, "sample_rate")), float(lower_edge_hertz), float(upper_edge_hertz)
    if mels <= 0 or bins <= 0:
        raise ValueError(f"linear_to_mel_weight_matrix: num_mel_bins and num_spectrogram_bins must be positive, "
                         f"got {mels} and {bins}")
    if rate <= 0:
        raise ValueError(f"linear_to_mel_weight_matrix: sample_rate must be positive, got {rate}")
    if not 0.0 <= low < high:
        raise ValueError(f"linear_to_mel_weight_matrix: need 0 <= lower_edge_hertz < upper_edge_hertz, got {low} "
                         f"and {high}")
    if high > rate / 2:
        raise ValueError(f"linear_to_mel_weight_matrix: upper_edge_hertz ({high}) exceeds the Nyquist frequency "
                         f"{rate / 2}")
    dt = as_numpy_dtype(dtype)
    if dt is None or np.dtype(dt).kind != "f":
        raise TypeError(f"linear_to_mel_weight_matrix: dtype must be floating point, got {dtype}")
    spectrogram_mel = _hertz_to_mel(np.linspace(0.0, rate / 2, bins)[1:])[:, None]
    edges = np.linspace(_hertz_to_mel(low), _hertz_to_mel(high), mels + 2)
    lower, center, upper = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
    rising = (spectrogram_mel - lower) / (center - lower)
    falling = (upper - spectrogram_mel) / (upper - center)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    return convert_to_tensor(np.pad(weights, [[1, 0], [0, 0]]).astype(dt), name=name)
