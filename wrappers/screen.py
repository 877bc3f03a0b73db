"""`ScreenReader`: what the wrappers know about a GBA env's screen: decoded tiles, semantic classes
and the player's cell, read straight from VRAM.

Why one place: `TileTokens`, `TextMap` and `GridOverlay` all need the same decoding; each keeps
its own reader (so any of them works alone), and a reader is cheap beside the env step
(`TileTokens`' VRAM path in docs/benchmarks.md#wrappers).

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0"); _ = env.reset(seed=0)
>>> reader = ScreenReader(env)
>>> screen = reader.read()
>>> classes = reader.classes(screen)
>>> reader.semantic.name(classes[reader.player_cell(screen)[::-1]])
'player'
>>> env.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from metabonk_gym.wrappers.semantic import SemanticClasses
from metabonk_gym.wrappers.vram import ScreenTiles, VramTokenizer, read_snapshot

from metabonk_gym.contract import HasVram


def has_vram(env: Any) -> bool:
    """True when `env.unwrapped` has display memory (`HasVram`: its bus reads through `memory`)."""
    return isinstance(env.unwrapped, HasVram)


class ScreenReader:
    """Decodes a GBA env's screen from VRAM; `semantic` is None without a `tiles.json`.

    Args:
        env: a GBA env (any wrapper stack).
        sprites: decode OAM sprites too.
    """

    def __init__(self, env: Any, sprites: bool = True) -> None:
        if not has_vram(env):
            raise TypeError(
                f"{env.unwrapped!r} has no readable GBA memory; the VRAM path needs a "
                "MetaBonk GBA env. Use source='pixels' for other envs."
            )
        self.env = env
        #: the integration's name (e.g. "BonkQuest")
        self.game: str = str(env.unwrapped.integration.name)
        self.tokenizer = VramTokenizer(sprites=sprites)
        self.semantic = SemanticClasses.for_env(env)
        self.last: ScreenTiles | None = None
        self._last_player: tuple[int, int] | None = None

    def reset(self) -> None:
        self._last_player = None

    def read(self) -> ScreenTiles:
        """Decode the screen now (the frame is fetched only in bitmap modes)."""
        base = self.env.unwrapped
        # render() gives the frame in rgb_array mode and None (after drawing) in human mode
        frame = base.render if base.render_mode != "human" else None
        self.last = self.tokenizer.decode(read_snapshot(self.env), frame=frame)
        return self.last

    def classes(self, screen: ScreenTiles) -> np.ndarray | None:
        if self.semantic is None:
            return None
        return self.semantic.cells(
            screen.tile_index, screen.charblock, screen.sprites, screen.sprite_cells
        )

    def player_cell(
        self, screen: ScreenTiles, info: Mapping[str, Any] | None = None
    ) -> tuple[int, int] | None:
        """(x, y) cell of the player: the centre of the front sprite of class "player"; while it is
        hidden (blinking), the last cell seen; before that, the integration's `player` variables
        read as cells when they fit the grid (None when nothing is known)."""
        if self.semantic is not None and len(screen.sprites):
            player = self.semantic.id("player")
            kinds = self.semantic.obj[screen.sprites[:, 5] & 0x3FF]
            rows = np.flatnonzero(kinds == player) if player else np.zeros(0, np.int64)
            if len(rows):
                x, y, w, h = (int(v) for v in screen.sprites[rows[0], :4])
                cell = (min(max((x + w // 2) // 8, 0), 29), min(max((y + h // 2) // 8, 0), 19))
                self._last_player = cell
                return cell
        if self._last_player is not None:
            return self._last_player
        names = getattr(
            self.env.unwrapped, "integration", None
        ) and self.env.unwrapped.integration.extension.get("player")
        if info is not None and names and all(n in info for n in names):
            x, y = int(info[names[0]]), int(info[names[1]])
            if 0 <= x < 30 and 0 <= y < 20:
                return (x, y)
        return None
