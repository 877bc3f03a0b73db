"""`TextMap`: the screen as text for a language model: an ASCII map with coordinates and a legend,
and a short spatial description (player position, open directions, nearest door / key / enemy
with direction and distance).

Why: a text-only model cannot see, and even a VLM reads grid positions more reliably from text.
Cells come from the semantic classes of the integration's `tiles.json` (VRAM path), so the map
is exact. Coordinates are (x, y) = (column, row) of the 30 x 20 cell grid, the same as
BonkQuest's `player_x` / `player_y`; "up" is y - 1.

The text goes to `info["text_map"]` and `info["spatial"]` every step; the observation gets
`ascii`, the map's characters as a (20, 30) uint8 array (for policies).

>>> import gymnasium as gym, metabonk_gym
>>> env = TextMap(gym.make("MetaBonk/BonkQuest-v0"))
>>> obs, info = env.reset(seed=0)
>>> print(info["spatial"].splitlines()[0])
Player at (9, 10).
>>> "@ player" in info["text_map"], obs["ascii"].shape
(True, (20, 30))
>>> env.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers._dict_obs import as_dict, extend_space
from metabonk_gym.wrappers.registry import config_wrapper
from metabonk_gym.wrappers.screen import ScreenReader
from metabonk_gym.wrappers.semantic import CHARS, PASSABLE

from metabonk_gym.configfile import load_optional

#: What `describe` looks for, in this order: label -> class names.
LANDMARKS: dict[str, tuple[str, ...]] = {
    "door": ("door", "door_locked"),
    "key": ("key",),
    "chest": ("chest",),
    "npc": ("npc",),
    "heart": ("heart",),
    "treasure": ("treasure",),
    "gem": ("gem",),
    "item": ("item",),
    "enemy": ("enemy",),
}
DIRECTIONS = (("up", 0, -1), ("down", 0, 1), ("left", -1, 0), ("right", 1, 0))
#: The title line's info variables when the game folder's text_map.yaml names none.
TITLE_VARIABLES: tuple[str, ...] = ("hp", "max_hp")


def title_variables(env: gym.Env) -> tuple[str, ...]:
    """The info variables a game puts on the map's title line: `title` of its folder's
    `text_map.yaml` (e.g. `[room, hp, max_hp, keys]`), else `TITLE_VARIABLES`."""
    legend = load_optional(env.unwrapped.game_data.folder, "text_map")  # type: ignore[attr-defined]
    title = legend.get("title") if isinstance(legend, dict) else None
    return tuple(str(k) for k in title) if title else TITLE_VARIABLES


def char_of(name: str) -> str:
    """The map character of a class name.

    >>> char_of("wall"), char_of("lava")
    ('#', 'l')
    """
    return CHARS.get(name, name[:1] or "?")


def ascii_map(
    classes: np.ndarray, names: Sequence[str], player: tuple[int, int] | None = None, every: int = 5
) -> str:
    """The grid as text: column numbers on top (tens, then units), row numbers on the left, the
    player as `@`, then a legend of the characters used.

    >>> print(ascii_map(np.array([[3, 3, 3], [3, 2, 3]]), ["none", "empty", "floor", "wall"], (1, 1)))
        000
        012
     0 |###|
     1 |#@#|
    Legend: @ player, # wall
    """
    rows, cols = classes.shape
    lut = np.array([ord(char_of(n)) for n in names], np.uint8)
    grid = lut[np.clip(classes, 0, len(names) - 1)]
    if player is not None and 0 <= player[0] < cols and 0 <= player[1] < rows:
        grid = grid.copy()
        grid[player[1], player[0]] = ord("@")
    width = len(str(rows - 1))
    pad = " " * (width + 3)
    lines = [
        pad + "".join(str(c // 10 % 10) for c in range(cols)),
        pad + "".join(str(c % 10) for c in range(cols)),
    ]
    for r in range(rows):
        lines.append(f"{r:>{width + 1}} |{grid[r].tobytes().decode('ascii')}|")
    used = {chr(c) for c in np.unique(grid)}
    legend = ["@ player"] if "@" in used else []
    seen = {"@", " "}
    for class_id in np.unique(classes):
        name = names[int(class_id)] if 0 <= class_id < len(names) else "none"
        ch = char_of(name)
        if ch in used and ch not in seen and name != "player":
            seen.add(ch)
            legend.append(f"{ch} {name}")
    lines.append("Legend: " + ", ".join(legend))
    return "\n".join(lines)


def _offset(dx: int, dy: int) -> str:
    parts = []
    if dx:
        parts.append(f"{abs(dx)} {'right' if dx > 0 else 'left'}")
    if dy:
        parts.append(f"{abs(dy)} {'down' if dy > 0 else 'up'}")
    return ", ".join(parts) or "here"


def describe(classes: np.ndarray, names: Sequence[str], player: tuple[int, int] | None) -> str:
    """A few lines on where the player is, which ways are open, and the nearest landmarks
    (Manhattan distance in cells).

    >>> c = np.full((4, 5), 2); c[0, :] = 3; c[2, 4] = 5; c[3, 0] = 15
    >>> print(describe(c, ["none", "empty", "floor", "wall", "water", "door", "", "", "", "", "", "", "",
    ...                    "", "", "enemy"], (1, 1)))
    Player at (1, 1).
    Open: down, left, right. Blocked: up (wall).
    Nearest door at (4, 2): 3 right, 1 down (distance 4).
    Nearest enemy at (0, 3): 1 left, 2 down (distance 3); 1 enemy on screen.
    """
    if player is None:
        return "Player not visible."
    rows, cols = classes.shape
    px, py = player
    lines = [f"Player at ({px}, {py})."]
    index = {n: i for i, n in enumerate(names)}
    open_: list[str] = []
    blocked: list[str] = []
    for label, dx, dy in DIRECTIONS:
        x, y = px + dx, py + dy
        if not (0 <= x < cols and 0 <= y < rows):
            blocked.append(f"{label} (edge)")
            continue
        name = names[int(classes[y, x])] if 0 <= classes[y, x] < len(names) else "none"
        (open_ if name in PASSABLE else blocked).append(
            label if name in PASSABLE else f"{label} ({name})"
        )
    lines.append(f"Open: {', '.join(open_) or 'none'}. Blocked: {', '.join(blocked) or 'none'}.")
    ys, xs = np.mgrid[0:rows, 0:cols]
    distance = np.abs(xs - px) + np.abs(ys - py)
    for label, class_names in LANDMARKS.items():
        ids = [index[n] for n in class_names if n in index]
        if not ids:
            continue
        mask = np.isin(classes, ids)
        mask[py, px] = False
        if not mask.any():
            continue
        d = np.where(mask, distance, 1 << 20)
        y, x = (int(v) for v in np.unravel_index(int(np.argmin(d)), d.shape))
        name = names[int(classes[y, x])]
        what = label if name == label else name.replace("_", " ")
        line = f"Nearest {what} at ({x}, {y}): {_offset(int(x) - px, int(y) - py)} (distance {int(d[y, x])})"
        if label == "enemy":
            count = _count_objects(mask)
            line += f"; {count} {'enemy' if count == 1 else 'enemies'} on screen"
        lines.append(line + ".")
    return "\n".join(lines)


def _count_objects(mask: np.ndarray) -> int:
    """Connected groups of cells (4-neighbourhood): sprites larger than a cell count once."""
    from scipy import ndimage

    return int(ndimage.label(mask)[1])


@config_wrapper()
class TextMap(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds `info["text_map"]`, `info["spatial"]` and `obs["ascii"]` on MetaBonk GBA envs with a
    `tiles.json` (both bundled games).

    Args:
        env: a MetaBonk GBA env (possibly wrapped).
        title: put a title line in `text_map`: the game's name and the info variables its
            folder's `text_map.yaml` names under `title` (default: hp, max_hp).
        key: observation key of the character grid (None: leave the observation alone).
        pixels_key: where a Box observation goes in the Dict.
    """

    #: info keys this wrapper adds (vector envs send them every step by default)
    added_info_keys: tuple[str, ...] = ("text_map", "spatial")

    def __init__(
        self,
        env: gym.Env,
        title: bool = True,
        key: str | None = "ascii",
        pixels_key: str = "pixels",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, title=title, key=key, pixels_key=pixels_key)
        gym.Wrapper.__init__(self, env)
        self.reader = ScreenReader(env)
        if self.reader.semantic is None:
            raise ValueError(
                f"{self.reader.game} has no tiles.json with semantic classes; TextMap needs "
                "one (see docs/wrappers.md, 'Semantic classes')"
            )
        self.semantic = self.reader.semantic
        self.title = title
        self.title_variables = title_variables(env)
        self.key = key
        self.pixels_key = pixels_key
        if key is not None:
            self.observation_space = extend_space(
                env.observation_space, pixels_key, {key: spaces.Box(0, 127, (20, 30), np.uint8)}
            )
        self.text_map = ""
        self.spatial = ""
        self.player: tuple[int, int] | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.reader.reset()
        return self._annotate(obs, info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs, info = self._annotate(obs, info)
        return obs, reward, terminated, truncated, info

    def _annotate(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        screen = self.reader.read()
        classes = self.reader.classes(screen)
        assert classes is not None
        self.player = self.reader.player_cell(screen, info)
        names = self.semantic.names
        body = ascii_map(classes, names, self.player)
        header = self._header(info) if self.title else ""
        self.text_map = f"{header}\n{body}" if header else body
        self.spatial = describe(classes, names, self.player)
        info = dict(info)
        info["text_map"] = self.text_map
        info["spatial"] = self.spatial
        if self.key is not None:
            out = as_dict(obs, self.pixels_key)
            lut = np.array([ord(char_of(n)) for n in names], np.uint8)
            grid = lut[classes]
            if self.player is not None:
                grid[self.player[1], self.player[0]] = ord("@")
            out[self.key] = grid
            obs = out
        return obs, info

    def _header(self, info: dict[str, Any]) -> str:
        name = self.reader.game
        fields = [f"{k}={info[k]}" for k in self.title_variables if k in info]
        return f"{name}: " + " ".join(fields) if fields else name
