"""`PixelCells`: the screen as a grid of 8x8-cell picture codes, computed from pixels alone.

Why: a grey downscale to one pixel per 8x8 cell mixes tiles of equal mean brightness (a key, a
door, the player) into one grey; a policy cloned from a teacher that reads the tile grid then
cannot tell them apart. Hashing each cell's exact pixels (`pixel_tokens.cell_hashes`) keeps every
picture distinct. Each cell becomes `codes` bytes of its 64-bit hash: no vocabulary to build,
save or share, so every process (training workers, `eval`) gets the same codes; two pictures
collide only if all their bytes do (`codes=2`: 1 in 65,536 per pair). A policy embeds each byte
(`policies.CellCNN`, `features: cells`) and sums the embeddings.

>>> import gymnasium as gym, numpy as np
>>> env = gym.make("MetaBonk/BonkQuest-v0")
>>> wrapped = PixelCells(env)
>>> wrapped.observation_space.shape, wrapped.observation_space.dtype
((20, 30, 2), dtype('uint8'))
>>> obs, _ = wrapped.reset(seed=0)
>>> obs.shape, len(np.unique(obs[..., 0])) > 3
((20, 30, 2), True)
>>> wrapped.close()
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers.pixel_tokens import cell_hashes
from metabonk_gym.wrappers.registry import config_wrapper


def cell_codes(frame: np.ndarray, codes: int = 2, cell: int = 8) -> np.ndarray:
    """(rows, cols, codes) uint8: the low `codes` bytes of each cell's 64-bit picture hash.

    >>> a = np.zeros((16, 16, 3), np.uint8); a[0, 0] = 9
    >>> c = cell_codes(a); c.shape, bool((c[0, 0] != c[1, 1]).any()), bool((c[0, 1] == c[1, 1]).all())
    ((2, 2, 2), True, True)
    """
    hashes = cell_hashes(frame, cell)
    return (
        np.ascontiguousarray(hashes[..., None])
        .view(np.uint8)
        .reshape(*hashes.shape, 8)[..., :codes]
        .copy()
    )


@config_wrapper(dict_obs=False, pixels_only=True)
class PixelCells(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Replaces an image observation by its (rows, cols, codes) uint8 cell codes.

    Args:
        env: an env whose observation is an (H, W) or (H, W, C) uint8 frame (full size RGB keeps
            every picture apart; a downscaled frame works but merges more pictures).
        codes: hash bytes per cell (1-8); 2 keeps pictures apart in all but 1 in 65,536 pairs.
        cell: the cell size in pixels (8: GBA tiles).
    """

    def __init__(self, env: gym.Env, codes: int = 2, cell: int = 8) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, codes=codes, cell=cell)
        gym.ObservationWrapper.__init__(self, env)
        if not 1 <= codes <= 8:
            raise ValueError(f"codes must be 1..8 (bytes of a 64-bit hash), not {codes}")
        space = env.observation_space
        if (
            not isinstance(space, spaces.Box)
            or space.dtype != np.uint8
            or len(space.shape) not in (2, 3)
        ):
            raise ValueError(f"pixel cells need a uint8 (H, W) or (H, W, C) frame, not {space}")
        rows, cols = space.shape[0] // cell, space.shape[1] // cell
        if rows == 0 or cols == 0:
            raise ValueError(f"frames of {space.shape[:2]} are smaller than one {cell}x{cell} cell")
        self.codes, self.cell = int(codes), int(cell)
        self.observation_space = spaces.Box(0, 255, (rows, cols, self.codes), np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        return cell_codes(np.asarray(observation), self.codes, self.cell)
