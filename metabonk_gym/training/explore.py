"""`run_explore`: Go-Explore's exploration phase (Ecoffet et al., "First return, then explore",
Nature 2021) over the vector engine's envs, with no learner, no teacher and no game code.

Each round picks, for every env, cells of the archive by weights that favour cells chosen
rarely, cells not chosen since they were found or improved, cells seen rarely and cells of high
score; the envs return to them by loading their savestates and explore with repeated random
actions (`metabonk_gym.training.explore_worker`), and every new or better cell they report
enters the archive with the actions that reach it from the start. The archive is saved
atomically every `save_every_s` and at the end; a stop signal (Ctrl-C, SIGTERM) ends the round,
saves it and returns (`interrupted`); `resume=True` continues from it. TensorBoard gets
`explore/cells`, `explore/best_score`, `explore/frames`.

A first win need not end it: `after_win_frames` explores on that many frames past it, and
`until_prefer` until a won cell's preferred variable (the cells' `prefer`, e.g. the HP a won
path ends with) is at least a value; the archive's best path is then the won one that ranks
first by score, the preferred variable, then length (`Archive.best`). Once a cell has won, cells
whose preferred variable is no higher than the best won cell's weigh less (`below_best_win`).

>>> weights = selection_weights(
...     chosen=np.array([0, 5]), since=np.array([0, 5]), seen=np.array([1, 50]),
...     scores=np.array([0.0, 0.0]), won=np.array([False, False]))
>>> bool(weights[0] > weights[1])  # the cell never chosen weighs more
True
>>> same = dict(chosen=np.zeros(2), since=np.zeros(2), seen=np.ones(2), scores=np.zeros(2),
...             won=np.array([False, False]))
>>> selection_weights(**same, levels=np.array([3, 4]), level_weight=0.1).round(3).tolist()
[0.235, 2.354]
>>> favour_factors([(0, 1), (2, 1), (1, 5)], [(0, 2.0)]).tolist()  # x2 per bucket of column 0
[0.25, 1.0, 0.5]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.process import graceful_stop_signals
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.explore_archive import Archive
from metabonk_gym.training.explore_cells import Cells, RamCells, ScreenCells, load_cells
from metabonk_gym.training.explore_worker import ROOT, ExploreWorker
from metabonk_gym.utils import atomic_write_text
from metabonk_gym.vector import make_vec

ARCHIVE_FILE = "archive.npz"
#: Go-Explore's chance of repeating the last random action (Atari, frameskip 4).
DEFAULT_REPEAT_PROB = 0.95
#: Observation kwargs of the explorer's envs: the screen as the core gives it (no conversion
#: per step; screen cells sample it).
EXPLORE_OBS = {"obs_type": "rgb", "downscale": 1}
#: Once a cell has won, the selection factor of a cell whose preferred variable (the cells'
#: `prefer`) is no higher than the best won cell's: the aim is now a better win (as
#: Go-Explore's weight of a level behind, 0.1).
BELOW_BEST_WIN_WEIGHT = 0.1


@dataclass
class ExploreSettings:
    """How to explore (every field has a CPU-friendly default).

    Args:
        n_envs: envs on the vector engine (one emulator each).
        max_frames: stop after this many emulator frames (None: no limit).
        max_seconds: stop after this long (None: no limit).
        burst_steps: steps of random exploration after each return.
        repeat_prob: each step keeps the last action with this probability (None: the cells
            file's `repeat_prob`, else Go-Explore's 0.95).
        job_steps: steps each env runs per round (bursts from several cells).
        state: the root start (None: the env's default start).
        game_seed: the game's seed at the root start (replays depend on it).
        seed: the selection's and the bursts' random seed.
        save_every_s: seconds between archive saves.
        progress_every_s: seconds between progress lines.
        stop_when_won: stop once a cell wins the game.
        after_win_frames: stop this many emulator frames after the archive's first win (0: as
            `stop_when_won`; None: the first win does not stop it).
        until_prefer: stop once a won cell's preferred variable (the cells' `prefer`; the
            lowest value of the cell's bucket) is at least this (None: no such end).
        cells_file: a cells file (default: the game folder's `cells.*`, else the screen).
        env_kwargs: `gym.make` kwargs of every env (e.g. `integration`, `rom`).
    """

    n_envs: int = 2
    max_frames: int | None = None
    max_seconds: float | None = None
    burst_steps: int = 100
    repeat_prob: float | None = None
    job_steps: int = 400
    state: str | None = None
    game_seed: int = 0
    seed: int = 0
    save_every_s: float = 60.0
    progress_every_s: float = 10.0
    stop_when_won: bool = False
    after_win_frames: int | None = None
    until_prefer: float | None = None
    cells_file: str | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse values that make no sense (`ConfigError`, one line)."""
        for name in ("n_envs", "burst_steps", "job_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.repeat_prob is not None and not 0.0 <= self.repeat_prob < 1.0:
            raise ConfigError(f"repeat_prob must be in [0, 1), not {self.repeat_prob}")
        for name in ("max_frames", "max_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0, not {value}")
        if self.after_win_frames is not None and self.after_win_frames < 0:
            raise ConfigError(f"after_win_frames must be >= 0, not {self.after_win_frames}")
        ends = (self.max_frames, self.max_seconds, self.after_win_frames, self.until_prefer)
        if all(end is None for end in ends) and not self.stop_when_won:
            raise ConfigError(
                "give the explorer an end: max_frames, max_seconds, stop_when_won, "
                "after_win_frames or until_prefer"
            )


@dataclass
class ExploreResult:
    """What an exploration did (the CLI prints `to_dict()`)."""

    out: Path
    cells: int
    best_score: float
    won: bool
    frames: int
    frames_to_win: int | None
    seconds: float
    steps_per_s: float
    interrupted: bool = False
    best: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["out"] = str(self.out)
        return data


def selection_weights(
    chosen: np.ndarray,
    since: np.ndarray,
    seen: np.ndarray,
    scores: np.ndarray,
    won: np.ndarray,
    levels: np.ndarray | None = None,
    level_weight: float = 0.1,
) -> np.ndarray:
    """Go-Explore's count-based weights (each count c adds 1 / sqrt(c + 1)), times a progress
    factor from 1 (the lowest score) to 3 (the highest), times `level_weight` once per level a
    cell lies behind the furthest of `levels` (Go-Explore's level: none when `levels` is None);
    a won cell's state ends the game, so it weighs 0."""
    counts = 1.0 / np.sqrt(chosen + 1.0) + 1.0 / np.sqrt(since + 1.0) + 0.5 / np.sqrt(seen + 1.0)
    span = float(scores.max() - scores.min()) if len(scores) else 0.0
    progress = 1.0 + 2.0 * ((scores - scores.min()) / span if span > 0 else 0.0)
    weights = counts * progress
    if levels is not None and len(levels):
        weights = weights * np.power(float(level_weight), levels.max() - levels)
    return np.where(won, 0.0, weights)


def favour_factors(
    keys: Sequence[tuple[int, ...]], favour: Sequence[tuple[int, float]]
) -> np.ndarray:
    """Each key's selection factor from the cells' `favour` ((column, factor) pairs): the
    product of factor ** (the key's number in that column), scaled so the largest is 1."""
    logs = np.zeros(len(keys))
    for column, factor in favour:
        values = np.fromiter((k[column] for k in keys), np.float64, len(keys))
        logs += np.log(factor) * values
    return np.exp(logs - logs.max()) if len(keys) else logs


def below_best_win(keys: Sequence[tuple[int, ...]], won: Sequence[bool], column: int) -> np.ndarray:
    """Each key's selection factor once a cell has won: `BELOW_BEST_WIN_WEIGHT` where its
    preferred variable (key `column`) is no higher than the best won cell's (from there a better
    win needs the variable to rise), else 1.

    >>> below_best_win([(5, 0), (4, 1), (5, 1)], [True, False, False], 1).tolist()
    [0.1, 1.0, 1.0]
    """
    values = np.fromiter((k[column] for k in keys), np.float64, len(keys))
    best = max(v for v, w in zip(values, won) if w)
    return np.where(values > best, 1.0, BELOW_BEST_WIN_WEIGHT)


class Explorer:
    """One exploration over a vector engine (see `run_explore`).

    Args:
        envs: the engine's envs (`make_vec` with `ExploreWorker`), set up.
        archive: the archive (empty, or resumed).
        settings: how to explore.
        frameskip: emulator frames per env step.
        cells: the cells (their `level` and `favour`, if any, weigh the selection, and once
            a cell has won, their `prefer`: `below_best_win`; with `past_won` won cells are
            chosen too; None: no level, won cells never chosen).
    """

    def __init__(
        self,
        envs: Any,
        archive: Archive,
        settings: ExploreSettings,
        frameskip: int,
        cells: Cells | None = None,
    ) -> None:
        self.envs = envs
        self.archive = archive
        self.settings = settings
        self.frameskip = frameskip
        self.level_column: int | None = getattr(cells, "level_column", None)
        self.level_weight = float(getattr(cells, "level_weight", 1.0))
        self.past_won = bool(getattr(cells, "past_won", False))
        self.favour = tuple(getattr(cells, "favour_columns", ()))
        self.cells = cells
        self.rng = np.random.default_rng(settings.seed + int(archive.meta.get("rounds", 0)))
        self.changes: list[tuple[tuple[int, ...], float, int]] = []
        self.cursor: list[int | None] = [None] * envs.num_envs  # None: sent nothing yet
        self.frames = int(archive.meta.get("frames", 0))
        self.steps_now = 0  # steps of this session (for steps/s)

    def _choose(self, count: int) -> list[int]:
        a = self.archive
        if not len(a):
            return [ROOT]
        weights = selection_weights(
            np.asarray(a.chosen, float),
            np.asarray(a.since, float),
            np.asarray(a.seen, float),
            np.asarray(a.scores, float),
            np.asarray(a.won, bool) & (not self.past_won),
            self._levels(),
            self.level_weight,
        )
        if self.favour:
            weights = weights * favour_factors(a.keys, self.favour)
        column = getattr(self.cells, "prefer_column", None)
        if column is not None and any(a.won):
            weights = weights * below_best_win(a.keys, a.won, column)
        total = weights.sum()
        if total <= 0:
            return [ROOT]
        return self.rng.choice(len(weights), size=count, p=weights / total).tolist()

    def _levels(self) -> np.ndarray | None:
        """Every cell's level (None: the cells declare none)."""
        column = self.level_column
        if column is None:
            return None
        return np.fromiter((k[column] for k in self.archive.keys), np.float64, len(self.archive))

    def round(self) -> None:
        """Every env runs one job; the archive takes what they found."""
        a, s = self.archive, self.settings
        per_env = -(-s.job_steps // s.burst_steps)
        jobs, parents = [], []
        for i in range(self.envs.num_envs):
            starts: list[tuple[int, bytes | None, float, int]] = []
            prefixes: list[np.ndarray] = []
            for cell in self._choose(per_env):
                if cell == ROOT:
                    starts.append((ROOT, None, 0.0, 0))
                    prefixes.append(np.zeros(0, np.uint8))
                else:
                    starts.append((cell, a.states[cell], a.scores[cell], a.lengths[cell]))
                    prefixes.append(a.actions[cell])  # a reference: updates replace arrays
            cursor = self.cursor[i]
            fresh = cursor is None
            updates = (
                [(k, a.scores[j], a.lengths[j]) for j, k in enumerate(a.keys)]
                if cursor is None
                else self.changes[cursor:]
            )
            self.cursor[i] = len(self.changes)
            jobs.append(
                {
                    "starts": starts,
                    "budget": s.job_steps,
                    "seed": int(self.rng.integers(2**63)),
                    "updates": updates,
                    "reset_known": fresh,
                }
            )
            parents.append(prefixes)
        self.envs.set_attr("explore_job", jobs)
        results = self.envs.call("explore_run")
        for result, prefixes in zip(results, parents):
            self._merge(result, prefixes)

    def _merge(self, result: Mapping[str, Any], prefixes: list[np.ndarray]) -> None:
        a = self.archive
        frame_base = self.frames
        for burst, prefix in zip(result["bursts"], prefixes):
            cell = int(burst["cell"])
            if cell != ROOT:
                a.chosen[cell] += 1
                a.since[cell] += 1
            for key, score, length, steps_in, state, won in burst["found"]:
                actions = np.concatenate([prefix, burst["actions"][:steps_in]])
                if a.update(key, score, length, state, actions, won, frame_base):
                    self.changes.append((key, float(score), int(length)))
        for key, count in result["seen"].items():
            j = a.index.get(key)
            if j is not None:
                a.seen[j] += count
        self.frames += int(result["steps"]) * self.frameskip
        self.steps_now += int(result["steps"])


def _open_envs(env_id: str, settings: ExploreSettings) -> Any:
    kwargs = {**EXPLORE_OBS, **settings.env_kwargs}
    return make_vec(
        env_id,
        settings.n_envs,
        wrappers=(ExploreWorker,),
        info_keys=(),
        copy=False,
        **kwargs,
    )


def _prepare(
    env_id: str, out: Path, settings: ExploreSettings, resume: bool, envs: Any
) -> tuple[Archive, Cells, dict[str, Any]]:
    """The cells and the archive (new or resumed), every check done before anything is
    written."""
    describe = envs.engine.call("explore_describe", env_ids=[0])[0]
    cells = load_cells(describe["folder"], describe["variables"], settings.cells_file)
    path = out / ARCHIVE_FILE
    state = settings.state if settings.state is not None else describe["default_state"]
    if resume:
        archive = Archive.load(path, rom_sha1=describe["rom_sha1"], cells=cells.to_dict())
        stored = archive.meta
        if stored.get("env_id") != env_id:
            raise RunDirError(f"{path} explores {stored.get('env_id')}, not {env_id}")
        if settings.state is not None and settings.state != stored.get("state"):
            raise RunDirError(
                f"{path} explores from {stored.get('state')!r}, not {settings.state!r}: its "
                "cells' paths start there; drop --state or explore into another --out folder"
            )
        state, game_seed = stored.get("state"), int(stored.get("game_seed", 0))
        settings.game_seed = game_seed
        stored["cells"] = cells.to_dict()  # the same cells (a new `prefer` aside), in key order
    else:
        archive = Archive(
            meta={
                "env_id": env_id,
                "rom_sha1": describe["rom_sha1"],
                "cells": cells.to_dict(),
                "state": state,
                "game_seed": settings.game_seed,
                "frameskip": describe["frameskip"],
                "n_actions": describe["n_actions"],
                "env_kwargs": settings.env_kwargs,
                "frames": 0,
                "rounds": 0,
            }
        )
    settings.state = state
    if settings.until_prefer is not None and cells.prefer is None:
        raise ConfigError(
            f"until_prefer needs cells that declare `prefer` (a cell variable); "
            f"{cells.describe()} declare none"
        )
    if settings.repeat_prob is None:
        settings.repeat_prob = getattr(cells, "repeat_prob", None) or DEFAULT_REPEAT_PROB
    return archive, cells, describe


def check_out(out: Path, resume: bool) -> Path:
    """The archive path in `out`, refusing to overwrite one without `resume`."""
    path = out / ARCHIVE_FILE
    if resume and not path.is_file():
        raise RunDirError(f"--resume: no archive in {out} ({path} is missing)")
    if not resume and path.exists():
        raise RunDirError(
            f"{path} exists; continue it with --resume, or explore into another --out folder"
        )
    return path


def open_explorer(
    env_id: str, settings: ExploreSettings, out: Path, resume: bool = False
) -> tuple[Explorer, Cells]:
    """The engine's envs, set up, with the archive (new, or resumed from `out`) in an
    `Explorer`; the caller closes `explorer.envs`."""
    envs = _open_envs(env_id, settings)
    try:
        archive, cells, describe = _prepare(env_id, out, settings, resume, envs)
        envs.call(
            "explore_setup",
            cells.to_dict(),
            settings.repeat_prob,
            settings.burst_steps,
            settings.state,
            settings.game_seed,
        )
    except BaseException:
        envs.close()
        raise
    return Explorer(envs, archive, settings, int(describe["frameskip"]), cells), cells


def run_explore(
    env_id: str,
    out: str | Path,
    settings: ExploreSettings | None = None,
    *,
    resume: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExploreResult:
    """Explore `env_id` into the folder `out` (archive.npz, tensorboard/, explore.json); see
    the module docstring. Every bad input fails (one line) before anything is written."""
    settings = settings or ExploreSettings()
    settings.check()
    out = Path(out).expanduser()
    path = check_out(out, resume)
    explorer, cells = open_explorer(env_id, settings, out, resume)
    logger = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        logger = _logger(out)
        say = progress or (lambda line: None)
        say(
            f"exploring {env_id} from {settings.state!r} (game seed {settings.game_seed}) with "
            f"{cells.describe()}, {settings.n_envs} envs; archive {path}"
        )
        return _loop(explorer, path, logger, say)
    finally:
        if logger is not None:
            logger.close()
        explorer.envs.close()


def _logger(out: Path) -> Any:
    from stable_baselines3.common.logger import configure

    return configure(str(out / "tensorboard"), ["tensorboard"])


def _loop(explorer: Explorer, path: Path, logger: Any, say: Callable[[str], None]) -> ExploreResult:
    """Rounds until the budget is spent, the game is won (if asked) or a stop signal came."""
    s, a = explorer.settings, explorer.archive
    stop = threading.Event()
    start = time.monotonic()
    last_save = last_line = start
    start_frames = explorer.frames
    interrupted = False
    with graceful_stop_signals(stop.set):
        while not stop.is_set():
            if s.max_frames is not None and explorer.frames - start_frames >= s.max_frames:
                break
            if s.max_seconds is not None and time.monotonic() - start >= s.max_seconds:
                break
            if _won_enough(explorer):
                break
            if not _round_or_save(explorer, path, stop):
                break
            a.meta["rounds"] = int(a.meta.get("rounds", 0)) + 1
            _record(explorer, logger)
            now = time.monotonic()
            if now - last_line >= s.progress_every_s:
                say(_line(explorer, now - start))
                last_line = now
            if now - last_save >= s.save_every_s:
                _save(explorer, path)
                last_save = now
        interrupted = stop.is_set()
        _save(explorer, path)
    seconds = time.monotonic() - start
    say(_line(explorer, seconds) + (" (stopped; archive saved)" if interrupted else ""))
    won = [f for f, w in zip(a.found_frame, a.won) if w]
    result = ExploreResult(
        out=path.parent,
        cells=len(a),
        best_score=float(a.best_score()),
        won=bool(won),
        frames=explorer.frames,
        frames_to_win=min(won) if won else None,
        seconds=round(seconds, 3),
        steps_per_s=explorer.steps_now / seconds if seconds > 0 else 0.0,
        interrupted=interrupted,
        best=best_cell(a, explorer.cells),
    )
    atomic_write_text(path.parent / "explore.json", json.dumps(result.to_dict(), indent=2))
    return result


def _round_or_save(explorer: Explorer, path: Path, stop: threading.Event) -> bool:
    """One round; True when it ran. When it fails (a worker died), the archive as the last
    whole round left it is saved first: a stop signal sent to the whole process group (a
    terminal's, a service manager's) kills the workers too, and ends the run as a stop does."""
    try:
        explorer.round()
    except Exception:
        _save(explorer, path)
        time.sleep(0.2)  # the same signal's handler in this process may not have run yet
        if stop.is_set():
            return False
        raise
    return True


def _won_enough(explorer: Explorer) -> bool:
    """Whether the archive's wins end the exploration (`stop_when_won`, `after_win_frames`,
    `until_prefer`)."""
    s, a = explorer.settings, explorer.archive
    won = [i for i, w in enumerate(a.won) if w]
    if not won:
        return False
    if s.stop_when_won:
        return True
    first = min(a.found_frame[i] for i in won)
    if s.after_win_frames is not None and explorer.frames >= first + s.after_win_frames:
        return True
    return s.until_prefer is not None and any(
        preferred(a.keys[i], explorer.cells) >= s.until_prefer for i in won
    )


def preferred(key: tuple[int, ...], cells: Cells | None) -> float:
    """The lowest value of the cells' preferred variable in the cell `key` (its bucket times
    the bucket size; -inf when the cells prefer none).

    >>> from metabonk_gym.training.explore_cells import parse_cells
    >>> cells = parse_cells({"variables": {"room": 1, "hp": 2}, "prefer": "hp"}, ["room", "hp"], "c")
    >>> preferred((5, 1), cells), preferred((5, 1), None)
    (2.0, -inf)
    """
    column = getattr(cells, "prefer_column", None)
    if column is None or not isinstance(cells, RamCells):
        return -float("inf")
    return float(key[column] * cells.variables[column][1])


def best_cell(archive: Archive, cells: Cells | None) -> dict[str, Any]:
    """The archive's best cell (`Archive.best`): its score, path length, whether it won, and
    for RAM cells the lowest value of each variable in it."""
    if not len(archive):
        return {}
    i = archive.best()
    found: dict[str, Any] = {
        "score": archive.scores[i],
        "length": archive.lengths[i],
        "won": archive.won[i],
    }
    if isinstance(cells, RamCells):
        found["cell"] = {n: k * b for k, (n, b) in zip(archive.keys[i], cells.variables)}
    return found


def _save(explorer: Explorer, path: Path) -> None:
    explorer.archive.meta["frames"] = explorer.frames
    explorer.archive.save(path)


def _record(explorer: Explorer, logger: Any) -> None:
    a = explorer.archive
    logger.record("explore/cells", len(a))
    logger.record("explore/best_score", float(a.best_score()))
    logger.record("explore/frames", explorer.frames)
    logger.record("explore/won", float(any(a.won)))
    logger.dump(explorer.frames)


def _line(explorer: Explorer, seconds: float) -> str:
    a, cells = explorer.archive, explorer.cells
    rate = explorer.steps_now / seconds if seconds > 0 else 0.0
    won = "no"
    if any(a.won):
        best = a.best()
        won = f"yes ({a.lengths[best]} steps"
        if cells is not None and cells.prefer is not None:
            won += f", {cells.prefer} >= {preferred(a.keys[best], cells):g}"
        won += ")"
    return (
        f"frames {explorer.frames:,}  cells {len(a):,}  best score {a.best_score():g}  "
        f"won {won}  {rate:,.0f} steps/s"
    )


__all__ = ["ExploreResult", "ExploreSettings", "Explorer", "ScreenCells", "run_explore"]
