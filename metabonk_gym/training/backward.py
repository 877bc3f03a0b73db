"""`run_robustify`: Go-Explore's robustification phase, the backward algorithm (Salimans and
Chen 2018, "Learning Montezuma's Revenge from a Single Demonstration").

The explorer's archive holds a path to its best cell, as actions from the start. Replayed, it
gives savestates along the way (every `every` steps): the demonstration (`backward_demo`). PPO
(the project's training code: `make_train_venv`, `LearnLoop`) learns from pixels only (frames,
or wrappers computed from them alone; never RAM) with sticky actions, starting every episode
from a point of the demonstration: first the one nearest its end. An episode succeeds when it
reaches what the demonstration reached (the game's win, or the score of its last cell); once
`threshold` of the last `window` episodes from the current point succeed, the start moves one
point back (or more: with `max_stride` above 1, each move decided at a success rate of
`jump_rate` or more doubles the next one, up to `max_stride` points; a slower one sets it back
to one). After the first point (the start with the demonstration's game seed) comes the real
test: the start with fresh game seeds.

With `bc_epochs`, the policy first clones the demonstration (`metabonk_gym.training.backward_bc`).
The curriculum's position is saved in every checkpoint, so `resume=True` continues the run where
its newest checkpoint left it (PPO's weights, the start point, TensorBoard).

>>> BackwardSettings().check()
>>> BackwardSettings(threshold=1.5).check()
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: threshold must be in (0, 1], not 1.5
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from metabonk_gym.rundir import RunDir, model_metadata, save_model
from metabonk_gym.training.backward_bc import clone_demo, collect_demo_frames
from metabonk_gym.training.backward_demo import (
    Demo,
    archive_env_kwargs,
    load_demo_archive,
    record_demo,
)
from metabonk_gym.training.config import TrainConfig, config_to_yaml, resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv, probe_env
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.explore import ARCHIVE_FILE
from metabonk_gym.training.explore_archive import ArchiveError
from metabonk_gym.training.explore_cells import RamCells, cells_from_dict
from metabonk_gym.training.wrapstack import WRAPPERS
from metabonk_gym.utils import atomic_write_text


@dataclass
class BackwardSettings:
    """The backward curriculum's knobs.

    Args:
        every: demonstration steps between two start points.
        threshold: the success rate over `window` episodes that moves the start back.
        window: episodes from the current point that decide a move.
        total_steps: PPO env steps in all.
        sticky_action_prob: each frame keeps the last buttons with this probability.
        overrides: training config keys (`TrainConfig`), e.g. n_envs, learning_rate.
        max_stride: the most points one move skips back (1: one at a time).
        jump_rate: a move decided at this success rate or more doubles the next one.
        bc_epochs: epochs of cloning the demonstration before PPO (0: none).
        bc_passes: replays of the demonstration to clone: one clean, the rest with sticky
            actions.
        uniform_share: the share of episodes that start from a point drawn uniformly from the
            whole demonstration (its first point with fresh game seeds) instead of the
            curriculum's point; 1.0 trains every part of the path at once, with no curriculum.
        waypoint_reward: a bonus per cell of the path passed (`envs.WaypointReward`) in the
            episodes started on a path (not those from fresh game seeds); 0: none.
        segment_steps: the most steps of an episode drawn by `uniform_share`, so that it is a
            stretch of the path and not the rest of it (PPO bootstraps the cut from its value);
            0: the rest of the path (with slack), as the curriculum's episodes always are.
    """

    every: int = 10
    threshold: float = 0.5
    window: int = 20
    total_steps: int = 200_000
    sticky_action_prob: float = 0.25
    overrides: dict[str, Any] = field(default_factory=dict)
    max_stride: int = 1
    jump_rate: float = 0.9
    bc_epochs: int = 0
    bc_passes: int = 4
    uniform_share: float = 0.0
    waypoint_reward: float = 0.0
    segment_steps: int = 0

    def check(self) -> None:
        """Refuse values that make no sense (`ConfigError`, one line)."""
        for name in ("threshold", "jump_rate"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in (0, 1], not {getattr(self, name)}")
        for name in ("every", "window", "total_steps", "max_stride", "bc_passes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.segment_steps < 0:
            raise ConfigError(f"segment_steps must be >= 0, not {self.segment_steps}")
        if self.waypoint_reward < 0:
            raise ConfigError(f"waypoint_reward must be >= 0, not {self.waypoint_reward}")
        if not 0.0 <= self.uniform_share <= 1.0:
            raise ConfigError(f"uniform_share must be in [0, 1], not {self.uniform_share}")
        if self.bc_epochs < 0:
            raise ConfigError(f"bc_epochs must be >= 0, not {self.bc_epochs}")
        if not 0.0 <= self.sticky_action_prob < 1.0:
            raise ConfigError(
                f"sticky_action_prob must be in [0, 1), not {self.sticky_action_prob}"
            )


def robust_config(
    env_id: str, demo: Demo, settings: BackwardSettings, env_kwargs: Mapping[str, Any]
) -> TrainConfig:
    """The training config: the game's defaults < `settings.overrides` < what the backward
    algorithm needs (pixels, sticky actions, the demo's goal, no shaping)."""
    fixed: dict[str, Any] = {
        "state": demo.state,
        "goal": demo.goal,
        "shaping": None,
        "max_episode_steps": None,
        "sticky_action_prob": settings.sticky_action_prob,
        "waypoint_reward": settings.waypoint_reward,
        "total_steps": settings.total_steps,
        "env_kwargs": dict(env_kwargs),
    }
    overrides = {"reward": "default", **settings.overrides, **fixed}
    return check_pixels_only(resolve_config(env_id, overrides=overrides))


def check_pixels_only(cfg: TrainConfig) -> TrainConfig:
    """`cfg` if its policy sees the frame alone, else a one-line `ConfigError`: robustify's
    policies never read RAM (obs_type state, or a wrapper that is not `pixels_only`)."""
    not_pixels = [spec["name"] for spec in cfg.wrappers if not WRAPPERS[spec["name"]].pixels_only]
    if cfg.obs_type == "state" or not_pixels:
        raise ConfigError(
            "robustify trains from pixels only: obs_type rgb or grayscale and no wrappers but "
            f"those that read the frame alone ({', '.join(pixels_only_wrappers())}); not "
            f"obs_type {cfg.obs_type!r}, wrappers {not_pixels}"
        )
    return cfg


def pixels_only_wrappers() -> list[str]:
    """The config wrappers whose observation comes from the frame alone (robustify allows them).

    >>> "pixel_cells" in pixels_only_wrappers(), "ram_features" in pixels_only_wrappers()
    (True, False)
    """
    return sorted(name for name, entry in WRAPPERS.items() if entry.pixels_only)


#: One episode's start: (demonstration, its point, fresh game seeds, drawn by the curriculum);
#: demonstration 0 is the curriculum's, the others (other archives) only take uniform draws.
Start = tuple[int, int, bool, bool]


class BackwardCallback(BaseCallback):
    """Moves every env's start back along the demonstration as episodes succeed; with
    `uniform_share`, that share of the episodes start from a point drawn from the whole path.

    Each env's next start is set when its episode ends (a vector env has already begun the one
    after it, from the start set before), so an episode counts towards a move only when it
    began at the curriculum's current point.

    Args:
        demo: the demonstration.
        settings: threshold, window, stride, uniform share.
        on_move: called with a line each time the start moves.
        position: where a resumed run was (`position()` of the run it continues).
        seed: the seed of the uniform draws.
        others: more demonstrations (other archives, e.g. other game seeds) that the uniform
            draws start on as well, each point of each path alike.
    """

    def __init__(
        self,
        demo: Demo,
        settings: BackwardSettings,
        on_move: Callable[[str], None],
        position: Mapping[str, Any] | None = None,
        seed: int = 0,
        others: Sequence[Demo] = (),
    ) -> None:
        super().__init__()
        self.demo = demo
        self.demos = [demo, *others]
        sizes = np.array([len(d.paths) - 1 for d in self.demos], float)  # points but the ends
        self.sizes, self.shares = sizes.astype(int), sizes / sizes.sum()
        self.settings = settings
        self.on_move = on_move
        self.point = len(demo.paths) - 2  # the last point is the end itself
        self.fresh_seeds = False  # past point 0: the start with any game seed
        self.stride = 1
        self.results: deque[bool] = deque(maxlen=settings.window)
        self.uniform_results: deque[bool] = deque(maxlen=settings.window)
        self.running: list[Start | None] = []
        self.queued: list[Start | None] = []
        self.rng = np.random.default_rng(seed)
        self.history: list[dict[str, Any]] = []
        self.successes = 0
        if position is not None:
            self.restore(position)

    def position(self) -> dict[str, Any]:
        """Where the curriculum is: saved in each checkpoint, read back by `restore`."""
        return {
            "point": self.point,
            "fresh_seeds": self.fresh_seeds,
            "stride": self.stride,
            "history": list(self.history),
        }

    def restore(self, position: Mapping[str, Any]) -> None:
        """Continue from `position()` of a saved run; `RunDirError` when it does not fit this
        demonstration (a point out of range, a wrong type)."""
        point, fresh, stride = (position.get(k) for k in ("point", "fresh_seeds", "stride"))
        history = position.get("history", [])
        last = len(self.demo.paths) - 2
        ok = (
            isinstance(point, int)
            and not isinstance(point, bool)
            and 0 <= point <= last
            and isinstance(fresh, bool)
            and isinstance(stride, int)
            and 1 <= stride <= self.settings.max_stride
            and isinstance(history, list)
            and all(isinstance(h, dict) for h in history)
        )
        if not ok:
            raise RunDirError(
                f"the checkpoint's backward position {str(dict(position))[:120]} does not fit a "
                f"demonstration of {last + 2} points; resume from an earlier checkpoint or start "
                "a new --run-dir"
            )
        assert isinstance(point, int) and isinstance(stride, int)
        self.point, self.fresh_seeds, self.stride = point, bool(fresh), stride
        self.history = list(history)

    def _on_training_start(self) -> None:
        n = self.training_env.num_envs
        self.running, self.queued = [None] * n, [None] * n  # the first episodes began elsewhere
        for i in range(n):
            self._queue(i, self._draw())

    def _curriculum(self) -> Start:
        return (0, 0, True, True) if self.fresh_seeds else (0, self.point, False, True)

    def _draw(self) -> Start:
        """A start for one env's next episode: the curriculum's, or a point drawn uniformly
        from every demonstration's points but their ends."""
        share = self.settings.uniform_share
        if share > 0 and self.rng.random() < share:
            which = int(self.rng.choice(len(self.demos), p=self.shares))
            point = int(self.rng.integers(0, self.sizes[which]))
            return which, point, point == 0, False
        return self._curriculum()

    def _queue(self, i: int, start: Start) -> None:
        """Env `i`'s next episode begins at `start` (and may take the steps it allows)."""
        which, point, fresh, by_curriculum = start
        demo, env = self.demos[which], self.training_env
        if fresh:
            env.env_method("set_start", demo.state, None, indices=[i])
        elif point == 0:  # the start itself: as the demo began it
            env.env_method("set_start", demo.state, [demo.game_seed], indices=[i])
        else:
            env.env_method("set_start", str(demo.paths[point]), None, indices=[i])
        steps = demo.allowance(point)
        if self.settings.segment_steps and not by_curriculum:
            steps = min(steps, self.settings.segment_steps)
        env.set_attr("_max_episode_steps", steps, indices=[i])
        if self.settings.waypoint_reward > 0:
            waypoints = [] if fresh else demo.waypoints_after(point)
            env.env_method("set_waypoints", demo.waypoint_columns, waypoints, indices=[i])
        self.queued[i] = start

    def _on_step(self) -> bool:
        dones, infos = self.locals["dones"], self.locals["infos"]
        for i in map(int, np.flatnonzero(dones)):
            ended, self.running[i] = self.running[i], self.queued[i]
            self._queue(i, self._draw())
            if ended is None:
                continue
            success = bool(infos[i].get("success"))
            if ended == self._curriculum():
                self.results.append(success)
            elif not ended[3]:
                self.uniform_results.append(success)
        rate = self._log()
        if len(self.results) >= self.settings.window and rate >= self.settings.threshold:
            self._move(rate)
        return True

    def _log(self) -> float:
        """The curriculum's scalars to the logger; its success rate over the window."""
        rate = sum(self.results) / len(self.results) if self.results else 0.0
        self.logger.record("backward/start_step", self.demo.steps[self.point])
        self.logger.record("backward/point", self.point)
        self.logger.record("backward/fresh_seeds", float(self.fresh_seeds))
        self.logger.record("backward/success_rate", rate)
        self.logger.record("backward/stride", self.stride)
        if self.uniform_results:
            uniform = sum(self.uniform_results) / len(self.uniform_results)
            self.logger.record("backward/uniform_success_rate", uniform)
        return rate

    def _move(self, rate: float) -> None:
        self.history.append(
            {
                "point": self.point,
                "start_step": self.demo.steps[self.point],
                "fresh_seeds": self.fresh_seeds,
                "success_rate": rate,
                "num_timesteps": int(self.num_timesteps),
            }
        )
        self.results.clear()
        if self.fresh_seeds:
            return  # keep training from fresh seeds; nothing is left to move
        if self.point == 0:
            self.fresh_seeds = True
            where = "the start with fresh game seeds"
        else:
            self.point = max(0, self.point - self.stride)
            where = f"demo step {self.demo.steps[self.point]}"
        quick = rate >= self.settings.jump_rate
        self.stride = min(self.stride * 2, self.settings.max_stride) if quick else 1
        self.on_move(f"step {self.num_timesteps:,}: success {rate:.2f}; start moves to {where}")
        for i, queued in enumerate(self.queued):
            if queued is not None and queued[3]:  # the curriculum's next episodes: the new point
                self._queue(i, self._curriculum())


@dataclass
class RobustResult:
    """What a robustification did (the CLI prints `to_dict()`)."""

    run_dir: Path
    model_path: Path
    num_timesteps: int
    demo_steps: int
    demo_won: bool
    points: int
    reached_point: int
    reached_step: int
    fresh_seeds: bool
    moves: list[dict[str, Any]]
    interrupted: bool
    bc: dict[str, Any] = field(default_factory=dict)
    resumed_from: int | None = None  # the PPO steps a resumed run continued from

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["run_dir"], data["model_path"] = str(self.run_dir), str(self.model_path)
        return data


#: The settings a run keeps in `run.json` (`backward_settings`) and a resume reads back.
STORED_SETTINGS = (
    "every",
    "threshold",
    "window",
    "sticky_action_prob",
    "max_stride",
    "jump_rate",
    "bc_epochs",
    "bc_passes",
    "uniform_share",
    "waypoint_reward",
)


def stored_settings(state: Mapping[str, Any], total_steps: int, path: Path) -> BackwardSettings:
    """The settings a run was started with (its `run.json`), with a new `total_steps`;
    `RunDirError` when they are missing or malformed.

    >>> stored_settings({"backward_settings": {"every": 5}}, 100, Path("run.json")).every
    5
    >>> stored_settings({"backward_settings": {"every": "x"}}, 100, Path("run.json"))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.RunDirError: run.json: backward_settings are malformed (every must be a number, not x); restore run.json from a backup or start a new --run-dir
    """
    data = state.get("backward_settings")
    fix = f"restore {path.name} from a backup or start a new --run-dir"
    if not isinstance(data, Mapping):
        raise RunDirError(f"{path}: no backward_settings: not a robustify run; {fix}")
    values: dict[str, Any] = {}
    defaults = BackwardSettings()
    for key in STORED_SETTINGS:
        value = data.get(key, getattr(defaults, key))
        kind = type(getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RunDirError(
                f"{path}: backward_settings are malformed ({key} must be a number, not "
                f"{str(value)[:40]}); {fix}"
            )
        values[key] = kind(value)
    settings = BackwardSettings(total_steps=total_steps, **values)
    try:
        settings.check()
    except ConfigError as exc:
        raise RunDirError(f"{path}: backward_settings are malformed ({exc}); {fix}") from exc
    return settings


def run_robustify(
    explore_dir: str | Path,
    run_dir: str | Path,
    settings: BackwardSettings | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    resume: bool = False,
    callbacks: Sequence[Any] = (),
    also: Sequence[str | Path] = (),
) -> RobustResult:
    """Robustify the best path of the archive in `explore_dir` into a PPO policy in `run_dir`
    (a new run directory; with `resume`, the run there continues with its own settings and
    config, `settings.total_steps` its new end); see the module docstring. `env_kwargs`: the
    user's, replacing the archive's; `callbacks`: SB3 callbacks added to PPO's (e.g. a
    wall-clock stop); `also`: more explorers' folders (the same env, e.g. other game seeds)
    whose best paths the uniform share starts on too."""
    settings = settings or BackwardSettings()
    settings.check()
    explore_dir = Path(explore_dir).expanduser()
    more = [Path(d).expanduser() for d in also]
    run = RunDir(Path(run_dir).expanduser())
    say = progress or (lambda line: None)
    state: dict[str, Any] = {}
    if resume:
        state = _check_resume(run, explore_dir, say, more)
        settings = stored_settings(state, settings.total_steps, run.state_file)
    else:
        run.check_new()
    if more and settings.uniform_share <= 0:
        raise ConfigError(
            "more archives (--also) are only started on by the uniform share: give "
            "--uniform-share above 0"
        )
    archive, best = load_demo_archive(explore_dir)
    env_id = str(archive.meta.get("env_id"))
    kwargs = archive_env_kwargs(archive, explore_dir / ARCHIVE_FILE, env_kwargs)
    if settings.waypoint_reward > 0 and not isinstance(
        cells_from_dict(archive.meta["cells"]), RamCells
    ):
        raise ConfigError(
            "waypoint_reward follows the path's RAM cells; this archive's cells are the screen's"
        )
    if not resume:
        check_pixels_only(resolve_config(env_id, overrides=settings.overrides))
    run.path.mkdir(parents=True, exist_ok=True)
    demo = record_demo(archive, best, run.path, settings.every, kwargs)
    others = [
        _other_demo(d, k, env_id, demo, run.path, settings.every, env_kwargs)
        for k, d in enumerate(more, 1)
    ]
    if resume:
        cfg, resume_from, position = _resume_point(run, env_id, demo, state, settings)
    else:
        cfg, resume_from, position = robust_config(env_id, demo, settings, kwargs), None, None
    say(
        f"robustifying {env_id}: a {demo.length}-step demonstration "
        f"({'won' if demo.won else 'score ' + str(demo.scores[-1])}), {len(demo.paths)} start "
        f"points, PPO from {cfg.obs_type} frames, sticky actions {cfg.sticky_action_prob}"
        + (
            f"; {len(others)} more paths ({sum(len(o.paths) for o in others)} points)"
            if others
            else ""
        )
        + (f"; resuming at {position and position.get('point')}" if resume else "")
    )
    run.write_config(config_to_yaml(cfg))
    run.write_state(
        env_id=env_id,
        algo="robustify",
        status="running",
        error=None,
        explore=str(explore_dir.resolve()),
        explore_also=[str(d.resolve()) for d in more],
        total_steps=cfg.total_steps,
        points=len(demo.paths),
        demo_steps=demo.length,
        backward_settings={k: getattr(settings, k) for k in STORED_SETTINGS},
        **run.owner(),
    )
    backward = BackwardCallback(demo, settings, say, position, seed=cfg.seed, others=others)
    return _train(env_id, run, cfg, backward, resume_from, callbacks)


def _other_demo(
    explore_dir: Path,
    index: int,
    env_id: str,
    first: Demo,
    run: Path,
    every: int,
    env_kwargs: Mapping[str, Any] | None,
) -> Demo:
    """Another archive's best path as a demonstration (`run/demo-INDEX/`); it must be of the
    same env and reach the same goal as the first (the env's success is the first's goal)."""
    archive, best = load_demo_archive(explore_dir)
    path = explore_dir / ARCHIVE_FILE
    if archive.meta.get("env_id") != env_id:
        raise ArchiveError(f"{path} explored {archive.meta.get('env_id')}, not {env_id}")
    kwargs = archive_env_kwargs(archive, path, env_kwargs)
    demo = record_demo(archive, best, run, every, kwargs, folder_name=f"demo-{index}")
    if demo.goal != first.goal or demo.won != first.won:
        raise ArchiveError(
            f"{path}: its best path {'wins' if demo.won else 'does not win'} and the first "
            f"archive's {'does' if first.won else 'does not'}: give archives whose best paths "
            "reach the same goal"
        )
    return demo


def _check_resume(
    run: RunDir, explore_dir: Path, say: Callable[[str], None], more: Sequence[Path] = ()
) -> dict[str, Any]:
    """Before a resume: the run exists, is a robustify run of these archives, and is not being
    trained now; its `run.json`."""
    run.check_resumable()
    stale = run.check_not_running()
    if stale is not None:
        say(stale)
    state = run.read_state()
    if state.get("algo") != "robustify":
        raise RunDirError(
            f"cannot resume {run.path} with robustify: it is a {state.get('algo')!r} run"
        )
    stored = state.get("explore")
    if not isinstance(stored, str) or Path(stored).resolve() != explore_dir.resolve():
        raise RunDirError(
            f"{run.path} robustifies the archive in {str(stored)[:200]}, not {explore_dir}; "
            "give that folder to --resume it"
        )
    stored_more = [str(Path(d).resolve()) for d in state.get("explore_also") or []]
    if stored_more != [str(d.resolve()) for d in more]:
        raise RunDirError(
            f"{run.path} also started on the archives {stored_more or 'none'}; give the same "
            "--also folders to --resume it"
        )
    return state


def _resume_point(
    run: RunDir, env_id: str, demo: Demo, state: Mapping[str, Any], settings: BackwardSettings
) -> tuple[TrainConfig, Path, dict[str, Any] | None]:
    """The resumed run's config (its own, with the new total), its newest checkpoint and the
    curriculum's position saved in it."""
    if state.get("points") != len(demo.paths) or state.get("demo_steps") != demo.length:
        raise RunDirError(
            f"the archive's best path is now {demo.length} steps ({len(demo.paths)} points), the "
            f"run learned one of {state.get('demo_steps')} ({state.get('points')} points): the "
            "archive changed since; robustify it into a new --run-dir"
        )
    cfg = resolve_config(
        env_id, base=run.read_config(), overrides={"total_steps": settings.total_steps}
    )
    resume_from, meta = run.resume_point()
    if int(meta["num_timesteps"]) >= cfg.total_steps:
        raise RunDirError(
            f"{run.path} already has {meta['num_timesteps']} steps of {cfg.total_steps}; pass a "
            "larger --total-steps to continue it"
        )
    position = meta.get("backward")
    if position is not None and not isinstance(position, dict):
        raise RunDirError(f"{resume_from}: its backward position is not a mapping")
    return cfg, resume_from, position


def _train(
    env_id: str,
    run: RunDir,
    cfg: TrainConfig,
    backward: BackwardCallback,
    resume_from: Path | None = None,
    callbacks: Sequence[Any] = (),
) -> RobustResult:
    import torch
    from stable_baselines3.common.logger import configure

    from metabonk_gym.training.callbacks import EpisodeStats
    from metabonk_gym.training.ppo import LearnLoop, load_or_make

    torch.set_num_threads(cfg.torch_threads)
    _, _, info_names = probe_env(env_id, cfg)
    venv = make_train_venv(env_id, cfg)
    logger = configure(str(run.tensorboard), ["tensorboard"])
    bc: dict[str, Any] = {}
    try:
        model = load_or_make(cfg, venv, resume_from)
        model.set_logger(logger)
        resumed = int(model.num_timesteps) if resume_from is not None else None
        demo, settings, say = backward.demo, backward.settings, backward.on_move

        def metadata() -> dict[str, Any]:
            return model_metadata(
                env_id, "ppo", cfg.to_dict(), robustify=True, backward=backward.position()
            )

        if resume_from is None and settings.bc_epochs > 0:
            bc = _warm_start(model, demo, settings, cfg, say)
            for key, value in bc.items():
                logger.record(f"backward/{key}", value)
            logger.dump(0)
            run.write_state(bc=bc)
        stats = EpisodeStats(window=cfg.win_window)
        loop = LearnLoop(run, cfg, info_names, metadata, stats)
        interrupted = loop.learn(
            model,
            cfg.total_steps - int(model.num_timesteps),
            reset=resume_from is None,
            callbacks=[backward, *callbacks],
            label="robustify",
        )
        save_model(model, run.model, metadata())
    finally:
        logger.close()
        close_venv(venv)
    result = RobustResult(
        run_dir=run.path,
        model_path=run.model,
        num_timesteps=int(model.num_timesteps),
        demo_steps=demo.length,
        demo_won=demo.won,
        points=len(demo.paths),
        reached_point=backward.point,
        reached_step=demo.steps[backward.point],
        fresh_seeds=backward.fresh_seeds,
        moves=backward.history,
        interrupted=interrupted,
        bc=bc or dict(run.read_state().get("bc") or {}),
        resumed_from=resumed,
    )
    run.write_state(
        status="interrupted" if interrupted else "finished", pid=None, **_summary(result)
    )
    atomic_write_text(run.path / "robustify.json", json.dumps(result.to_dict(), indent=2))
    return result


def _warm_start(
    model: Any, demo: Demo, settings: BackwardSettings, cfg: TrainConfig, say: Callable[[str], None]
) -> dict[str, Any]:
    """Clone the demonstration into `model` before PPO (`backward_bc`)."""
    data = collect_demo_frames(
        model.get_env(),
        demo.actions,
        settings.bc_passes,
        settings.sticky_action_prob,
        cfg.gamma,
        (demo.state, demo.game_seed),
        demo.allowance(0),
    )
    result: dict[str, Any] = clone_demo(
        model, data, settings.bc_epochs, cfg.bc_batch_size, cfg.bc_learning_rate, cfg.seed or 0
    )
    result["bc_clean_success"] = data.clean_success
    say(
        f"cloned the demonstration: {len(data.actions):,} frames from {data.passes} replays "
        f"(clean one {'succeeded' if data.clean_success else 'did NOT succeed'}), "
        f"{settings.bc_epochs} epochs, accuracy {result['bc_accuracy']:.2f}"
    )
    return result


def _summary(result: RobustResult) -> dict[str, Any]:
    data = result.to_dict()
    return {k: data[k] for k in ("num_timesteps", "reached_point", "reached_step", "fresh_seeds")}


__all__ = ["BackwardSettings", "RobustResult", "run_robustify"]
