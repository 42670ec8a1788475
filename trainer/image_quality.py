"""``tf.image.ssim`` and ``tf.image.ssim_multiscale``: TF 1.15's structural similarity, composed
from a depthwise Gaussian filter (VALID), so both are differentiable (SSIM losses train through them).

Per channel, with local means mu, variances and covariance taken under an 11x11 Gaussian
(sigma 1.5, TF's defaults): luminance = (2 mu_x mu_y + c1) / (mu_x^2 + mu_y^2 + c1) and
cs = (2 cov_xy + c2) / (var_x + var_y + c2), c1 = (k1 max_val)^2, c2 = (k2 max_val)^2; SSIM is
mean(luminance * cs) over height and width, then over channels. MS-SSIM repeats cs on images
halved by 2x2 average pooling (an odd size padded by its edge first) and weights the scales by
``power_factors`` (a weighted geometric mean; the last scale contributes its full SSIM).
"""

from __future__ import annotations

import numpy as np

from trainer import ops
from trainer.array_ops import pad, reduce_mean, reduce_prod, stack
from trainer.image_adjust import convert_image_dtype

__all__ = ["MSSSIM_WEIGHTS", "ssim", "ssim_multiscale"]

MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _gaussian(size: int, sigma: float) -> np.ndarray:
    """TF's ``_fspecial_gauss``: a normalized size x size Gaussian (a softmax of -r^2 / 2 sigma^2)."""
    coords = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = -0.5 * coords ** 2 / sigma ** 2
    g = g[None, :] + g[:, None]
    g = np.exp(g - g.max())
    return (g / g.sum()).astype(np.float32)


def _checked_pair(img1, img2, where: str):
    a, b = ops.convert_to_tensor(img1), ops.convert_to_tensor(img2)
    for t in (a, b):
        if t.shape is None or len(t.shape) < 3 or any(d is None for d in t.shape[-3:]):
            raise ValueError(f"{where}: images need a static [..., height, width, channels] shape, got "
                             f"{None if t.shape is None else t.shape}")
    if tuple(a.shape[-3:]) != tuple(b.shape[-3:]):
        raise ValueError(f"{where}: img1 and img2 must have the same height, width and channels, got "
                         f"{a.shape} and {b.shape}")
    if np.dtype(a.dtype) != np.dtype(b.dtype):
        raise TypeError(f"{where}: img1 and img2 must have the same dtype, got {a.dtype} and {b.dtype}")
    return a, b


def _as_float(img1, img2, max_val):
    """Both images as float32 in [0, 1] scale, and ``max_val`` scaled the same way (TF's)."""
    dtype = np.dtype(img1.dtype)
    peak = ops.cast(ops.convert_to_tensor(max_val), np.float32)
    if dtype.kind in "iu":
        peak = peak * (1.0 / float(np.iinfo(dtype).max))
    return convert_image_dtype(img1, np.float32), convert_image_dtype(img2, np.float32), peak


def _per_channel(x, y, max_val, filter_size: int, filter_sigma: float, k1: float, k2: float, where: str):
    """(ssim, cs) per channel: shape ``x.shape[:-3] + [channels]``."""
    from trainer.nn import depthwise_conv2d

    height, width, channels = (int(d) for d in x.shape[-3:])
    if height < filter_size or width < filter_size:
        raise ValueError(f"{where}: images of {height}x{width} are smaller than filter_size {filter_size}")
    kernel = ops.constant(np.tile(_gaussian(filter_size, filter_sigma)[:, :, None, None], (1, 1, channels, 1)))
    lead = [int(d) if d is not None else -1 for d in x.shape[:-3]]

    def reducer(t):
        flat = ops.reshape(t, [-1, height, width, channels])
        out = depthwise_conv2d(flat, kernel, [1, 1, 1, 1], "VALID")
        return ops.reshape(out, lead + [height - filter_size + 1, width - filter_size + 1, channels])

    c1 = ops.square(max_val * k1)
    c2 = ops.square(max_val * k2)
    mean_x, mean_y = reducer(x), reducer(y)
    num0 = mean_x * mean_y * 2.0
    den0 = ops.square(mean_x) + ops.square(mean_y)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(x * y) * 2.0
    den1 = reducer(ops.square(x) + ops.square(y))
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return reduce_mean(luminance * cs, axis=[-3, -2]), reduce_mean(cs, axis=[-3, -2])


def ssim(img1, img2, max_val, filter_size: int = 11, filter_sigma: float = 1.5, k1: float = 0.01,
         k2: float = 0.03):
    """SSIM of two images (or batches), one value per image: ``img1.shape[:-3]``."""
    a, b = _checked_pair(img1, img2, "ssim")
    x, y, peak = _as_float(a, b, max_val)
    per_channel, _ = _per_channel(x, y, peak, filter_size, filter_sigma, k1, k2, "ssim")
    return reduce_mean(per_channel, axis=[-1])


def ssim_multiscale(img1, img2, max_val, power_factors=MSSSIM_WEIGHTS, filter_size: int = 11,
                    filter_sigma: float = 1.5, k1: float = 0.01, k2: float = 0.03):
    """MS-SSIM over ``len(power_factors)`` scales, one value per image: ``img1.shape[:-3]``."""
    from trainer.nn import avg_pool

    where = "ssim_multiscale"
    a, b = _checked_pair(img1, img2, where)
    x, y, peak = _as_float(a, b, max_val)
    lead = [int(d) if d is not None else -1 for d in x.shape[:-3]]
    images = [x, y]
    height, width, channels = (int(d) for d in x.shape[-3:])
    scores = []
    for k in range(len(power_factors)):
        if k > 0:
            flat = [ops.reshape(t, [-1, height, width, channels]) for t in images]
            extra_h, extra_w = height % 2, width % 2
            if extra_h or extra_w:  # TF pads an odd side by one SYMMETRIC row/column (the edge)
                flat = [pad(t, [[0, 0], [0, extra_h], [0, extra_w], [0, 0]], mode="SYMMETRIC") for t in flat]
            flat = [avg_pool(t, [1, 2, 2, 1], [1, 2, 2, 1], "VALID") for t in flat]
            height, width = (height + extra_h) // 2, (width + extra_w) // 2
            images = [ops.reshape(t, lead + [height, width, channels]) for t in flat]
        per_channel, cs = _per_channel(*images, peak, filter_size, filter_sigma, k1, k2, where)
        scores.append(ops.make_op("Relu", [cs]).outputs[0])
    scores[-1] = ops.make_op("Relu", [per_channel]).outputs[0]  # the last scale's full SSIM, TF's l(p) cs(p)
    weights = ops.constant(np.asarray(power_factors, np.float32))
    combined = reduce_prod(ops.pow(stack(scores, axis=-1), weights), axis=[-1])
    return reduce_mean(combined, axis=[-1])
