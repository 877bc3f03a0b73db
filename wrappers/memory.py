"""`Memory`: a wrapper that writes what the agent sees and does into a long-term knowledge graph.

What: every step it hands the game's variables (and, when they can have changed, its RAM arrays)
to a `WorldMemory` (`metabonk_gym.memory`): areas, doors between them, tiles, entities, events
and the quest log of the game folder's `quests.yaml`, buffered and written every `flush_every`
steps (and at an episode's end once a quarter of that is buffered) into an embedded `ladybug` database at `path` (or a Neo4j server
at a `bolt://` URL). `info["memory"]` has its counters (areas, quests_done, ...);
`prompt_section(view)` is the "## Memory" part of the strategist's prompt (`PauseToThink` over this
wrapper finds it). A locked or corrupt database is a `MemoryStoreError` here, before the run
starts; a write failing later is logged and counted (`flush_errors`) and the run goes on.
Why a wrapper: the memory follows any agent (PPO, the expert, a VLM) and persists across
episodes and runs.

>>> import gymnasium as gym, metabonk_gym
>>> env = Memory(gym.make("MetaBonk/BonkQuest-v0"), path=None)
>>> _ = env.reset(seed=0)
>>> info = env.step(0)[-1]
>>> info["memory"]["areas"], env.memory.log.quests[0].status
(1, 'open')
>>> env.close()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.utils import RecordConstructorArgs
from metabonk_gym.wrappers.registry import config_wrapper

from metabonk_gym.contract import HasRam
from metabonk_gym.errors import IntegrationError
from metabonk_gym.gamedata import GameData
from metabonk_gym.memory.prompt import memory_text
from metabonk_gym.memory.world import WorldMemory


@config_wrapper(dict_obs=False)
class Memory(gym.Wrapper[Any, Any, Any, Any], RecordConstructorArgs):
    """See the module docstring.

    Args:
        env: an env of the suite whose game folder has a `quests.yaml` (others still get the
            player, areas and events they declare: none without one).
        path: the database: a file path (created; kept across runs), a `neo4j://` or
            `bolt://` URL, or None (in memory, gone at close).
        flush_every: steps between two batched writes (an episode's end writes too once a
            quarter of that is buffered; `close` always does).
        tile_every: steps between two reads of the tile array when no variable said it changed.
        tile_nodes: "landmarks" (doors as Tile nodes, every cell in its Area's grid) or "all".
        budget_tokens: the most tokens `prompt_section` may use.
        **store_kwargs: go to the store (`auth=("neo4j", "secret")` for a Neo4j server).
    """

    #: info keys this wrapper adds (vector envs send them every step by default)
    added_info_keys: tuple[str, ...] = ("memory",)

    def __init__(
        self,
        env: gym.Env,
        path: str | Path | None = None,
        flush_every: int = 1024,
        tile_every: int = 8,
        tile_nodes: str = "landmarks",
        budget_tokens: int = 250,
        **store_kwargs: Any,
    ) -> None:
        RecordConstructorArgs.__init__(
            self,
            path=str(path) if path is not None else None,
            flush_every=flush_every,
            tile_every=tile_every,
            tile_nodes=tile_nodes,
            budget_tokens=budget_tokens,
        )
        gym.Wrapper.__init__(self, env)
        game = getattr(env.unwrapped, "game_data", None)
        if not isinstance(game, GameData):
            raise IntegrationError(
                "Memory needs an env of the suite (env.unwrapped.game_data is its game folder)"
            )
        self.memory = WorldMemory(
            game,
            path,
            flush_every=flush_every,
            tile_every=tile_every,
            tile_nodes=tile_nodes,
            **store_kwargs,
        )
        self.budget_tokens = int(budget_tokens)
        base = env.unwrapped
        self._ram = base if isinstance(base, HasRam) else None
        spec = self.memory.spec
        wanted = [spec.tiles, *(n for e in spec.entities for n in (e.x, e.y, e.active))]
        known = self._ram.integration.arrays if self._ram is not None else {}
        self._arrays = [n for n in dict.fromkeys(wanted) if n and n in known]

    def _values(self, info: dict[str, Any]) -> dict[str, int]:
        if self._ram is not None:
            return self._ram.variables()
        return {k: int(v) for k, v in info.items() if isinstance(v, (int, np.integer, bool, float))}

    def _read_arrays(self) -> dict[str, np.ndarray]:
        assert self._ram is not None or not self._arrays
        return {n: self._ram.read_array(n) for n in self._arrays} if self._ram else {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.memory.reset(self._values(info), self._read_arrays())
        return obs, self._info(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        values = self._values(info)
        arrays = self._read_arrays() if self._arrays and self.memory.wants_tiles(values) else None
        self.memory.observe(values, arrays)
        if terminated or truncated:
            self.memory.end_episode()
        return obs, reward, terminated, truncated, self._info(info)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = dict(info)
        info["memory"] = self.memory.stats()
        return info

    def prompt_section(self, view: Any = None) -> str:
        """The "## Memory" section of the strategist's prompt (quest log head, remembered facts),
        at most `budget_tokens` tokens."""
        return memory_text(self.memory, self.budget_tokens)

    def close(self) -> None:
        self.memory.close()
        super().close()
