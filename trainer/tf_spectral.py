"""``tf.spectral``: TF 1.15's older name for the Fourier transforms of ``tf.signal``."""

from __future__ import annotations

from trainer.tf_signal import (fft, fft2d, fft3d, ifft, ifft2d, ifft3d, irfft, irfft2d, irfft3d, rfft, rfft2d,
                               rfft3d)

__all__ = ["fft", "fft2d", "fft3d", "ifft", "ifft2d", "ifft3d", "irfft", "irfft2d", "irfft3d", "rfft", "rfft2d",
           "rfft3d"]
