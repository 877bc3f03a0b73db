"""`train_ppo`: SB3 PPO on subprocess envs, logged to TensorBoard, checkpointed atomically,
resumable, and safe to stop with Ctrl-C.

Everything that can be wrong with the input (env id, config keys, state, reward, `--init-from`
model, run directory) is checked before the run directory is created or changed. `LearnLoop` is
the one learn loop (callbacks, checkpoints, Ctrl-C save); curricula run it per stage.

>>> from metabonk_gym.training.config import TrainConfig
>>> resume_changes(TrainConfig(n_envs=4), {"total_steps": 10, "n_envs": 2})
['n_envs']
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metabonk_gym.rundir import RunDir, model_metadata, read_model_metadata, save_model
from metabonk_gym.training.config import (
    MODEL_KEYS,
    TrainConfig,
    check_env_fit,
    config_to_yaml,
    resolve_config,
)
from metabonk_gym.training.envs import close_venv, make_train_venv, probe_env
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.faults import TrainingFailed, fault_cause, is_disk_full
from metabonk_gym.training.safeload import load_policy_params, load_ppo
from metabonk_gym.training.video import tensorboard_writer

if TYPE_CHECKING:
    from metabonk_gym.training.callbacks import EpisodeStats

#: Keys a `--resume` may change; the rest define the run.
RESUME_MUTABLE: frozenset[str] = frozenset(
    {
        "total_steps",
        "checkpoint_every",
        "keep_checkpoints",
        "video_every",
        "video_length",
        "win_window",
        "device",
        "torch_threads",
        "base_port",  # Megabonk: the games may listen elsewhere when a run continues
    }
)


@dataclass
class TrainResult:
    """What a training call did; `to_dict()` is what the CLI prints as JSON."""

    run_dir: Path
    model_path: Path | None
    num_timesteps: int
    interrupted: bool = False
    episodes: int = 0
    win_rate: float | None = None
    mean_return: float | None = None
    checkpoints: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["run_dir"] = str(self.run_dir)
        data["model_path"] = str(self.model_path) if self.model_path else None
        return data


def resume_changes(stored: TrainConfig, overrides: Mapping[str, Any]) -> list[str]:
    """Keys in `overrides` that differ from `stored` and that a resume may not change."""
    current = stored.to_dict()
    return sorted(
        k
        for k, v in overrides.items()
        if v is not None and k not in RESUME_MUTABLE and current.get(k) != v
    )


def check_compatible(
    model_path: Path, meta: Mapping[str, Any], cfg: TrainConfig, env_id: str
) -> None:
    """A model can start this run only if it saw the same frames and buttons the same way."""
    theirs = meta.get("config", {})
    diff = [k for k in MODEL_KEYS if k in theirs and theirs[k] != getattr(cfg, k)]
    if diff:
        detail = ", ".join(f"{k}: model {theirs[k]!r} vs config {getattr(cfg, k)!r}" for k in diff)
        raise ConfigError(
            f"{model_path} was trained with different preprocessing ({detail}); set these keys in the "
            "config to the model's values"
        )
    their_env = str(meta.get("env_id", env_id)).split(":")[-1]
    if their_env != env_id.split(":")[-1]:
        raise ConfigError(f"{model_path} was trained on {their_env}, not {env_id}")


def quiet_logger() -> Any:
    """An SB3 logger that writes nothing, for timed runs (benches): without one, every
    `learn()` makes SB3 create an empty `/tmp/SB3-<date>` folder that nobody removes.

    >>> quiet_logger().output_formats
    []
    """
    from stable_baselines3.common.logger import Logger

    return Logger(folder=None, output_formats=[])


def tensorboard_logger(run: RunDir) -> Any:
    """An SB3 logger that writes the run's TensorBoard event files (`run.tensorboard`)."""
    from stable_baselines3.common.logger import configure

    return configure(str(run.tensorboard), ["tensorboard"])


