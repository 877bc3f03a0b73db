"""Software rendering of the arena game into 320x180 RGB frames (numpy only on the hot path).

Gameplay frames are a scrolled grid background plus squares for the player, enemies and
projectiles, and health / XP bars: a few vectorised numpy writes. Menu screens carry text, drawn
once with Pillow and cached, since they do not change while they are shown.

Two looks. ``"plain"`` (the default, what the reference trajectories were recorded with): a
faint grid scrolled by whole pixels and a featureless player. ``"detailed"`` draws what a 3D game
like Megabonk shows of the player's input, so that a model watching the video can see it: a
textured ground (grass patches and stones, not only a periodic grid) that scrolls smoothly
(sub-pixel, as a game's camera does), the character facing where it runs, its attack pose while
the fire button is held and its own shots apart from the automatic weapon's, and the area
ability's ring when it goes off.

>>> from metabonk_gym.bonklink.codec import Action
>>> game = ArenaGame(seed=0)
>>> game.tick(Action(interact=True))
>>> plain = FrameRenderer(160, 90).render(game).copy()
>>> detailed = FrameRenderer(160, 90, look="detailed").render(game)
>>> bool((plain != detailed).any()), detailed.shape
(True, (90, 160, 3))
"""

from __future__ import annotations

from typing import Literal

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

__all__ = ["LOOKS", "FrameRenderer", "Look"]

Look = Literal["plain", "detailed"]
#: The renderer's looks (``bonklink-sim --look``).
LOOKS: tuple[str, ...] = ("plain", "detailed")

_GROUND = np.array([34, 52, 40], np.uint8)
_GRID = np.array([46, 70, 54], np.uint8)
_PLAYER = np.array([80, 200, 255], np.uint8)
_ENEMY = np.array([220, 60, 50], np.uint8)
_SHOT = np.array([255, 230, 90], np.uint8)
_HP_FULL = np.array([60, 210, 80], np.uint8)
_HP_EMPTY = np.array([90, 20, 20], np.uint8)
_XP = np.array([90, 140, 255], np.uint8)
# The detailed look's extras.
_FACE = np.array([235, 250, 255], np.uint8)
_MUZZLE = np.array([255, 160, 30], np.uint8)  # an orange flash, not the facing mark
_MANUAL_SHOT = np.array([255, 255, 255], np.uint8)
_RING = np.array([200, 120, 255], np.float32)
#: Seconds the ability's ring stays on screen after it goes off (it fades).
RING_SECONDS = 0.3


