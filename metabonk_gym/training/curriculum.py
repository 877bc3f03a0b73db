"""`run_curriculum`: PPO through a sequence of start states (or seeded variants) with promotion
rules, or in swarm mode, where a milestone reached by any env becomes every env's new start.

A plan (YAML/TOML/JSON, or a dict) is either

    config: {n_envs: 4}                 # optional training config keys for every stage
    stages:
      - name: room1
        state: room1                    # named start or .state file
        game_seeds: [1, 2, 3]           # optional seeded variants
        promote: {win_rate: 0.8, window: 20}   # or {mean_return: 2.0, window: 20}
        max_steps: 200000               # this stage's budget
        reward: room1                   # optional per-stage env keys (reward, goal, ...)
      - name: room2
        state: room2

or `swarm: {milestone: rooms_visited, total_steps: 200000}`. One model learns through all stages;
each stage gets fresh envs and its own TensorBoard scalars (`curriculum/<stage>/win_rate`) next to
`curriculum/stage`. A stage that ends its budget unpromoted stops the curriculum unless it says
`required: false`. Progress is kept in `run.json`, so `resume=True` continues the current stage.

>>> plan = load_plan({"stages": [{"name": "a", "state": "room1", "promote": {"win_rate": 0.5}}]})
>>> plan.stages[0].promote.window, plan.stages[0].max_steps
(20, 100000)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.rundir import RunDir, model_metadata, save_model
from metabonk_gym.training.callbacks import EpisodeStats
from metabonk_gym.training.config import (
    MODEL_KEYS,
    TrainConfig,
    check_env_fit,
    config_to_yaml,
    game_of,
    resolve_config,
    validate,
)
from metabonk_gym.training.envs import close_venv, make_train_venv, probe_env
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.ppo import LearnLoop, TrainResult, load_or_make, tensorboard_logger
from metabonk_gym.training.transpose import wrap_for_sb3

STAGE_KEYS = {"name", "state", "game_seeds", "promote", "max_steps", "required"}
STAGE_ENV_KEYS = {"reward", "goal", "max_episode_steps", "sticky_action_prob", "env_kwargs"}
SWARM_KEYS = {"milestone", "total_steps", "goal"}


@dataclass
class Promotion:
    """Promote when the last `window` episodes of the stage reach `win_rate` or `mean_return`."""

    win_rate: float | None = None
    mean_return: float | None = None
    window: int = 20

    def met(self, wins: Sequence[bool], returns: Sequence[float]) -> bool:
        if self.win_rate is None and self.mean_return is None:
            return False
        if len(returns) < self.window:
            return False
        if (
            self.win_rate is not None
            and sum(list(wins)[-self.window :]) / self.window < self.win_rate
        ):
            return False
        return not (
            self.mean_return is not None
            and sum(list(returns)[-self.window :]) / self.window < self.mean_return
        )


@dataclass
class Stage:
    name: str
    state: str | None = None
    game_seeds: list[int] | None = None
    promote: Promotion = field(default_factory=Promotion)
    max_steps: int = 100_000
    required: bool = True
    env: dict[str, Any] = field(default_factory=dict)


@dataclass
class Plan:
    stages: list[Stage] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    swarm: dict[str, Any] | None = None


def _read_plan_file(path: Path) -> Any:
    if not path.is_file():
        raise ConfigError(f"plan file not found: {path}")
    try:
        return load_config_file(path)
    except ConfigFileError as exc:
        raise ConfigError(f"plan file: {exc}") from exc


def load_plan(source: str | Path | Mapping[str, Any]) -> Plan:
    """A checked plan from a file or a mapping (unknown keys are errors)."""
    data = (
        dict(source) if isinstance(source, Mapping) else _read_plan_file(Path(source).expanduser())
    )
    if not isinstance(data, Mapping):
        raise ConfigError(
            "a plan must be a mapping with 'stages' (or 'swarm') and optionally 'config'"
        )
    extra = set(data) - {"stages", "config", "swarm"}
    if extra:
        raise ConfigError(
            f"unknown plan keys {sorted(extra)}; a plan has 'stages' or 'swarm', and 'config'"
        )
    config = validate(dict(data.get("config") or {}), "plan config")
    if data.get("swarm") is not None:
        swarm = dict(data["swarm"])
        bad = set(swarm) - SWARM_KEYS
        if bad:
            raise ConfigError(
                f"unknown swarm keys {sorted(bad)}; valid: {', '.join(sorted(SWARM_KEYS))}"
            )
        if data.get("stages"):
            raise ConfigError("a plan has either 'stages' or 'swarm', not both")
        return Plan(config=config, swarm=swarm)
    raw = data.get("stages")
    if not isinstance(raw, list) or not raw:
        raise ConfigError("a plan needs a non-empty list 'stages' (or a 'swarm' section)")
    stages = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"stage {i} must be a mapping")
        bad = set(entry) - STAGE_KEYS - STAGE_ENV_KEYS
        if bad:
            valid = ", ".join(sorted(STAGE_KEYS | STAGE_ENV_KEYS))
            raise ConfigError(f"stage {i}: unknown keys {sorted(bad)}; valid: {valid}")
        promote = dict(entry.get("promote") or {})
        if set(promote) - {"win_rate", "mean_return", "window"}:
            raise ConfigError(
                f"stage {i}: promote takes win_rate, mean_return and window, not {sorted(promote)}"
            )
        env = validate({k: entry[k] for k in STAGE_ENV_KEYS if k in entry}, f"stage {i}")
        seeds = entry.get("game_seeds")
        if seeds is not None and not (
            isinstance(seeds, list) and all(isinstance(s, int) for s in seeds)
        ):
            raise ConfigError(f"stage {i}: game_seeds must be a list of ints")
        stages.append(
            Stage(
                name=str(entry.get("name", f"stage{i + 1}")),
                state=entry.get("state"),
                game_seeds=seeds,
                promote=Promotion(**promote),
                max_steps=int(entry.get("max_steps", 100_000)),
                required=bool(entry.get("required", True)),
                env=env,
            )
        )
    return Plan(stages=stages, config=config)


def stage_config(cfg: TrainConfig, stage: Stage) -> TrainConfig:
    """The base config with the stage's start, seeds and env keys."""
    changes: dict[str, Any] = dict(stage.env)
    if stage.state is not None:
        changes["state"] = stage.state
    changes["game_seeds"] = stage.game_seeds
    return dataclasses.replace(cfg, **changes)