def _write_text(logger: Any, tag: str, text: str, step: int) -> None:

    writer = tensorboard_writer(logger)
    if writer is not None:
        writer.add_text(tag, "```\n" + text + "\n```", step)
        writer.flush()


def resume_config(
    run: RunDir, env_id: str, config_file: str | Path | None, overrides: Mapping[str, Any]
) -> tuple[TrainConfig, Path]:
    """(config, model to resume from) of the PPO run in `run`: its own config.yaml, where
    `overrides` may change only `RESUME_MUTABLE` keys, and the newest checkpoint, which must
    have fewer steps than the config's `total_steps`."""
    run.check_resumable()
    stale = run.check_not_running()
    if stale is not None:
        logging.getLogger(__name__).warning(stale)
    stored_env = run.read_state().get("env_id")
    if stored_env and stored_env.split(":")[-1] != env_id.split(":")[-1]:
        raise RunDirError(f"{run.path} is a run on {stored_env}, not {env_id}")
    stored = resolve_config(env_id, base=run.read_config())
    changed = resume_changes(stored, overrides)
    if config_file is not None:
        raise ConfigError(
            "--resume uses the run's own config.yaml; drop --config (flags may change "
            f"only {', '.join(sorted(RESUME_MUTABLE))})"
        )
    if changed:
        raise ConfigError(
            f"--resume cannot change {', '.join(changed)} (the run was trained with its config.yaml); "
            f"a resume may change only {', '.join(sorted(RESUME_MUTABLE))}"
        )
    cfg = resolve_config(env_id, base=run.read_config(), overrides=overrides)
    resume_from, meta = run.resume_point()
    start_steps = int(meta["num_timesteps"])
    if start_steps >= cfg.total_steps:
        raise RunDirError(
            f"{run.path} already has {start_steps} steps of {cfg.total_steps}; pass a larger "
            "--total-steps to continue it"
        )
    return cfg, resume_from


def train_ppo(
    env_id: str,
    run_dir: str | Path,
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    resume: bool = False,
    init_from: str | Path | None = None,
    progress: bool = False,
    callbacks: Sequence[Any] = (),
    trust_model: bool = False,
    progress_every_s: float = 30.0,
) -> TrainResult:
    """Train (or continue) a PPO run in `run_dir`; see the module docstring.

    `overrides` are config keys (flags); `callbacks` are extra SB3 callbacks. Ctrl-C
    (KeyboardInterrupt) saves a checkpoint and model.zip and returns `interrupted=True`. A dead
    env worker, a game gone or a full disk saves a checkpoint when it can, marks `run.json`
    failed and raises `TrainingFailed`. Model files are loaded without unpickling anything
    unless `trust_model` (`metabonk_gym.training.safeload`).
    """

    run = RunDir(Path(run_dir))
    overrides = dict(overrides or {})
    resume_from: Path | None = None
    if resume:
        if init_from is not None:
            raise ConfigError("--resume continues a run from its own checkpoints; drop --init-from")
        cfg, resume_from = resume_config(run, env_id, config_file, overrides)
    else:
        cfg = resolve_config(env_id, config_file, overrides)
        run.check_new()

    _, action_space, info_names = probe_env(env_id, cfg)
    check_env_fit(cfg, env_id, info_names)
    init_params = None
    if init_from is not None:
        init_path = Path(init_from).expanduser()
        check_compatible(init_path, read_model_metadata(init_path), cfg, env_id)
        init_params = load_policy_params(
            init_path, getattr(action_space, "n", None), trust=trust_model
        )

    existed = run.path.exists()
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(config_to_yaml(cfg))  # on --resume only total_steps and logging keys change
    run.write_state(
        env_id=env_id,
        algo="ppo",
        status="running",
        error=None,
        total_steps=cfg.total_steps,
        init_from=str(init_from) if init_from else run.read_state().get("init_from"),
        **run.owner(),
    )
    try:
        return _learn(
            env_id,
            run,
            cfg,
            info_names,
            resume_from,
            init_params,
            progress,
            callbacks,
            init_from=str(init_from) if init_from else None,
            trust_model=trust_model,
            progress_every_s=progress_every_s,
        )
    except TrainingFailed:
        raise
    except Exception as exc:
        if not resume:
            run.discard_new(existed)
        if run.state_file.is_file():
            with contextlib.suppress(OSError):
                run.write_state(status="failed", error=f"{type(exc).__name__}: {exc}", pid=None)
        raise


