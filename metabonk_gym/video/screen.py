"""Video frames to the game's screen: aspect check, scaling, and a look-alike colour check.

A frame `k` times the screen's size for `k` a power of two is scaled by the same block means the
envs use (`metabonk_gym.preprocess.downscale`, bit-exact); other sizes go through Pillow (box
filter down, nearest up). The look-alike check compares colour histograms (4 levels a channel)
with frames of the real env: histogram intersection 1.0 is the same colours, 0.0 none shared.
Four levels a channel keep the check blind to a lossy codec's small colour shifts, so a game's
H.264 video scores near 1 against its lossless frames and noise far below
(docs/benchmarks.md#design).

>>> import numpy as np
>>> fit_to_screen(np.zeros((320, 480, 3), np.uint8), (160, 240)).shape
(160, 240, 3)
>>> a = np.zeros((4, 4, 3), np.uint8)
>>> similarity(colour_histogram(a[None]), colour_histogram(a[None]))
1.0
"""

from __future__ import annotations

import numpy as np

from metabonk_gym.preprocess import downscale
from metabonk_gym.training.errors import VideoError

#: Relative difference of width/height ratios accepted as the same aspect.
ASPECT_TOLERANCE = 0.04
#: Histogram intersection under which a video is reported as not looking like the game.
LOOKS_LIKE_THRESHOLD = 0.5


def check_aspect(width: int, height: int, screen: tuple[int, int], source: str) -> None:
    """A clear error when (width, height) is not the screen's aspect."""
    sh, sw = screen
    ratio, want = width / height, sw / sh
    if abs(ratio / want - 1.0) > ASPECT_TOLERANCE:
        raise VideoError(
            f"{source} is {width}x{height} (aspect {ratio:.2f}), the game's screen is {sw}x{sh} "
            f"(aspect {want:.2f}); pass --crop x,y,w,h of the game's window in the video"
        )


def _power_of_two_factor(h: int, w: int, screen: tuple[int, int]) -> int | None:
    sh, sw = screen
    if h % sh or w % sw or h // sh != w // sw:
        return None
    k = h // sh
    return k if k & (k - 1) == 0 and k <= 16 else None


def fit_to_screen(frame: np.ndarray, screen: tuple[int, int]) -> np.ndarray:
    """One (H, W, 3) uint8 frame scaled to `screen` (height, width)."""
    h, w = frame.shape[:2]
    k = _power_of_two_factor(h, w, screen)
    if k is not None:
        return downscale(frame, k)
    from PIL import Image

    sh, sw = screen
    resample = Image.Resampling.BOX if h >= sh else Image.Resampling.NEAREST
    return np.asarray(Image.fromarray(frame).resize((sw, sh), resample), dtype=np.uint8)


def colour_histogram(frames: np.ndarray) -> np.ndarray:
    """Normalised histogram of RGB colours quantised to 4 levels a channel (64 bins)."""
    q = (np.asarray(frames, np.uint8) >> 6).astype(np.int64)
    codes = (q[..., 0] << 4) | (q[..., 1] << 2) | q[..., 2]
    counts = np.bincount(codes.ravel(), minlength=64).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Histogram intersection of two normalised histograms (0..1)."""
    return round(float(np.minimum(a, b).sum()), 6)