@dataclass
class CurriculumResult(TrainResult):
    stages: list[dict[str, Any]] = field(default_factory=list)
    milestones: list[dict[str, Any]] = field(default_factory=list)


def _swarm_setup(
    env_id: str, cfg: TrainConfig, swarm: Mapping[str, Any], milestone: str | None
) -> tuple[TrainConfig, list[str], str]:
    """(config, the env's info variables, the milestone variable) of swarm mode: the plan's
    `total_steps` and `goal` over the config; the milestone given, the plan's or the game's."""
    swarm_cfg = dict(swarm)
    if "total_steps" in swarm_cfg:
        cfg = dataclasses.replace(cfg, total_steps=int(swarm_cfg["total_steps"]))
    cfg = dataclasses.replace(cfg, goal=swarm_cfg.get("goal"))
    _, _, info_names = probe_env(env_id, cfg)
    check_env_fit(cfg, env_id, info_names)
    name = milestone or swarm_cfg.get("milestone") or default_milestone(env_id, cfg)
    if name is None:
        raise ConfigError(
            f"{env_id}'s game declares no milestones (milestones.yaml); pass --milestone "
            f"VARIABLE, one of {', '.join(info_names)}"
        )
    if name not in info_names:
        raise ConfigError(
            f"swarm milestone {name!r} is not an info variable of {env_id}; choose one of {', '.join(info_names)}"
        )
    return cfg, info_names, str(name)


