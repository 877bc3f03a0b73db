"""The one preprocessing module: what envs show and what dataset conversion computes agree.

Checked against plain reference formulas (float block means, the luma formula) on random frames,
single and batched, and against what a GBA env actually returns for the same screen.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import metabonk_gym  # noqa: F401
from metabonk_gym.preprocess import downscale, luma, screen
from metabonk_gym.training.envs import convert_frames

RNG = np.random.default_rng(0)
FRAMES = RNG.integers(0, 256, (3, 160, 240, 3), dtype=np.uint8)


def reference_downscale(frames: np.ndarray, k: int) -> np.ndarray:
    n, h, w, c = frames.shape
    blocks = frames.reshape(n, h // k, k, w // k, k, c).astype(np.float64)
    return np.floor(blocks.mean(axis=(2, 4))).astype(np.uint8)


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_downscale_is_the_floor_of_block_means(k: int) -> None:
    expected = reference_downscale(FRAMES, k)
    np.testing.assert_array_equal(downscale(FRAMES, k), expected)  # a batch
    np.testing.assert_array_equal(downscale(FRAMES[1], k), expected[1])  # one frame
    white = np.full((160, 240, 3), 255, np.uint8)
    assert (downscale(white, k) == 255).all()  # sums of 255s do not overflow


def test_luma_formula_and_bad_factors() -> None:
    pixel = np.array([[[200, 10, 10], [0, 255, 0], [255, 255, 255]]], np.uint8)
    assert luma(pixel)[0, :, 0].tolist() == [66, 149, 255]
    assert luma(FRAMES).shape == (3, 160, 240, 1)
    assert downscale(FRAMES, 1) is FRAMES
    for bad in (3, 32):
        with pytest.raises(ValueError, match="power of two"):
            downscale(FRAMES, bad)


def play(**kwargs: object) -> list[np.ndarray]:
    """Observations of one short episode (one emulator per process: one env at a time)."""
    env = gym.make("MetaBonk/BonkQuest-v0", **kwargs)
    try:
        out = [env.reset(seed=4)[0]]
        out += [env.step(action)[0] for action in (4, 4, 1, 5)]
        return out
    finally:
        env.close()


@pytest.mark.parametrize(("obs_type", "k"), [("rgb", 2), ("grayscale", 1), ("grayscale", 8)])
def test_env_and_dataset_conversion_agree(obs_type: str, k: int) -> None:
    """A recorded full-size RGB frame converts to exactly what the env shows."""
    frames = play()
    shown = play(obs_type=obs_type, downscale=k)
    converted = convert_frames(np.stack(frames), ("rgb", 1), (obs_type, k))
    np.testing.assert_array_equal(converted, np.stack(shown))
    np.testing.assert_array_equal(screen(frames[-1], obs_type, k), shown[-1])
