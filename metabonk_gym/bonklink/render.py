"""Software rendering of the arena game into 320x180 RGB frames (numpy only on the hot path).

Gameplay frames are a scrolled grid background plus squares for the player, enemies and
projectiles, and health / XP bars: a few vectorised numpy writes. Menu screens carry text, drawn
once with Pillow and cached, since they do not change while they are shown.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from metabonk_gym.bonklink.game import (
    GAME_OVER,
    LEVEL_UP,
    MAIN_MENU,
    ArenaGame,
    Rect,
    card_rects,
    start_button_rect,
)

__all__ = ["FrameRenderer"]

_GROUND = np.array([34, 52, 40], np.uint8)
_GRID = np.array([46, 70, 54], np.uint8)
_PLAYER = np.array([80, 200, 255], np.uint8)
_ENEMY = np.array([220, 60, 50], np.uint8)
_SHOT = np.array([255, 230, 90], np.uint8)
_HP_FULL = np.array([60, 210, 80], np.uint8)
_HP_EMPTY = np.array([90, 20, 20], np.uint8)
_XP = np.array([90, 140, 255], np.uint8)


class FrameRenderer:
    """Draws :class:`ArenaGame` states; owns its output buffer (copy a frame before keeping it).

    Args:
        width, height: the frame's size in pixels.
        pixels_per_unit: pixels per world unit (the camera's zoom).
    """

    def __init__(self, width: int = 320, height: int = 180, pixels_per_unit: float = 8.0) -> None:
        self.width, self.height, self.scale = width, height, pixels_per_unit
        self.grid = max(4, int(round(2 * pixels_per_unit)))  # a grid line every 2 world units
        self._frame = np.zeros((height, width, 3), np.uint8)
        big = np.empty((height + self.grid, width + self.grid, 3), np.uint8)
        big[:] = _GROUND
        big[:: self.grid, :] = _GRID
        big[:, :: self.grid] = _GRID
        self._background = big
        self._menu_cache: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._offsets = {size: _square_offsets(size) for size in (3, 5, 7)}

    def render(self, game: ArenaGame) -> np.ndarray:
        """Render the current screen; returns the internal (H, W, 3) buffer.

        >>> FrameRenderer(160, 90).render(ArenaGame(seed=0)).shape
        (90, 160, 3)
        """
        if game.menu in (MAIN_MENU, GAME_OVER):
            self._frame[:] = self._menu_screen(game)
            return self._frame
        self._draw_world(game)
        if game.menu == LEVEL_UP:
            overlay = self._menu_screen(game)
            for rect in card_rects()[: len(game.options)]:
                y0, y1, x0, x1 = self._pixels(rect)
                self._frame[y0:y1, x0:x1] = overlay[y0:y1, x0:x1]
        return self._frame

    # ------------------------------------------------------------------ gameplay

    def _draw_world(self, game: ArenaGame) -> None:
        w, h, s, g = self.width, self.height, self.scale, self.grid
        cam_x, cam_z = game.px * s, game.pz * s
        ox = int(cam_x) % g
        oy = (-int(cam_z)) % g
        frame = self._frame
        frame[:] = self._background[oy : oy + h, ox : ox + w]
        cx, cy = w / 2.0, h / 2.0
        n = game.n_enemies
        if n:
            xs = (game.ex[:n] * s - cam_x + cx).astype(np.int64)
            ys = (cy - (game.ez[:n] * s - cam_z)).astype(np.int64)
            self._squares(xs, ys, 7, _ENEMY)
        k = game.n_shots
        if k:
            xs = (game.sx[:k] * s - cam_x + cx).astype(np.int64)
            ys = (cy - (game.sz[:k] * s - cam_z)).astype(np.int64)
            self._squares(xs, ys, 3, _SHOT)
        px, py = int(cx), int(cy)
        frame[py - 4 : py + 5, px - 4 : px + 5] = _PLAYER
        # Health bar (top left) and XP bar (bottom).
        frac = 0.0 if game.max_health <= 0 else max(0.0, min(1.0, game.health / game.max_health))
        frame[4:9, 4:104] = _HP_EMPTY
        frame[4:9, 4 : 4 + int(round(100 * frac))] = _HP_FULL
        prev = game.next_level_xp - game.xp_for_level(game.level)
        span = max(1e-6, game.next_level_xp - prev)
        xp_frac = max(0.0, min(1.0, (game.xp - prev) / span))
        frame[h - 4 : h - 1, 0 : int(w * xp_frac)] = _XP

    def _squares(self, xs: np.ndarray, ys: np.ndarray, size: int, color: np.ndarray) -> None:
        dy, dx = self._offsets[size]
        yy = (ys[:, None] + dy[None, :]).ravel()
        xx = (xs[:, None] + dx[None, :]).ravel()
        inside = (yy >= 0) & (yy < self.height) & (xx >= 0) & (xx < self.width)
        self._frame[yy[inside], xx[inside]] = color

    # ------------------------------------------------------------------ menus

    def _pixels(self, rect: Rect) -> tuple[int, int, int, int]:
        return (
            int(rect.y0 * self.height),
            int(rect.y1 * self.height),
            int(rect.x0 * self.width),
            int(rect.x1 * self.width),
        )

    def _menu_screen(self, game: ArenaGame) -> np.ndarray:
        key = (game.menu, game.options if game.menu == LEVEL_UP else ())
        cached = self._menu_cache.get(key)
        if cached is None:
            cached = self._draw_menu(*key)
            if len(self._menu_cache) > 256:
                self._menu_cache.clear()
            self._menu_cache[key] = cached
        return cached

    def _draw_menu(self, menu: str, options: tuple[str, ...]) -> np.ndarray:
        image = Image.new("RGB", (self.width, self.height), (18, 18, 30))
        draw = ImageDraw.Draw(image)
        if menu == LEVEL_UP:
            for i, (rect, text) in enumerate(zip(card_rects(), options, strict=False)):
                y0, y1, x0, x1 = self._pixels(rect)
                draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=(60, 50, 110), outline=(220, 200, 90))
                draw.text((x0 + 4, y0 + 6), f"{i + 1}", fill=(255, 240, 150))
                for j, word in enumerate(text.split(" ")):
                    draw.text((x0 + 4, y0 + 22 + 12 * j), word, fill=(240, 240, 240))
            return np.array(image)
        title = "MEGABONK-LIKE ARENA (bonklink-sim)" if menu == MAIN_MENU else "YOU DIED"
        draw.text((self.width // 2 - 3 * len(title), int(0.25 * self.height)), title, fill="white")
        y0, y1, x0, x1 = self._pixels(start_button_rect())
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=(50, 120, 60), outline=(230, 230, 230))
        label = "PLAY" if menu == MAIN_MENU else "RETRY"
        draw.text(((x0 + x1) // 2 - 3 * len(label), (y0 + y1) // 2 - 5), label, fill="white")
        return np.array(image)


def _square_offsets(size: int) -> tuple[np.ndarray, np.ndarray]:
    half = size // 2
    dy, dx = np.meshgrid(np.arange(-half, half + 1), np.arange(-half, half + 1), indexing="ij")
    return dy.ravel(), dx.ravel()