def _check_stages(env_id: str, cfg: TrainConfig, stages: list[Stage]) -> list[str]:
    """The env's info variables, after checking every stage trains the same model and fits the
    env (unknown states fail now, not hours later)."""
    for stage in stages:
        sc = stage_config(cfg, stage)
        for key in MODEL_KEYS:
            if getattr(sc, key) != getattr(cfg, key):
                raise ConfigError(
                    f"stage {stage.name} cannot change {key}: every stage trains the same model"
                )
    _, _, info_names = probe_env(env_id, stage_config(cfg, stages[0]))
    for stage in stages:
        check_env_fit(stage_config(cfg, stage), env_id, info_names)
    for stage in stages[1:]:
        probe_env(env_id, stage_config(cfg, stage))  # unknown states fail now, not hours later
    return info_names


def run_curriculum(
    env_id: str,
    plan: str | Path | Mapping[str, Any],
    run_dir: str | Path,
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    swarm: bool = False,
    milestone: str | None = None,
    resume: bool = False,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
) -> CurriculumResult:
    """Run a curriculum plan (or swarm mode) in `run_dir`; see the module docstring."""

    loaded = load_plan(plan) if not (swarm and plan is None) else Plan(swarm={})
    if swarm and loaded.swarm is None:
        loaded.swarm = {}
    run = RunDir(Path(run_dir))
    if resume:
        run.check_resumable()
        status = run.read_state().get("status")
        if status in ("finished", "stopped"):
            raise RunDirError(
                f"the curriculum in {run.path} already ended ({status}); start a new --run-dir "
                "with a plan that begins at the stage you want"
            )
        cfg = resolve_config(
            env_id,
            base=run.read_config(),
            overrides={k: v for k, v in (overrides or {}).items() if k in ("total_steps",)},
        )
        resume_from, meta = run.resume_point()
    else:
        run.check_new()
        cfg = resolve_config(
            env_id,
            config_file,
            {**loaded.config, **{k: v for k, v in (overrides or {}).items() if v is not None}},
        )
        resume_from, meta = None, {}
    if loaded.swarm is not None:
        cfg, info_names, name = _swarm_setup(env_id, cfg, loaded.swarm, milestone)
        stages: list[Stage] = []
    else:
        stages = loaded.stages
        info_names = _check_stages(env_id, cfg, stages)
        name = None

    run.path.mkdir(parents=True, exist_ok=True)
    if not resume:
        run.write_config(config_to_yaml(cfg))
        run.write_state(
            env_id=env_id,
            algo="curriculum",
            status="running",
            stage_index=0,
            stage_start=0,
            stages=[],
            plan=_plan_dict(loaded),
        )
    return _run(
        env_id,
        run,
        cfg,
        stages,
        name,
        info_names,
        resume_from,
        int(meta.get("num_timesteps", 0)),
        progress,
        callbacks,
    )


def default_milestone(env_id: str, cfg: TrainConfig) -> str | None:
    """Swarm mode's milestone variable when none is given: the first of the game's
    milestones.yaml (None when the game declares none).

    >>> default_milestone("MetaBonk/BonkQuest-v0", TrainConfig())
    'rooms_visited'
    """
    game = game_of(env_id, cfg.env_kwargs)
    milestones = game.milestones() if game is not None else []
    return str(milestones[0]["variable"]) if milestones else None


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(plan), default=str))


