"""`run_robustify`: Go-Explore's robustification phase, the backward algorithm (Salimans and
Chen 2018, "Learning Montezuma's Revenge from a Single Demonstration").

The explorer's archive holds a path to its best cell, as actions from the start. Replayed, it
gives savestates along the way (every `every` steps): the demonstration. PPO (the project's
training code: `make_train_venv`, `LearnLoop`) learns from pixels only (grey frames, never RAM)
with sticky actions, starting every episode from a point of the demonstration: first the one
nearest its end. An episode succeeds when it reaches what the demonstration reached (the game's
win, or the score of its last cell); once `threshold` of the last `window` episodes from the
current point succeed, the start moves one point back. After the first point (the start with
the demonstration's game seed) comes the real test: the start with fresh game seeds.

>>> BackwardSettings().check()
>>> BackwardSettings(threshold=1.5).check()
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: threshold must be in (0, 1], not 1.5
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from metabonk_gym.gba.backends import write_state_file
from metabonk_gym.registration import env_traits
from metabonk_gym.training.config import TrainConfig, config_to_yaml, resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv, probe_env
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.explore import ARCHIVE_FILE, EXPLORE_OBS
from metabonk_gym.training.explore_archive import Archive, ArchiveError
from metabonk_gym.training.explore_cells import cells_from_dict
from metabonk_gym.training.explore_worker import ExploreWorker
from metabonk_gym.training.rundir import RunDir, model_metadata, save_model
from metabonk_gym.training.runtrust import RUN_ENV_KWARGS, check_value
from metabonk_gym.utils import atomic_write_text
from metabonk_gym.vector import make_vec

#: Steps an episode from a point may take: this many times the demonstration's rest, plus
#: `EPISODE_MARGIN` steps.
EPISODE_SLACK = 2.0
EPISODE_MARGIN = 100


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
    """

    every: int = 10
    threshold: float = 0.5
    window: int = 20
    total_steps: int = 200_000
    sticky_action_prob: float = 0.25
    overrides: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse values that make no sense (`ConfigError`, one line)."""
        if not 0.0 < self.threshold <= 1.0:
            raise ConfigError(f"threshold must be in (0, 1], not {self.threshold}")
        for name in ("every", "window", "total_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, not {getattr(self, name)}")
        if not 0.0 <= self.sticky_action_prob < 1.0:
            raise ConfigError(
                f"sticky_action_prob must be in [0, 1), not {self.sticky_action_prob}"
            )


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

    @property
    def length(self) -> int:
        return self.steps[-1]

    def allowance(self, point: int) -> int:
        """Steps an episode from `point` may take."""
        return int(EPISODE_SLACK * (self.length - self.steps[point])) + EPISODE_MARGIN


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
    metabonk_gym.training.explore_archive.ArchiveError: a.npz sets env_kwargs.skyemu_binary; ...
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
    archive: Archive, best: int, run: Path, every: int, env_kwargs: Mapping[str, Any]
) -> Demo:
    """Replay the best cell's actions in a worker; write the points as `.state` files in
    `run/demo/` and check that the replay reaches the archived score."""
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
    folder = run / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, state in enumerate(replay["states"]):
        path = folder / f"point_{i:04d}_step_{replay['steps'][i]:06d}.state"
        write_state_file(path, state)
        paths.append(path)
    won = bool(replay["won"] or archive.won[best])
    goal = _goal(env_id, won, cells.score, float(replay["scores"][-1]))
    return Demo(
        paths,
        list(replay["steps"]),
        list(replay["scores"]),
        won,
        goal,
        meta.get("state"),
        int(meta.get("game_seed", 0)),
    )


def _goal(env_id: str, won: bool, score_var: str | None, score: float) -> dict[str, Any] | None:
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
        "total_steps": settings.total_steps,
        "env_kwargs": dict(env_kwargs),
    }
    overrides = {"reward": "default", **settings.overrides, **fixed}
    cfg = resolve_config(env_id, overrides=overrides)
    if cfg.obs_type == "state" or cfg.wrappers:
        raise ConfigError(
            "robustify trains from pixels only: obs_type rgb or grayscale and no wrappers "
            f"(not obs_type {cfg.obs_type!r}, wrappers {cfg.wrappers})"
        )
    return cfg


class BackwardCallback(BaseCallback):
    """Moves every env's start back along the demonstration as episodes succeed.

    Args:
        demo: the demonstration.
        settings: threshold and window.
        on_move: called with a line each time the start moves.
    """

    def __init__(
        self, demo: Demo, settings: BackwardSettings, on_move: Callable[[str], None]
    ) -> None:
        super().__init__()
        self.demo = demo
        self.settings = settings
        self.on_move = on_move
        self.point = len(demo.paths) - 2  # the last point is the end itself
        self.fresh_seeds = False  # past point 0: the start with any game seed
        self.results: deque[bool] = deque(maxlen=settings.window)
        self.stale: np.ndarray = np.zeros(0, bool)
        self.history: list[dict[str, Any]] = []
        self.successes = 0

    def _on_training_start(self) -> None:
        self.stale = np.zeros(self.training_env.num_envs, bool)
        self._apply()

    def _apply(self) -> None:
        """Every env's next episode starts from the current point."""
        env = self.training_env
        if self.fresh_seeds:
            env.env_method("set_start", self.demo.state, None)
            steps = self.demo.allowance(0)
        else:
            path = self.demo.paths[self.point]
            if self.point == 0:  # the start itself: as the demo began it
                env.env_method("set_start", self.demo.state, [self.demo.game_seed])
            else:
                env.env_method("set_start", str(path), None)
            steps = self.demo.allowance(self.point)
        env.set_attr("_max_episode_steps", steps)
        self.stale[:] = True  # the episodes running now began elsewhere
        self.results.clear()

    def _on_step(self) -> bool:
        dones, infos = self.locals["dones"], self.locals["infos"]
        for i in np.flatnonzero(dones):
            if self.stale[i]:
                self.stale[i] = False
                continue
            self.results.append(bool(infos[i].get("success")))
        rate = sum(self.results) / len(self.results) if self.results else 0.0
        self.logger.record("backward/start_step", self.demo.steps[self.point])
        self.logger.record("backward/point", self.point)
        self.logger.record("backward/fresh_seeds", float(self.fresh_seeds))
        self.logger.record("backward/success_rate", rate)
        window = self.settings.window
        if len(self.results) >= window and rate >= self.settings.threshold:
            self._move(rate)
        return True

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
        if self.fresh_seeds:
            self.results.clear()  # keep training from fresh seeds; nothing is left to move
            return
        if self.point == 0:
            self.fresh_seeds = True
            where = "the start with fresh game seeds"
        else:
            self.point -= 1
            where = f"demo step {self.demo.steps[self.point]}"
        self.on_move(f"step {self.num_timesteps:,}: success {rate:.2f}; start moves to {where}")
        self._apply()


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

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["run_dir"], data["model_path"] = str(self.run_dir), str(self.model_path)
        return data