def load_or_make(
    cfg: TrainConfig,
    venv: Any,
    resume_from: Path | None = None,
    init_params: dict[str, Any] | None = None,
    trust: bool = False,
) -> Any:
    """The PPO model of a run: loaded from `resume_from` (unpickling nothing unless `trust`),
    else new per `cfg` (with the policy weights `init_params` when given)."""
    from metabonk_gym.training.policies import make_ppo

    if resume_from is not None:
        return load_ppo(resume_from, venv, cfg, device=cfg.device, trust=trust)
    model = make_ppo(cfg, venv)
    if init_params is not None:
        model.policy.load_state_dict(init_params["policy"])
    return model


@dataclass
class LearnLoop:
    """SB3's `learn` with the run's callbacks: game statistics, checkpoints, think scalars,
    videos and a progress bar; Ctrl-C (KeyboardInterrupt) saves a checkpoint. `train_ppo` runs
    it once; a curriculum runs it per stage with its own callbacks (promotion, swarm).

    Args:
        run: the run directory (checkpoints, videos).
        cfg: the run's config (checkpoint, video and window settings).
        info_names: the env's info variables, logged as `game/<name>` at episode end.
        metadata: the metabonk metadata saved with each checkpoint.
        stats: episode statistics shared with the caller (cleared by it between stages).
        progress: show progress: a rich bar on a terminal, else a line every
            `progress_every_s` seconds (logs, pipes, nohup).
        extra: callbacks added to every `learn` call (e.g. the caller's own).
        progress_every_s: seconds between progress lines when stdout is not a terminal.
    """

    run: RunDir
    cfg: TrainConfig
    info_names: list[str]
    metadata: Callable[[], dict[str, Any]]
    stats: EpisodeStats
    progress: bool = False
    extra: Sequence[Any] = ()
    progress_every_s: float = 30.0

    def learn(
        self,
        model: Any,
        steps: int,
        *,
        reset: bool,
        callbacks: Sequence[Any] = (),
        label: str = "PPO",
    ) -> bool:
        """Train `model` for `steps` more env steps (`reset`: count from 0); returns True when
        Ctrl-C stopped it (a checkpoint of the model is saved first)."""
        from stable_baselines3.common.callbacks import CallbackList

        from metabonk_gym.training.advice import AdviceCallback, fade_of, set_train_step
        from metabonk_gym.training.callbacks import (
            CheckpointCallback,
            GameStatsCallback,
            LineProgressCallback,
            RichProgressCallback,
            ThinkScalarsCallback,
            VideoCallback,
        )

        cfg = self.cfg
        checkpoint = CheckpointCallback(
            cfg.checkpoint_every, self.run, self.metadata, keep=cfg.keep_checkpoints
        )
        # ThinkScalarsCallback logs nothing unless the envs carry info["think"] (PauseToThink).
        cbs: list[Any] = [
            GameStatsCallback(self.info_names, self.stats),
            checkpoint,
            ThinkScalarsCallback(),
            *callbacks,
        ]
        if cfg.video_every > 0:
            cbs.append(
                VideoCallback(cfg.video_every, cfg.video_length, self.run, fps=60.0 / cfg.frameskip)
            )
        bar: Any = None
        if self.progress:
            total = int(model.num_timesteps) + steps
            if sys.stdout.isatty():
                bar = RichProgressCallback(total, self.stats, label)
            else:  # a log or a pipe: a line every progress_every_s seconds
                bar = LineProgressCallback(total, self.stats, label, self.progress_every_s)
            cbs.append(bar)
        cbs.extend(self.extra)
        if fade_of(cfg.wrappers) is not None:  # a fading adviser: the envs need the step count
            cbs.append(AdviceCallback(cfg.wrappers))
            set_train_step(model.get_env(), int(model.num_timesteps))  # before learn's reset
        try:
            model.learn(
                total_timesteps=steps, reset_num_timesteps=reset, callback=CallbackList(cbs)
            )
        except KeyboardInterrupt:
            checkpoint.save_now(model)
            return True
        except Exception as exc:
            cause = fault_cause(exc)
            if cause is None:
                raise
            save = None if is_disk_full(exc) else checkpoint.save_now
            raise self.stopped(model, cause, save) from exc
        finally:
            if bar is not None:
                bar._on_training_end()
        return False

    def stopped(
        self, model: Any, cause: str, save: Callable[[Any], str] | None = None
    ) -> TrainingFailed:
        """After a fault: save a checkpoint (the weights are whole: a fault strikes while
        collecting a rollout or writing a file, not mid-update), mark `run.json` failed, and
        return the one-line error naming the cause, the checkpoint and `--resume`."""
        steps = int(model.num_timesteps)
        saved = None
        if save is not None:
            try:
                saved = save(model)
            except Exception as exc:  # e.g. the disk filled up too
                cause = f"{cause}; saving a checkpoint failed too ({exc})"
        last = self.run.list_checkpoints()
        if saved is not None:
            kept = f"checkpoint saved: {saved}"
        elif last:
            kept = f"last good checkpoint: {last[-1][1]} ({last[-1][0]} steps)"
        else:
            kept = "no checkpoint was saved yet"
        message = (
            f"training stopped at step {steps}: {cause}; {kept}; fix the cause and continue "
            f"with the same command plus --resume (run directory {self.run.path})"
        )
        with contextlib.suppress(OSError):  # a full disk may refuse run.json too
            self.run.write_state(status="failed", error=message, pid=None)
        return TrainingFailed(message)


