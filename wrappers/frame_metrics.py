"""Image quality of predicted frames: PSNR and SSIM against the real frames.

Why here: the predictor benchmark and the predictor's training report both score predictions
the same way. SSIM follows Wang et al. (2004): Gaussian window (sigma 1.5), K1 = 0.01,
K2 = 0.03, on each colour channel, averaged.

>>> import numpy as np
>>> a = np.zeros((16, 16, 3), np.uint8); b = a.copy(); b[0, 0] = 255
>>> round(psnr(a, b), 2), ssim(a, a)
(24.08, 1.0)
"""

from __future__ import annotations

import numpy as np

#: PSNR of identical frames (finite, so that means stay finite).
PSNR_CAP = 100.0


def psnr(prediction: np.ndarray, target: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB (8-bit range), capped at `PSNR_CAP`."""
    mse = float(np.mean((prediction.astype(np.float64) - target.astype(np.float64)) ** 2))
    if mse == 0.0:
        return PSNR_CAP
    return float(min(PSNR_CAP, 10.0 * np.log10(255.0**2 / mse)))


def ssim(prediction: np.ndarray, target: np.ndarray, sigma: float = 1.5) -> float:
    """Mean structural similarity over pixels and channels, in [-1, 1]."""
    from scipy.ndimage import gaussian_filter

    x = prediction.astype(np.float64)
    y = target.astype(np.float64)
    if x.ndim == 2:
        x, y = x[..., None], y[..., None]
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    filt = [sigma, sigma, 0]

    def blur(a: np.ndarray) -> np.ndarray:
        return gaussian_filter(a, filt, truncate=3.5, mode="reflect")

    mx, my = blur(x), blur(y)
    vx = blur(x * x) - mx * mx
    vy = blur(y * y) - my * my
    cov = blur(x * y) - mx * my
    value = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(value.mean())
