"""SB3 callbacks: game variables, win rate and reward terms in TensorBoard, System 2's think
counters (`ThinkScalarsCallback`, for `PauseToThink` envs), episode videos, atomic checkpoints and
a rich progress bar.

They read what the envs already return (`info` holds the game's RAM variables and per-term
rewards; `VecMonitor` adds `info["episode"]`), so logging costs no extra emulator work except
while a video is being recorded.

>>> stats = EpisodeStats(window=2)
>>> stats.add(1.0, 10, True); stats.add(0.0, 5, False); stats.add(3.0, 7, True)
>>> stats.episodes, stats.win_rate(), stats.mean_return()
(3, 0.5, 1.5)
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from metabonk_gym.memory.scalars import log_memory_scalars
from metabonk_gym.rundir import RunDir, save_model
from metabonk_gym.think.metrics import log_think_scalars, merge_think_infos
from metabonk_gym.training.video import add_gif_summary, tensorboard_writer, write_mp4


@dataclass
class EpisodeStats:
    """Rolling episode statistics shared by the logger, the progress bar and curricula."""

    window: int = 100
    episodes: int = 0
    returns: deque = field(default_factory=deque)
    lengths: deque = field(default_factory=deque)
    wins: deque = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.returns = deque(maxlen=self.window)
        self.lengths = deque(maxlen=self.window)
        self.wins = deque(maxlen=self.window)

    def add(self, ret: float, length: int, won: bool | None) -> None:
        self.episodes += 1
        self.returns.append(float(ret))
        self.lengths.append(int(length))
        if won is not None:
            self.wins.append(bool(won))

    def clear(self) -> None:
        self.episodes = 0
        self.returns.clear()
        self.lengths.clear()
        self.wins.clear()

    def win_rate(self) -> float | None:
        return float(np.mean(self.wins)) if self.wins else None

    def mean_return(self) -> float | None:
        return float(np.mean(self.returns)) if self.returns else None

    def score(self) -> float:
        """What PBT ranks members by: the win rate where episodes are won, else the mean return
        (-1e9 before any episode ends)."""
        win = self.win_rate()
        if win is not None:
            return win
        mean = self.mean_return()
        return mean if mean is not None else -1e9


def episode_number(value: Any) -> float | None:
    """A game variable's value as a float for logging; None for what is not a plain number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def episode_scalars(records: list[dict[str, Any]], stats: Any) -> dict[str, float]:
    """The SB3 path's episode scalars (`episode/*`, `rollout/*`, `game/*`, `reward_terms/*`)
    from finished episodes' records (`{"vars": {...}, "terms": {...}}`) and rolling stats: what
    training paths that do not run SB3's callbacks (RLlib, Dreamer) write."""
    out: dict[str, float] = {}
    if stats.episodes:
        out["episode/count"] = float(stats.episodes)
        out["episode/return_mean"] = float(stats.mean_return())
        out["episode/length_mean"] = float(np.mean(stats.lengths))
        out["rollout/ep_rew_mean"] = out["episode/return_mean"]
        out["rollout/ep_len_mean"] = out["episode/length_mean"]
        if stats.win_rate() is not None:
            out["episode/win_rate"] = float(stats.win_rate())
    for group, prefix in (("vars", "game/"), ("terms", "reward_terms/")):
        sums: dict[str, list[float]] = defaultdict(list)
        for rec in records:
            for name, value in rec[group].items():
                sums[name].append(float(value))
        for name, values in sums.items():
            out[prefix + name] = float(np.mean(values))
    return out


class GameStatsCallback(BaseCallback):
    """Episode return, length and win rate (`info["success"]`: the config's goal, else the game's
    `won`; none for a game that cannot be won), the game's variables at episode end
    (`game/<name>`) and the return of each reward term (`reward_terms/<name>`).

    Args:
        variables: the info variables to log at episode end.
        stats: where episode statistics accumulate (shared with the progress bar).
        prefix: prepended to every tag.
    """

    def __init__(
        self, variables: list[str], stats: EpisodeStats | None = None, prefix: str = ""
    ) -> None:
        super().__init__()
        self.variables = list(variables)
        self.stats = stats if stats is not None else EpisodeStats()
        self.prefix = prefix
        self._terms: list[dict[str, float]] = []
        self.on_episode: list[Callable[[int, dict[str, Any]], None]] = []

    def _init_callback(self) -> None:
        self._terms = [defaultdict(float) for _ in range(self.training_env.num_envs)]

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        dones = self.locals["dones"]
        for i, info in enumerate(infos):
            for name, value in (info.get("reward_terms") or {}).items():
                self._terms[i][name] += float(value)
            if not dones[i]:
                continue
            if "episode_reward_terms" in info:  # summed by the vector engine's worker
                self._terms[i] = defaultdict(float, info["episode_reward_terms"])
            episode = info.get("episode") or {}
            # `success` (training's GoalWrapper): the goal, else `won` of a game that can be won
            won = bool(info["success"]) if "success" in info else None
            self.stats.add(episode.get("r", 0.0), episode.get("l", 0), won)
            for name in self.variables:
                if name in info and episode_number(info[name]) is not None:
                    self.logger.record_mean(f"{self.prefix}game/{name}", float(info[name]))
            for name, total in self._terms[i].items():
                self.logger.record_mean(f"{self.prefix}reward_terms/{name}", total)
            self._terms[i] = defaultdict(float)
            for hook in self.on_episode:
                hook(i, info)
        if self.stats.episodes:
            self.logger.record(f"{self.prefix}episode/count", self.stats.episodes)
            self.logger.record(f"{self.prefix}episode/return_mean", self.stats.mean_return())
            self.logger.record(
                f"{self.prefix}episode/length_mean", float(np.mean(self.stats.lengths))
            )
            win_rate = self.stats.win_rate()
            if win_rate is not None:
                self.logger.record(f"{self.prefix}episode/win_rate", win_rate)
        return True