def _learn(
    env_id: str,
    run: RunDir,
    cfg: TrainConfig,
    info_names: list[str],
    resume_from: Path | None,
    init_params: dict[str, Any] | None,
    progress: bool,
    extra_callbacks: Sequence[Any],
    init_from: str | None = None,
    trust_model: bool = False,
    progress_every_s: float = 30.0,
) -> TrainResult:
    import torch

    from metabonk_gym.training.callbacks import EpisodeStats

    torch.set_num_threads(cfg.torch_threads)
    venv = make_train_venv(env_id, cfg)
    logger = None
    try:
        model = load_or_make(cfg, venv, resume_from, init_params, trust=trust_model)
        logger = tensorboard_logger(run)
        model.set_logger(logger)
        if resume_from is None:
            _write_text(logger, "config", config_to_yaml(cfg), 0)

        def metadata() -> dict[str, Any]:
            return model_metadata(env_id, "ppo", cfg.to_dict(), init_from=init_from)

        stats = EpisodeStats(window=cfg.win_window)
        loop = LearnLoop(
            run, cfg, info_names, metadata, stats, progress, extra_callbacks, progress_every_s
        )
        interrupted = loop.learn(
            model,
            cfg.total_steps - model.num_timesteps,
            reset=resume_from is None,
            label=f"PPO {env_id.split('/')[-1]}",
        )
        try:
            save_model(model, run.model, metadata())
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            raise loop.stopped(model, str(fault_cause(exc))) from exc
        run.write_state(
            pid=None,
            status="interrupted" if interrupted else "finished",
            num_timesteps=model.num_timesteps,
            episodes=stats.episodes,
            win_rate=stats.win_rate(),
            mean_return=stats.mean_return(),
        )
        return TrainResult(
            run_dir=run.path,
            model_path=run.model,
            num_timesteps=int(model.num_timesteps),
            interrupted=interrupted,
            episodes=stats.episodes,
            win_rate=stats.win_rate(),
            mean_return=stats.mean_return(),
            checkpoints=[p.name for _, p in run.list_checkpoints()],
        )
    finally:
        if logger is not None:
            logger.close()
        close_venv(venv)
