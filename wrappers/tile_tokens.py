"""`TileTokens`: the screen as a grid of 8x8 tile tokens in a Dict observation.

Why: tokens are what a small policy embeds and what a language model can compare ("the same door
tile as in room 1"). On MetaBonk GBA envs they are exact and stable (decoded from VRAM, see
`vram.py`); on any other RGB env a pixel-hash tokenizer gives first-seen ids (`pixel_tokens.py`).

Observation keys (the env's own observation stays under `pixels`):

| key | shape, dtype | what |
| --- | --- | --- |
| `tiles` | (20, 30) int32 | token per cell: VRAM path 31-bit picture hash (0 = backdrop), pixel path id in `[0, vocabulary_size)` (0 = out of vocabulary) |
| `sprites` | (max_sprites, 9) int32 | VRAM path: visible OAM sprites, front first, columns `x, y, w, h, token, tile, palette, priority, oam` (rows past the last sprite are 0, `w == 0`) |
| `sprite_map` | (20, 30) int32 | VRAM path: token of the front sprite over each cell (0 none) |
| `classes` | (20, 30) int32 | VRAM path with `tiles.json`: semantic class id per cell (`wrapper.class_names`) |

`buckets=N` folds VRAM tokens into `[0, N)` (`1 + token % (N - 1)`, 0 kept) for an embedding table
of N rows; ids stay stable across processes.

>>> import gymnasium as gym, metabonk_gym
>>> env = TileTokens(gym.make("MetaBonk/BonkQuest-v0"))
>>> obs, info = env.reset(seed=0)
>>> sorted(obs), obs["tiles"].shape, env.class_names[obs["classes"][info["player_y"], info["player_x"]]]
(['classes', 'pixels', 'sprite_map', 'sprites', 'tiles'], (20, 30), 'player')
>>> env.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers._dict_obs import as_dict, extend_space, pixels, pixels_space
from metabonk_gym.wrappers.pixel_tokens import PixelTokenizer
from metabonk_gym.wrappers.registry import config_wrapper
from metabonk_gym.wrappers.screen import ScreenReader, has_vram
from metabonk_gym.wrappers.vram import GRID_H, GRID_W, SPRITE_FIELDS

TOKEN_MAX = 2**31 - 1
_SPRITE_LOW = np.array([-512, -256, 0, 0, 0, 0, 0, 0, 0], np.int32)
_SPRITE_HIGH = np.array([511, 255, 128, 128, TOKEN_MAX, 1023, 15, 3, 127], np.int32)


@config_wrapper()
class TileTokens(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Adds `tiles` (and on GBA `sprites`, `sprite_map`, `classes`) to the observation.

    Args:
        env: any env with an image observation (Box, or a Dict holding one under `pixels_key`).
        source: "vram" (GBA envs, exact), "pixels" (any RGB frame), or "auto" (VRAM when the
            env is a MetaBonk GBA env).
        sprites: decode OAM sprites (VRAM path).
        max_sprites: rows of `sprites`; further sprites (back-most) are dropped.
        semantic: add `classes` when the integration has a `tiles.json`.
        buckets: fold VRAM tokens into `[0, buckets)`.
        vocabulary_size, vocabulary, grow, cell: the pixel path's tokenizer (`PixelTokenizer`).
        pixels_key: where the frame is / stays in the Dict observation.
    """

    def __init__(
        self,
        env: gym.Env,
        source: str = "auto",
        sprites: bool = True,
        max_sprites: int = 64,
        semantic: bool = True,
        buckets: int | None = None,
        vocabulary_size: int = 4096,
        vocabulary: Mapping[int, int] | str | Path | None = None,
        grow: bool = True,
        cell: int = 8,
        pixels_key: str = "pixels",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            source=source,
            sprites=sprites,
            max_sprites=max_sprites,
            semantic=semantic,
            buckets=buckets,
            vocabulary_size=vocabulary_size,
            vocabulary=vocabulary,
            grow=grow,
            cell=cell,
            pixels_key=pixels_key,
        )
        gym.ObservationWrapper.__init__(self, env)
        if source not in ("auto", "vram", "pixels"):
            raise ValueError(f"source must be 'auto', 'vram' or 'pixels', not {source!r}")
        if buckets is not None and buckets < 2:
            raise ValueError(f"buckets must be >= 2, not {buckets}")
        if source == "auto":
            source = "vram" if has_vram(env) else "pixels"
        self.source = source
        self.pixels_key = pixels_key
        self.buckets = buckets
        self.max_sprites = int(max_sprites)
        self.reader: ScreenReader | None = None
        self.tokenizer: PixelTokenizer | None = None
        extra: dict[str, spaces.Space] = {}
        if source == "vram":
            self.reader = ScreenReader(env, sprites=sprites)
            high = TOKEN_MAX if buckets is None else buckets - 1
            extra["tiles"] = spaces.Box(0, high, (GRID_H, GRID_W), np.int32)
            if sprites:
                low_s, high_s = _SPRITE_LOW.copy(), _SPRITE_HIGH.copy()
                high_s[4] = high
                extra["sprites"] = spaces.Box(
                    np.tile(low_s, (self.max_sprites, 1)),
                    np.tile(high_s, (self.max_sprites, 1)),
                    (self.max_sprites, len(SPRITE_FIELDS)),
                    np.int32,
                )
                extra["sprite_map"] = spaces.Box(0, high, (GRID_H, GRID_W), np.int32)
            self.semantic = self.reader.semantic if semantic else None
            if self.semantic is not None:
                extra["classes"] = spaces.Box(
                    0, len(self.semantic.names) - 1, (GRID_H, GRID_W), np.int32
                )
        else:
            frame = pixels_space(env.observation_space, pixels_key)
            if len(frame.shape) not in (2, 3):
                raise ValueError(
                    f"pixel tokens need an (H, W) or (H, W, C) frame, not {frame.shape}"
                )
            rows, cols = frame.shape[0] // cell, frame.shape[1] // cell
            self.tokenizer = PixelTokenizer(vocabulary_size, cell, vocabulary, grow)
            self.semantic = None
            extra["tiles"] = spaces.Box(0, vocabulary_size - 1, (rows, cols), np.int32)
        self.has_sprites = "sprites" in extra
        self.observation_space = extend_space(env.observation_space, pixels_key, extra)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Names of the `classes` ids (empty without semantic classes)."""
        return self.semantic.names if self.semantic is not None else ()

    def _fold(self, tokens: np.ndarray) -> np.ndarray:
        if self.buckets is None:
            return tokens
        return np.where(tokens == 0, 0, 1 + tokens % (self.buckets - 1)).astype(np.int32)

    def observation(self, observation: Any) -> dict[str, Any]:
        out = as_dict(observation, self.pixels_key)
        if self.reader is not None:
            screen = self.reader.read()
            out["tiles"] = self._fold(screen.tiles)
            if self.has_sprites:
                table = np.zeros((self.max_sprites, len(SPRITE_FIELDS)), np.int32)
                rows = screen.sprites[: self.max_sprites]
                table[: len(rows)] = rows
                table[:, 4] = self._fold(table[:, 4])
                out["sprites"] = table
                out["sprite_map"] = self._fold(screen.sprite_map)
            if self.semantic is not None:
                classes = self.reader.classes(screen)
                assert classes is not None
                out["classes"] = classes
        else:
            assert self.tokenizer is not None
            out["tiles"] = self.tokenizer(np.asarray(pixels(observation, self.pixels_key)))
        return out