@dataclass
class _Session:
    """The model and envs of one curriculum or swarm run while it learns (`_run`).

    Args:
        env_id: the env trained on.
        run: the run directory.
        cfg: the run's config.
        loop: SB3's learn with the run's callbacks.
        logger: the TensorBoard logger the model writes to.
        resume_from: the checkpoint a resumed run starts from (None: a new run).
    """

    env_id: str
    run: RunDir
    cfg: TrainConfig
    loop: LearnLoop
    logger: Any
    resume_from: Path | None
    model: Any = None
    venv: Any = None

    def swarm(self, milestone: str, milestones: list[dict[str, Any]]) -> bool:
        """Swarm mode to `total_steps`, each env restarted from the newest milestone's state;
        True when Ctrl-C stopped it."""
        cfg = self.cfg
        # SwarmCallback reads these every step
        self.venv = make_train_venv(self.env_id, cfg, info_keys=(milestone, "won", "lost"))
        self.model = load_or_make(cfg, self.venv, self.resume_from)
        self.model.set_logger(self.logger)
        best = max([m["value"] for m in milestones], default=None)
        if milestones:
            self.venv.env_method("set_start", milestones[-1]["state"])
        swarm_cb = SwarmCallback(milestone, self.run, milestones, best)
        return self.loop.learn(
            self.model,
            cfg.total_steps - self.model.num_timesteps,
            reset=self.resume_from is None,
            callbacks=[swarm_cb],
            label=f"swarm {milestone}",
        )

    def stage(
        self, i: int, stage: Stage, state: dict[str, Any], first: int
    ) -> tuple[bool, PromotionCallback, int]:
        """Stage `i` until it is promoted or spends its steps: (Ctrl-C stopped it, its
        promotion callback, the step it started at). `first` is the stage a resumed run
        starts at."""
        scfg = stage_config(self.cfg, stage)
        if self.venv is not None:
            close_venv(self.venv)
        self.venv = make_train_venv(self.env_id, scfg)
        if self.model is None:
            self.model = load_or_make(scfg, self.venv, self.resume_from)
            self.model.set_logger(self.logger)
        else:
            self.model.set_env(wrap_for_sb3(self.venv), force_reset=True)
        model = self.model
        resumed = i == first and self.resume_from
        stage_start = int(state.get("stage_start", 0)) if resumed else model.num_timesteps
        self.run.write_state(stage_index=i, stage_start=stage_start, stage=stage.name)
        self.loop.stats.clear()
        promo = PromotionCallback(stage, self.loop.stats, i)
        budget = stage.max_steps - (model.num_timesteps - stage_start)
        if budget > 0 and self.loop.learn(
            model,
            budget,
            reset=self.resume_from is None and i == 0,
            callbacks=[promo],
            label=f"stage {stage.name}",
        ):
            return True, promo, stage_start
        return False, promo, stage_start

    def stages(
        self, stages: list[Stage], state: dict[str, Any], results: list[dict[str, Any]]
    ) -> bool:
        """The plan's stages from the one `run.json` names; True when Ctrl-C stopped them."""
        index = int(state.get("stage_index", 0))
        stats = self.loop.stats
        for i in range(index, len(stages)):
            stage = stages[i]
            interrupted, promo, stage_start = self.stage(i, stage, state, index)
            if interrupted:
                return True
            model = self.model
            results.append(
                {
                    "name": stage.name,
                    "promoted": promo.promoted,
                    "steps": int(model.num_timesteps - stage_start),
                    "end_step": int(model.num_timesteps),
                    "episodes": stats.episodes,
                    "win_rate": stats.win_rate(),
                    "mean_return": stats.mean_return(),
                }
            )
            # a promotion stops `learn` mid-rollout, before SB3 writes its logs: write them now
            model.logger.record("curriculum/stage", i)
            model.logger.record(f"curriculum/{stage.name}/promoted", float(promo.promoted))
            model.logger.dump(model.num_timesteps)
            self.run.write_state(
                stages=results, stage_index=i + 1, stage_start=int(model.num_timesteps)
            )
            if not promo.promoted and stage.required:
                break
        return False


