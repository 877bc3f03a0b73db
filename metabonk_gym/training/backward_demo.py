"""The backward algorithm's demonstration: the explorer's best path replayed into savestates.

`record_demo` replays the archive's best cell from its start in one worker and writes a savestate
every `every` steps; `Demo` holds them with each point's step and score, what success means (the
game's win or the last score) and the path's waypoints (its RAM cells, `demo_waypoints`).
Robustifying (`backward.run_robustify`) starts its episodes from these points.

>>> Demo([Path("a"), Path("b")], [0, 50], [0.0, 1.0], True, None, "start", 0).allowance(0)
200
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.gba.backends import write_state_file
from metabonk_gym.registration import env_traits
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.explore import ARCHIVE_FILE, EXPLORE_OBS
from metabonk_gym.training.explore_archive import Archive, ArchiveError
from metabonk_gym.training.explore_cells import Cells, RamCells, cells_from_dict
from metabonk_gym.training.explore_worker import ExploreWorker
from metabonk_gym.training.runtrust import RUN_ENV_KWARGS, check_value
from metabonk_gym.vector import make_vec

#: Steps an episode from a point may take: this many times the demonstration's rest, plus
#: `EPISODE_MARGIN` steps.
EPISODE_SLACK = 2.0
EPISODE_MARGIN = 100


@dataclass
class Demo:
    """The demonstration: start points (savestate files), their step along it, the score
    there, and what success means."""

    paths: list[Path]
    steps: list[int]
    scores: list[float]
    won: bool
    goal: dict[str, Any] | None
    state: str | None
    game_seed: int
    actions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    #: The path's waypoints (`demo_waypoints`): their (variable, bucket) columns, the cells,
    #: and the step at which the path entered each.
    waypoint_columns: list[tuple[str, int]] = field(default_factory=list)
    waypoints: list[tuple[int, ...]] = field(default_factory=list)
    waypoint_steps: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.steps[-1]

    def waypoints_after(self, point: int) -> list[tuple[int, ...]]:
        """The waypoints the path entered after `point`: what an episode started there follows."""
        step = self.steps[point]
        return [w for w, at in zip(self.waypoints, self.waypoint_steps) if at > step]

    def allowance(self, point: int) -> int:
        """Steps an episode from `point` may take."""
        return int(EPISODE_SLACK * (self.length - self.steps[point])) + EPISODE_MARGIN


def demo_waypoints(
    cells: Cells, keys: Sequence[Sequence[int]]
) -> tuple[list[tuple[str, int]], list[tuple[int, ...]], list[int]]:
    """A path's waypoints from its cell key at every step: the cells over every column but the
    preferred variable's (a policy with more HP than the path had is on it all the same), each
    where the path entered it from another; nothing for screen cells.

    >>> from metabonk_gym.training.explore_cells import parse_cells
    >>> cells = parse_cells({"variables": {"room": 1, "x": 3, "hp": 2}, "prefer": "hp"},
    ...                     ["room", "x", "hp"], "c")
    >>> demo_waypoints(cells, [[1, 0, 2], [1, 0, 1], [1, 1, 1], [2, 0, 1]])
    ([('room', 1), ('x', 3)], [(1, 0), (1, 1), (2, 0)], [0, 2, 3])
    """
    if not isinstance(cells, RamCells) or not keys:
        return [], [], []
    keep = [i for i in range(len(cells.variables)) if i != cells.prefer_column]
    waypoints: list[tuple[int, ...]] = []
    steps: list[int] = []
    for step, key in enumerate(keys):
        cell = tuple(int(key[i]) for i in keep)
        if not waypoints or waypoints[-1] != cell:
            waypoints.append(cell)
            steps.append(step)
    return [cells.variables[i] for i in keep], waypoints, steps


def load_demo_archive(explore_dir: Path) -> tuple[Archive, int]:
    """The explorer's archive in `explore_dir` and its best cell."""
    archive = Archive.load(explore_dir / ARCHIVE_FILE)
    best = archive.best()
    if archive.lengths[best] < 1:
        raise ArchiveError(
            f"{explore_dir / ARCHIVE_FILE}: its best cell is the start itself; explore longer"
        )
    return archive, best


