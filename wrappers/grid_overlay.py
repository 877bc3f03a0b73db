"""`GridOverlay`: the frame annotated for a vision-language model: enlarged, cell grid lines,
coordinates every few cells, semantic colours per cell and the player's cell outlined.

Why: VLMs are poor at counting pixels but good at reading labels; with the grid and the numbers
drawn on the image, "go to (22, 10)" means the same thing to the model as to `TextMap` and
to the directive follower.

>>> import numpy as np
>>> img = draw_overlay(np.zeros((160, 240, 3), np.uint8), scale=2)
>>> img.shape, img.dtype.name
((320, 480, 3), 'uint8')
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers._dict_obs import as_dict, extend_space, pixels, pixels_space
from metabonk_gym.wrappers.registry import config_wrapper
from metabonk_gym.wrappers.screen import ScreenReader, has_vram

#: Tint per class name (RGB); classes not listed are left untinted.
CLASS_COLOURS: dict[str, tuple[int, int, int]] = {
    "wall": (90, 90, 110),
    "water": (40, 90, 230),
    "door": (60, 220, 60),
    "door_locked": (230, 140, 30),
    "key": (255, 230, 0),
    "chest": (200, 120, 40),
    "treasure": (255, 215, 0),
    "heart": (255, 60, 120),
    "gem": (0, 230, 230),
    "item": (0, 230, 230),
    "npc": (170, 80, 255),
    "enemy": (255, 30, 30),
    "player": (255, 255, 255),
    "projectile": (255, 160, 0),
}


@lru_cache(maxsize=1)
def label_font() -> Any:
    """The small bitmap font of labels on overlays and strips (loaded once)."""
    from PIL import ImageFont

    return ImageFont.load_default()


def draw_overlay(
    frame: np.ndarray,
    classes: np.ndarray | None = None,
    names: Sequence[str] = (),
    player: tuple[int, int] | None = None,
    scale: int = 2,
    every: int = 5,
    alpha: float = 0.35,
    cell: int = 8,
) -> np.ndarray:
    """Annotate an RGB frame whose grid cells are `cell` pixels: returns uint8
    (H * scale, W * scale, 3). Labels are cell coordinates (x along the top, y down the left)."""
    from PIL import Image, ImageDraw

    if frame.ndim == 2 or frame.shape[-1] == 1:
        frame = np.repeat(frame.reshape(frame.shape[0], frame.shape[1], 1), 3, axis=2)
    img = frame.astype(np.float32)
    rows, cols = frame.shape[0] // cell, frame.shape[1] // cell
    if classes is not None and len(names):
        tint = np.zeros((len(names), 3), np.float32)
        weight = np.zeros(len(names), np.float32)
        for i, name in enumerate(names):
            if name in CLASS_COLOURS:
                tint[i], weight[i] = CLASS_COLOURS[name], alpha
        ids = np.clip(classes[:rows, :cols], 0, len(names) - 1)
        w = np.repeat(np.repeat(weight[ids], cell, 0), cell, 1)[..., None]
        t = np.repeat(np.repeat(tint[ids], cell, 0), cell, 1)
        h_, w_ = rows * cell, cols * cell
        img[:h_, :w_] = img[:h_, :w_] * (1 - w) + t * w
    big = np.repeat(np.repeat(img.astype(np.uint8), scale, 0), scale, 1)
    step = cell * scale
    # grid lines: darkened every cell, white every `every` cells
    for axis, count in ((1, cols), (0, rows)):
        lines = np.minimum(np.arange(count + 1) * step, big.shape[axis] - 1)
        major = np.arange(count + 1) % every == 0
        if axis == 1:
            big[:, lines[~major]] = big[:, lines[~major]] * 2 // 5
            big[:, lines[major]] = 255
        else:
            big[lines[~major]] = big[lines[~major]] * 2 // 5
            big[lines[major]] = 255
    image = Image.fromarray(big)
    draw = ImageDraw.Draw(image)
    font = label_font()
    if player is not None:
        x0, y0 = player[0] * step, player[1] * step
        draw.rectangle(
            [x0 - 1, y0 - 1, x0 + step + 1, y0 + step + 1], outline=(255, 0, 255), width=2
        )
    for c in range(0, cols, every):
        _label(draw, font, c * step + 2, 1, str(c))
    for r in range(every, rows, every):
        _label(draw, font, 2, r * step + 1, str(r))
    return np.asarray(image, dtype=np.uint8)


def _label(draw: Any, font: Any, x: int, y: int, text: str) -> None:
    left, top, right, bottom = draw.textbbox((x, y), text, font=font)
    draw.rectangle([left - 1, top - 1, right + 1, bottom + 1], fill=(0, 0, 0))
    draw.text((x, y), text, fill=(255, 255, 0), font=font)


@config_wrapper()
class GridOverlay(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Adds `overlay`, uint8 (H * scale, W * scale, 3): the frame with grid, coordinates and (on GBA
    envs with `tiles.json`) semantic colours and the player's cell.

    Args:
        env: an env with an RGB observation (Box, or Dict with `pixels_key`).
        scale: enlargement (2 makes 8-pixel cells 16 pixels, room for the labels).
        every: label and highlight every `every` cells.
        semantic: tint cells by class when the classes are readable.
        alpha: opacity of the class tint.
        key, pixels_key: observation keys.
    """

    def __init__(
        self,
        env: gym.Env,
        scale: int = 2,
        every: int = 5,
        semantic: bool = True,
        alpha: float = 0.35,
        key: str = "overlay",
        pixels_key: str = "pixels",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            scale=scale,
            every=every,
            semantic=semantic,
            alpha=alpha,
            key=key,
            pixels_key=pixels_key,
        )
        gym.ObservationWrapper.__init__(self, env)
        if scale < 1 or every < 1:
            raise ValueError(f"scale and every must be >= 1, not {scale} and {every}")
        frame = pixels_space(env.observation_space, pixels_key)
        if len(frame.shape) != 3 or frame.shape[2] not in (1, 3):
            raise ValueError(
                f"GridOverlay needs an (H, W, 3) or (H, W, 1) frame, not {frame.shape}"
            )
        self.scale, self.every, self.alpha = int(scale), int(every), float(alpha)
        self.key, self.pixels_key = key, pixels_key
        self.reader = ScreenReader(env) if semantic and has_vram(env) else None
        # a GBA frame may be downscaled: the 20 x 30 grid then has smaller cells
        self.cell = frame.shape[0] // 20 if self.reader is not None else 8
        if self.cell < 1:
            raise ValueError(f"frame {frame.shape} is too small for a grid of 8-pixel cells")
        height, width = frame.shape[0] * self.scale, frame.shape[1] * self.scale
        self.observation_space = extend_space(
            env.observation_space,
            pixels_key,
            {key: spaces.Box(0, 255, (height, width, 3), np.uint8)},
        )
        self.image: np.ndarray | None = None

    def observation(self, observation: Any) -> dict[str, Any]:
        out = as_dict(observation, self.pixels_key)
        classes, names, player = None, (), None
        if self.reader is not None:
            screen = self.reader.read()
            classes = self.reader.classes(screen)
            names = self.reader.semantic.names if self.reader.semantic is not None else ()
            player = self.reader.player_cell(screen)
        frame = np.asarray(pixels(observation, self.pixels_key))
        self.image = draw_overlay(
            frame, classes, names, player, self.scale, self.every, self.alpha, self.cell
        )
        out[self.key] = self.image
        return out