def _run(
    env_id: str,
    run: RunDir,
    cfg: TrainConfig,
    stages: list[Stage],
    milestone: str | None,
    info_names: list[str],
    resume_from: Path | None,
    start_steps: int,
    progress: bool,
    extra: Sequence[Any],
) -> CurriculumResult:
    import torch

    torch.set_num_threads(cfg.torch_threads)
    state = run.read_state()
    results: list[dict[str, Any]] = list(state.get("stages", []))
    milestones: list[dict[str, Any]] = list(state.get("milestones", []))
    logger = tensorboard_logger(run)
    interrupted = False
    stats = EpisodeStats(window=cfg.win_window)

    def metadata() -> dict[str, Any]:
        return model_metadata(env_id, "ppo", cfg.to_dict(), curriculum=True)

    loop = LearnLoop(run, cfg, info_names, metadata, stats, progress, extra)
    session = _Session(env_id, run, cfg, loop, logger, resume_from)
    try:
        if milestone is not None:
            interrupted = session.swarm(milestone, milestones)
        else:
            interrupted = session.stages(stages, state, results)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if session.venv is not None:
            close_venv(session.venv)
    model = session.model
    try:
        if model is not None:
            save_model(model, run.model, metadata())
    finally:
        logger.close()
    if model is None:
        raise RunDirError(f"{run.path}: the curriculum did not start")
    finished = bool(stages) and len(results) == len(stages) and all(r["promoted"] for r in results)
    run.write_state(
        status="interrupted"
        if interrupted
        else ("finished" if finished or milestone else "stopped"),
        num_timesteps=int(model.num_timesteps),
        milestones=milestones,
    )
    return CurriculumResult(
        run_dir=run.path,
        model_path=run.model,
        num_timesteps=int(model.num_timesteps),
        interrupted=interrupted,
        episodes=stats.episodes,
        win_rate=stats.win_rate(),
        mean_return=stats.mean_return(),
        checkpoints=[p.name for _, p in run.list_checkpoints()],
        stages=results,
        milestones=milestones,
    )


class PromotionCallback(BaseCallback):
    """Stops `learn` once the stage's promotion rule is met; logs the stage's scalars.

    Args:
        stage: the stage (its name and promotion rule).
        stats: the episode statistics of this stage (cleared when it starts).
        index: the stage's position in the plan (`curriculum/stage`).
    """

    def __init__(self, stage: Stage, stats: EpisodeStats, index: int) -> None:
        super().__init__()
        self.stage = stage
        self.stats = stats
        self.index = index
        self.promoted = False

    def _on_step(self) -> bool:
        self.logger.record("curriculum/stage", self.index)
        win = self.stats.win_rate()
        if win is not None:
            self.logger.record(f"curriculum/{self.stage.name}/win_rate", win)
        if self.stats.returns:
            self.logger.record(
                f"curriculum/{self.stage.name}/return_mean", self.stats.mean_return()
            )
        if self.stage.promote.met(self.stats.wins, self.stats.returns):
            self.promoted = True
            return False
        return True


class SwarmCallback(BaseCallback):
    """Saves the state when an env beats the best milestone value so far, and makes that state
    every env's start (applied at each env's next reset).

    Args:
        milestone: the info variable to beat.
        run: the run directory (states go to `DIR/swarm/`, the list to `run.json`).
        milestones: the milestones so far (appended to; those of a resumed run).
        best: the best value so far (None: the first value seen).
    """

    def __init__(
        self, milestone: str, run: RunDir, milestones: list[dict[str, Any]], best: Any
    ) -> None:
        super().__init__()
        self.milestone = milestone
        self.run = run
        self.milestones = milestones
        self.best = best

    def _on_step(self) -> bool:
        infos, dones = self.locals["infos"], self.locals["dones"]
        for i, info in enumerate(infos):
            value = info.get(self.milestone)
            if value is None or dones[i] or info.get("won") or info.get("lost"):
                continue
            if self.best is None:
                self.best = value
                continue
            if value > self.best:
                self.best = value
                name = f"{self.milestone}_{int(value):04d}_step{self.num_timesteps}.state"
                path = self.run.path / "swarm" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                self.training_env.env_method("save_start_state", str(path), indices=[i])
                self.training_env.env_method("set_start", str(path))
                self.milestones.append(
                    {
                        "value": int(value),
                        "step": int(self.num_timesteps),
                        "state": str(path),
                        "env": i,
                    }
                )
                self.run.write_state(milestones=self.milestones)
        if self.best is not None:
            self.logger.record(f"swarm/{self.milestone}", float(self.best))
            self.logger.record("swarm/states", len(self.milestones))
        return True