def archive_env_kwargs(
    archive: Archive, path: Path, given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The env kwargs to replay and train with: the user's (`given`, they replace the
    archive's), else the archive's, which, like a shared run's, may hold data options only
    (`runtrust.RUN_ENV_KWARGS`): never a program, URL or path.

    >>> archive = Archive(meta={"env_kwargs": {"skyemu_binary": "/bin/sh"}})
    >>> archive_env_kwargs(archive, Path("a.npz"), None)
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ArchiveError: a.npz sets env_kwargs.skyemu_binary; ...
    """
    if given:
        return dict(given)
    kwargs = archive.meta.get("env_kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise ArchiveError(f"{path}: its env_kwargs are not a mapping")
    for key, value in kwargs.items():
        if key not in RUN_ENV_KWARGS:
            raise ArchiveError(
                f"{path} sets env_kwargs.{str(key)[:80]}; a shared archive may set only data "
                f"options ({', '.join(sorted(RUN_ENV_KWARGS))}), never a program, URL or path: "
                "give it yourself with --env-kwarg KEY=VALUE (yours replace the archive's)"
            )
        check_value(value, RUN_ENV_KWARGS[key], f"env_kwargs.{key}", path)
    return dict(kwargs)


def record_demo(
    archive: Archive,
    best: int,
    run: Path,
    every: int,
    env_kwargs: Mapping[str, Any],
    folder_name: str = "demo",
) -> Demo:
    """Replay the best cell's actions in a worker; write the points as `.state` files in
    `run/<folder_name>/` and check that the replay reaches the archived score."""
    meta = archive.meta
    env_id = str(meta["env_id"])
    cells = cells_from_dict(meta["cells"])
    actions = archive.actions[best]
    envs = make_vec(
        env_id,
        1,
        wrappers=(ExploreWorker,),
        info_keys=(),
        max_episode_steps=len(actions) + 1,
        **{**EXPLORE_OBS, **env_kwargs},
    )
    try:
        describe = envs.engine.call("explore_describe")[0]
        if describe["rom_sha1"] != meta.get("rom_sha1"):
            raise ArchiveError(
                f"the archive was made on the ROM with SHA-1 {str(meta.get('rom_sha1'))[:8]}..., "
                f"{env_id} runs {describe['rom_sha1'][:8]}...; robustify on the ROM it explored"
            )
        envs.engine.call("explore_setup", cells.to_dict())
        replay = envs.engine.call(
            "explore_replay", actions, every, int(meta.get("game_seed", 0)), meta.get("state")
        )[0]
    finally:
        envs.close()
    if cells.score is not None and replay["scores"][-1] != archive.scores[best]:
        raise ArchiveError(
            f"replaying the best cell's {len(actions)} actions reached score "
            f"{replay['scores'][-1]:g}, not the archived {archive.scores[best]:g}: the game is "
            "not deterministic from its start here"
        )
    folder = run / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, state in enumerate(replay["states"]):
        path = folder / f"point_{i:04d}_step_{replay['steps'][i]:06d}.state"
        write_state_file(path, state)
        paths.append(path)
    won = bool(replay["won"] or archive.won[best])
    goal = demo_goal(env_id, won, cells.score, float(replay["scores"][-1]))
    columns, waypoints, waypoint_steps = demo_waypoints(cells, replay.get("keys") or [])
    return Demo(
        paths,
        list(replay["steps"]),
        list(replay["scores"]),
        won,
        goal,
        meta.get("state"),
        int(meta.get("game_seed", 0)),
        np.asarray(actions, np.uint8),
        columns,
        waypoints,
        waypoint_steps,
    )


def demo_goal(env_id: str, won: bool, score_var: str | None, score: float) -> dict[str, Any] | None:
    """What success means: the game's win (None: training's default), else the last score."""
    if won and env_traits(env_id).can_win:
        return None
    if score_var is None:
        raise ConfigError(
            "the archive's best cell neither wins nor has a score variable to reach (its cells "
            "declare no `score`); explore until a cell wins, or declare score: VARIABLE in the "
            "game's cells.yaml"
        )
    return {"variable": score_var, "op": "greater-or-equal", "reference": int(score)}
