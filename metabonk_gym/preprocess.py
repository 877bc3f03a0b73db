"""Screen preprocessing shared by the envs and dataset conversion: downscale and luma.

One implementation, so that frames an env gives and frames converted from a recording are the
same bit for bit. Works on one frame `(H, W, C)` or a batch `(..., H, W, C)` of uint8.

>>> import numpy as np
>>> frame = np.arange(4 * 4 * 3, dtype=np.uint8).reshape(4, 4, 3)
>>> downscale(frame, 2).shape, luma(frame).shape
((2, 2, 3), (4, 4, 1))
>>> screen(frame, "grayscale", 2)[..., 0].tolist()
[[7, 13], [31, 37]]
"""

from __future__ import annotations

import numpy as np


def downscale(frames: np.ndarray, k: int) -> np.ndarray:
    """Block means of `k` x `k` pixels (floor), for `k` a power of two; `k == 1` returns `frames`.

    Integer sums are exact, so the order does not matter: rows of each block are added first,
    then columns (2k additions of strided views, over 10x faster than numpy's reduction over the
    block axes), in uint16 (k*k uint8 values fit for k <= 16); the shift is the floor of the mean.
    """
    if k == 1:
        return frames
    if k & (k - 1) or not 1 < k <= 16:
        raise ValueError(f"downscale factor must be a power of two up to 16, not {k}")
    h, w = frames.shape[-3] // k, frames.shape[-2] // k
    frames = frames[..., : h * k, : w * k, :]
    rows = frames[..., 0::k, :, :].astype(np.uint16)
    for i in range(1, k):
        rows += frames[..., i::k, :, :]
    sums = rows[..., :, 0::k, :].copy()
    for j in range(1, k):
        sums += rows[..., :, j::k, :]
    return (sums >> (2 * k.bit_length() - 2)).astype(np.uint8)


def luma(frames: np.ndarray) -> np.ndarray:
    """ITU-R 601 luma (0.299 R + 0.587 G + 0.114 B, in float64, truncated) of RGB frames as
    uint8 with one channel."""
    gray = frames[..., 0] * 0.299 + frames[..., 1] * 0.587 + frames[..., 2] * 0.114
    return gray.astype(np.uint8)[..., None]


def screen(frames: np.ndarray, obs_type: str, k: int = 1) -> np.ndarray:
    """What an env with `obs_type` ("rgb" or "grayscale") and `downscale=k` shows for RGB
    `frames`: downscale first, then luma."""
    out = downscale(frames, k)
    return luma(out) if obs_type == "grayscale" else out