class _RecordWriter:
    """`add_scalar` over an SB3 logger (what `log_think_scalars` writes with)."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.logger.record(tag, value)


class ThinkScalarsCallback(BaseCallback):
    """System 2's counters in TensorBoard when the envs think (`PauseToThink`): every `every`
    steps, the `infos[i]["think"]` of all envs are merged (`merge_think_infos`) and written with
    `log_think_scalars` to the SB3 logger (`think/calls`, `think/fallbacks`,
    `think/fallbacks_<reason>`, `think/fallback_rate`, `think/latency_p50_s`,
    `think/latency_p95_s`, `think/directive_success_rate`, `think/latency_frames_p50`), and
    the long-term memory's counters (`info["memory"]` of a `Memory` wrapper, `memory/*` through
    `log_memory_scalars`); they reach TensorBoard with the logger's next dump. Envs without
    these wrappers have neither key: the callback then logs nothing, so training can always
    add it."""

    def __init__(self, every: int = 1) -> None:
        super().__init__()
        if every < 1:
            raise ValueError(f"every must be >= 1, not {every}")
        self.every = int(every)
        self.latest: dict[int, dict[str, Any]] = {}
        self.memory: dict[int, dict[str, Any]] = {}
        self.scalars: dict[str, float] = {}

    def _on_step(self) -> bool:
        for i, info in enumerate(self.locals.get("infos") or ()):
            if not isinstance(info, dict):
                continue
            if isinstance(info.get("think"), dict):
                self.latest[i] = info["think"]  # cumulative per env: the newest counts
            if isinstance(info.get("memory"), dict):
                self.memory[i] = info
        if self.n_calls % self.every == 0:
            writer = _RecordWriter(self.logger)
            scalars: dict[str, float] = {}
            if self.latest:
                merged = merge_think_infos(list(self.latest.values()))
                scalars.update(log_think_scalars(writer, merged, self.num_timesteps))
            if self.memory:
                scalars.update(
                    log_memory_scalars(writer, list(self.memory.values()), self.num_timesteps)
                )
            if scalars:
                self.scalars = scalars
        return True


class VideoCallback(BaseCallback):
    """Every `every` steps, records env 0 for up to `length` steps (or to the end of its episode)
    into TensorBoard (`video/episode`, an animated GIF) and `videos/step_<N>.mp4`.

    Args:
        every, length: steps between videos, and their most frames.
        run: the run directory.
        fps: frames per second of the videos.
    """

    def __init__(self, every: int, length: int, run: RunDir, fps: float = 15.0) -> None:
        super().__init__()
        self.every = int(every)
        self.length = int(length)
        self.run = run
        self.fps = fps
        self._next = 0
        self._frames: list[np.ndarray] | None = None
        self._start_step = 0
        self.videos_written = 0

    def _init_callback(self) -> None:
        steps = int(self.model.num_timesteps)
        self._next = (steps // self.every + 1) * self.every if steps and self.every > 0 else 0

    def _render(self) -> np.ndarray:
        return np.asarray(self.training_env.env_method("render", indices=[0])[0])

    def _on_step(self) -> bool:
        if self.every <= 0:
            return True
        if self._frames is None and self.num_timesteps >= self._next:
            self._frames = [self._render()]
            self._start_step = self.num_timesteps
            self._next = (self.num_timesteps // self.every + 1) * self.every
            return True
        if self._frames is not None:
            done = bool(self.locals["dones"][0])
            if not done:
                self._frames.append(self._render())
            if done or len(self._frames) >= self.length:
                self._flush()
        return True

    def _flush(self) -> None:
        frames = np.stack(self._frames or [])
        self._frames = None
        if len(frames) < 2:
            return
        writer = tensorboard_writer(self.logger)
        if writer is not None:
            add_gif_summary(writer, "video/episode", frames, self._start_step, self.fps)
        write_mp4(self.run.videos / f"step_{self._start_step:09d}.mp4", frames, self.fps)
        self.videos_written += 1

    def _on_training_end(self) -> None:
        if self._frames is not None:
            self._flush()


class CheckpointCallback(BaseCallback):
    """Every `every` steps, an atomic `checkpoints/step_<N>.zip` (with the metabonk metadata);
    keeps the newest `keep`.

    Args:
        every: steps between checkpoints.
        run: the run directory.
        metadata: what to store with each checkpoint (called at save time).
        keep: how many checkpoints to keep.
    """

    def __init__(
        self, every: int, run: RunDir, metadata: Callable[[], dict[str, Any]], keep: int = 3
    ) -> None:
        super().__init__()
        self.every = int(every)
        self.run = run
        self.metadata = metadata
        self.keep = keep
        self._next = 0
        self.saved: list[str] = []

    def _init_callback(self) -> None:
        steps = int(self.model.num_timesteps)
        self._next = (steps // self.every + 1) * self.every if self.every > 0 else 0

    def save_now(self, model: Any) -> str:
        """Save `model` as `checkpoints/step_<its step count>.zip` now (also used on Ctrl-C)."""
        steps = int(model.num_timesteps)
        path = self.run.checkpoint_path(steps)
        save_model(model, path, self.metadata())
        self.run.prune_checkpoints(self.keep)
        self.run.write_state(num_timesteps=steps, last_checkpoint=str(path.name))
        self.saved.append(path.name)
        return str(path)

    def _on_step(self) -> bool:
        if self.every > 0 and self.num_timesteps >= self._next:
            self.save_now(self.model)
            self._next = (self.num_timesteps // self.every + 1) * self.every
        return True


class RichProgressCallback(BaseCallback):
    """A rich progress bar: steps, speed, episodes, recent return and win rate.

    Args:
        total_steps: the run's length.
        stats: the episode statistics to show.
        description: the bar's label.
    """

    def __init__(
        self, total_steps: int, stats: EpisodeStats, description: str = "training"
    ) -> None:
        super().__init__()
        self.total_steps = total_steps
        self.stats = stats
        self.description = description
        self._progress: Any = None
        self._task: Any = None
        self._last = 0.0

    def _on_training_start(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[extra]}"),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            self.description, total=self.total_steps, completed=self.num_timesteps, extra=""
        )

    def _on_step(self) -> bool:
        now = time.monotonic()
        if self._progress is not None and now - self._last > 0.25:
            self._last = now
            extra = f"episodes {self.stats.episodes}"
            mean = self.stats.mean_return()
            if mean is not None:
                extra += f"  return {mean:.2f}"
            win = self.stats.win_rate()
            if win is not None:
                extra += f"  win {win:.2f}"
            self._progress.update(self._task, completed=self.num_timesteps, extra=extra)
        return True

    def _on_training_end(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=self.num_timesteps)
            self._progress.stop()
            self._progress = None


def progress_text(stats: EpisodeStats) -> str:
    """Episodes, recent mean return and win rate, as the progress bar and lines show them.

    >>> stats = EpisodeStats(); stats.add(2.0, 5, True)
    >>> progress_text(stats)
    'episodes 1, return 2.00, win 1.00'
    """
    text = f"episodes {stats.episodes}"
    mean = stats.mean_return()
    if mean is not None:
        text += f", return {mean:.2f}"
    win = stats.win_rate()
    if win is not None:
        text += f", win {win:.2f}"
    return text


class LineProgressCallback(BaseCallback):
    """Progress as a plain line every `every_s` seconds (and at the end), for logs and pipes
    where a live bar shows nothing until the run ends: steps, percent, steps/s, episodes,
    recent return and win rate.

    Args:
        total_steps: the run's length.
        stats: the episode statistics to show.
        description: the label each line starts with.
        every_s: seconds between lines.
        write: where lines go (default: stderr, flushed, so stdout keeps only results).
    """

    def __init__(
        self,
        total_steps: int,
        stats: EpisodeStats,
        description: str = "training",
        every_s: float = 30.0,
        write: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.total_steps = total_steps
        self.stats = stats
        self.description = description
        self.every_s = every_s
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._start = (0.0, 0)
        self._last = 0.0

    def _on_training_start(self) -> None:
        self._start = (time.monotonic(), int(self.num_timesteps))
        self._last = self._start[0]

    def line(self) -> str:
        steps = int(self.num_timesteps)
        elapsed = max(time.monotonic() - self._start[0], 1e-9)
        fps = (steps - self._start[1]) / elapsed
        pct = 100.0 * steps / self.total_steps if self.total_steps else 100.0
        return (
            f"{self.description}: {steps}/{self.total_steps} steps ({pct:.0f}%), "
            f"{fps:.0f} steps/s, {progress_text(self.stats)}"
        )

    def _on_step(self) -> bool:
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self.write(self.line())
        return True

    def _on_training_end(self) -> None:
        if self._start[0] > 0.0:
            self.write(self.line())
            self._start = (0.0, 0)
