"""``tf.spectral``: TF 1.15's older name for the Fourier and cosine transforms of ``tf.signal``."""

from __future__ import annotations

from trainer.tf_signal import (dct, fft, fft2d, fft3d, idct, ifft, ifft2d, ifft3d, irfft, irfft2d, irfft3d, rfft,
                               rfft2d, rfft3d)

__all__ = ["dct", "fft", "fft2d", "fft3d", "idct", "ifft", "ifft2d", "ifft3d", "irfft", "irfft2d", "irfft3d", "rfft",
           "rfft2d", "rfft3d"]