def _on_screen(
    x: np.ndarray, z: np.ndarray, scale: float, cam_x: float, cam_z: float, cx: float, cy: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pixel columns and rows of ground points (x, z) around a camera at (cam_x, cam_z) that
    shows them `scale` pixels a unit, the camera at pixel (cx, cy); z grows up the screen."""
    xs = (x * scale - cam_x + cx).astype(np.int64)
    ys = (cy - (z * scale - cam_z)).astype(np.int64)
    return xs, ys


class FrameRenderer:
    """Draws :class:`ArenaGame` states; owns its output buffer (copy a frame before keeping it).

    Args:
        width, height: the frame's size in pixels.
        pixels_per_unit: pixels per world unit (the camera's zoom).
        look: ``"plain"`` or ``"detailed"`` (see the module's docstring).
    """

    def __init__(
        self,
        width: int = 320,
        height: int = 180,
        pixels_per_unit: float = 8.0,
        look: Look = "plain",
    ) -> None:
        if look not in LOOKS:
            raise ValueError(f"look must be one of {', '.join(LOOKS)}, not {look!r}")
        self.look = look
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
        self._rings: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if look == "detailed":
            self._tile = _ground_tile(int(round(32 * pixels_per_unit)), pixels_per_unit)
            period = self._tile.shape[0]
            reps = (-(-(height + period + 1) // period), -(-(width + period + 1) // period), 1)
            self._ground = np.tile(self._tile, reps).astype(np.float32)

    def render(self, game: ArenaGame) -> np.ndarray:
        """Render the current screen; returns the internal (H, W, 3) buffer.

        >>> FrameRenderer(160, 90).render(ArenaGame(seed=0)).shape
        (90, 160, 3)
        """
        if game.menu in (MAIN_MENU, GAME_OVER):
            self._frame[:] = self._menu_screen(game)
            return self._frame
        if self.look == "detailed":
            self._draw_detailed(game)
        else:
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
            xs, ys = _on_screen(game.ex[:n], game.ez[:n], s, cam_x, cam_z, cx, cy)
            self._squares(xs, ys, 7, _ENEMY)
        k = game.n_shots
        if k:
            xs, ys = _on_screen(game.sx[:k], game.sz[:k], s, cam_x, cam_z, cx, cy)
            self._squares(xs, ys, 3, _SHOT)
        px, py = int(cx), int(cy)
        frame[py - 4 : py + 5, px - 4 : px + 5] = _PLAYER
        self._draw_bars(game)

    def _draw_bars(self, game: ArenaGame) -> None:
        """Health bar (top left) and XP bar (bottom)."""
        frame, w, h = self._frame, self.width, self.height
        frac = 0.0 if game.max_health <= 0 else max(0.0, min(1.0, game.health / game.max_health))
        frame[4:9, 4:104] = _HP_EMPTY
        frame[4:9, 4 : 4 + int(round(100 * frac))] = _HP_FULL
        prev = game.next_level_xp - game.xp_for_level(game.level)
        span = max(1e-6, game.next_level_xp - prev)
        xp_frac = max(0.0, min(1.0, (game.xp - prev) / span))
        frame[h - 4 : h - 1, 0 : int(w * xp_frac)] = _XP

    def _draw_detailed(self, game: ArenaGame) -> None:
        """The detailed look: smooth-scrolled textured ground, a facing character, its attack."""
        w, h, s = self.width, self.height, self.scale
        cam_x, cam_z = game.px * s, game.pz * s
        period = self._tile.shape[0]
        fx, fy = cam_x % period, (-cam_z) % period
        ix, iy = int(fx), int(fy)
        ax, ay = fx - ix, fy - iy
        g = self._ground
        # bilinear: the camera sits between pixels as a game's does, so slow motion shows
        top = (1 - ax) * g[iy : iy + h, ix : ix + w] + ax * g[iy : iy + h, ix + 1 : ix + w + 1]
        bottom = (1 - ax) * g[iy + 1 : iy + h + 1, ix : ix + w] + ax * g[
            iy + 1 : iy + h + 1, ix + 1 : ix + w + 1
        ]
        frame = self._frame
        frame[:] = ((1 - ay) * top + ay * bottom + 0.5).astype(np.uint8)
        cx, cy = w / 2.0, h / 2.0
        cooldown = game.config.ability_cooldown
        age = cooldown - game.ability_timer
        if 0.0 <= age < RING_SECONDS and game.ability_timer > 0:
            radius = game.config.ability_radius * game.area_mult * s
            self._ring(int(cx), int(cy), int(round(radius)), 1.0 - age / RING_SECONDS)
        n = game.n_enemies
        if n:
            xs, ys = _on_screen(game.ex[:n], game.ez[:n], s, cam_x, cam_z, cx, cy)
            self._squares(xs, ys, 7, _ENEMY)
        k = game.n_shots
        if k:
            xs, ys = _on_screen(game.sx[:k], game.sz[:k], s, cam_x, cam_z, cx, cy)
            manual = game.sman[:k]
            self._squares(xs[~manual], ys[~manual], 3, _SHOT)
            self._squares(xs[manual], ys[manual], 5, _MANUAL_SHOT)
        px, py = int(cx), int(cy)
        frame[py - 4 : py + 5, px - 4 : px + 5] = _PLAYER
        # the character faces where it runs (its last heading when it stands)
        self._squares(
            np.array([px + int(round(7 * game.face_x))]),
            np.array([py - int(round(7 * game.face_z))]),
            5,
            _FACE,
        )
        if game.firing:  # the attack pose: the weapon raised toward the aim
            self._squares(
                np.array([px + int(round(12 * game.fire_x))]),
                np.array([py - int(round(12 * game.fire_z))]),
                7,
                _MUZZLE,
            )
        self._draw_bars(game)

    def _ring(self, cx: int, cy: int, radius: int, strength: float) -> None:
        """A ring of `radius` pixels around (cx, cy), blended in with `strength` (0..1)."""
        offsets = self._rings.get(radius)
        if offsets is None:
            angles = np.linspace(0.0, 2.0 * np.pi, max(16, 8 * radius), endpoint=False)
            pts = {
                (int(round(r * np.sin(a))), int(round(r * np.cos(a))))
                for a in angles
                for r in (radius - 1, radius)
            }
            offsets = (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
            self._rings[radius] = offsets
        yy, xx = offsets[0] + cy, offsets[1] + cx
        inside = (yy >= 0) & (yy < self.height) & (xx >= 0) & (xx < self.width)
        yy, xx = yy[inside], xx[inside]
        old = self._frame[yy, xx].astype(np.float32)
        self._frame[yy, xx] = (old + strength * (_RING - old)).astype(np.uint8)

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


def _ground_tile(size: int, pixels_per_unit: float) -> np.ndarray:
    """A tileable `size` x `size` ground texture: grass tones varying smoothly, darker and
    lighter patches and stones, and the grid every 2 world units (fixed seed: every sim draws
    the same world)."""
    rng = np.random.default_rng(20251125)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) * (2.0 * np.pi / size)
    tone = np.zeros((size, size), np.float32)
    for _ in range(6):  # smooth variation, periodic in the tile
        kx, ky = rng.integers(1, 4, 2)
        tone += rng.uniform(3, 7) * np.sin(kx * xx + ky * yy + rng.uniform(0, 2 * np.pi))
    tile = np.empty((size, size, 3), np.float32)
    tile[:] = _GROUND.astype(np.float32)
    tile += tone[..., None] * np.array([0.6, 1.0, 0.7], np.float32)
    iy, ix = np.mgrid[0:size, 0:size]
    patches = max(8, int(0.0015 * size * size / max(1.0, pixels_per_unit / 8.0) ** 2))
    for _ in range(patches):
        cy, cx = rng.uniform(0, size, 2)
        radius = rng.uniform(0.3, 0.9) * pixels_per_unit
        dy = (iy - cy + size / 2) % size - size / 2  # wrap: the tile stays seamless
        dx = (ix - cx + size / 2) % size - size / 2
        inside = dx * dx + dy * dy <= radius * radius
        if rng.random() < 0.15:  # a stone: brown-grey, darker than any sprite
            tile[inside] = np.array([78, 72, 60], np.float32) + rng.uniform(-8, 8)
        else:  # a darker or lighter grass patch
            tile[inside] += (
                rng.choice([-1.0, 1.0])
                * rng.uniform(14, 26)
                * np.array([0.5, 1.0, 0.6], np.float32)
            )
    grid = max(4, int(round(2 * pixels_per_unit)))
    tile[::grid, :] = _GRID
    tile[:, ::grid] = _GRID
    return np.clip(tile, 0, 255).astype(np.uint8)


def _square_offsets(size: int) -> tuple[np.ndarray, np.ndarray]:
    half = size // 2
    dy, dx = np.meshgrid(np.arange(-half, half + 1), np.arange(-half, half + 1), indexing="ij")
    return dy.ravel(), dx.ravel()