def run_robustify(
    explore_dir: str | Path,
    run_dir: str | Path,
    settings: BackwardSettings | None = None,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RobustResult:
    """Robustify the best path of the archive in `explore_dir` into a PPO policy in `run_dir`
    (a new run directory); see the module docstring. `env_kwargs`: the user's, replacing the
    archive's."""
    settings = settings or BackwardSettings()
    settings.check()
    explore_dir = Path(explore_dir).expanduser()
    run = RunDir(Path(run_dir).expanduser())
    run.check_new()
    archive, best = load_demo_archive(explore_dir)
    env_id = str(archive.meta.get("env_id"))
    kwargs = archive_env_kwargs(archive, explore_dir / ARCHIVE_FILE, env_kwargs)
    say = progress or (lambda line: None)
    run.path.mkdir(parents=True, exist_ok=True)
    demo = record_demo(archive, best, run.path, settings.every, kwargs)
    cfg = robust_config(env_id, demo, settings, kwargs)
    say(
        f"robustifying {env_id}: a {demo.length}-step demonstration "
        f"({'won' if demo.won else 'score ' + str(demo.scores[-1])}), {len(demo.paths)} start "
        f"points, PPO from {cfg.obs_type} frames, sticky actions {cfg.sticky_action_prob}"
    )
    run.write_config(config_to_yaml(cfg))
    run.write_state(env_id=env_id, algo="robustify", status="running", explore=str(explore_dir))
    return _train(env_id, run, cfg, demo, settings, say)


def _train(
    env_id: str,
    run: RunDir,
    cfg: TrainConfig,
    demo: Demo,
    settings: BackwardSettings,
    say: Callable[[str], None],
) -> RobustResult:
    import torch
    from stable_baselines3.common.logger import configure

    from metabonk_gym.training.callbacks import EpisodeStats
    from metabonk_gym.training.ppo import LearnLoop, load_or_make

    torch.set_num_threads(cfg.torch_threads)
    _, _, info_names = probe_env(env_id, cfg)
    venv = make_train_venv(env_id, cfg)
    logger = configure(str(run.tensorboard), ["tensorboard"])
    try:
        model = load_or_make(cfg, venv)
        model.set_logger(logger)

        def metadata() -> dict[str, Any]:
            return model_metadata(env_id, "ppo", cfg.to_dict(), robustify=True)

        stats = EpisodeStats(window=cfg.win_window)
        loop = LearnLoop(run, cfg, info_names, metadata, stats)
        backward = BackwardCallback(demo, settings, say)
        interrupted = loop.learn(
            model, cfg.total_steps, reset=True, callbacks=[backward], label="robustify"
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
    )
    run.write_state(status="interrupted" if interrupted else "finished", **_summary(result))
    atomic_write_text(run.path / "robustify.json", json.dumps(result.to_dict(), indent=2))
    return result


def _summary(result: RobustResult) -> dict[str, Any]:
    data = result.to_dict()
    return {k: data[k] for k in ("num_timesteps", "reached_point", "reached_step", "fresh_seeds")}


__all__ = ["BackwardSettings", "RobustResult", "run_robustify"]
