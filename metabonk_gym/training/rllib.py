"""`train_rllib`: PPO or APPO on a Ray cluster (RLlib), with the SB3 path's configs, envs,
run directory, TensorBoard scalars and `model.zip`.

The config is resolved exactly as for `train_ppo` (game defaults < file < `--set`), the envs are
`metabonk_gym.training.envs.make_env`'s (reward presets, shaping, goal, start states) plus the
same frame stack, and the policy is the SB3 policy `make_ppo` builds, wrapped as an RLModule
(`rllib_module.SB3PolicyModule`): the final `DIR/model.zip` is an SB3 model zip that `metabonk
eval` and `play --agent` load. Ray joins the cluster at `address` or starts locally; env runners
run `envs_per_runner` envs each (one process per emulator). Ray is imported only inside functions.

>>> opts = RayOptions(num_env_runners=2, envs_per_runner=2)
>>> opts.total_envs(), opts.vectorize_mode("MetaBonk/BonkQuest-v0"), opts.vectorize_mode("MetaBonk/Megabonk-v0")
(4, 'async', 'sync')
>>> rllib_settings(TrainConfig(n_steps=64, n_envs=4, batch_size=128), opts)["minibatch_size"]
128
>>> parse_games(["127.0.0.1:5560", "game2:5561"])
['127.0.0.1:5560', 'game2:5561']
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.process import reclaim_stop_signals
from metabonk_gym.registration import env_traits
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.config import TrainConfig, check_env_fit, config_to_yaml, resolve_config
from metabonk_gym.training.envs import check_policy_fit, probe_env
from metabonk_gym.training.errors import CheckpointError, ConfigError, RunDirError
from metabonk_gym.training.errors import RayError as RayError  # re-exported
from metabonk_gym.training.faults import TrainingFailed
from metabonk_gym.training.megabonk import GameUnreachableError, check_reachable
from metabonk_gym.training.ppo import RESUME_MUTABLE, TrainResult, resume_changes
from metabonk_gym.training.rllib_envs import ENV_NAME, build_one, env_creator
from metabonk_gym.training.video import tensorboard_writer
from metabonk_gym.utils import atomic_write_text
from metabonk_gym.vector.publish import PUBLISH_ENV

ALGOS: tuple[str, ...] = ("ppo", "appo")
#: Seconds to wait for a TCP connection to `--address` before giving up.
ADDRESS_TIMEOUT_S = 5.0
CHECKPOINT_PREFIX = "step_"


@dataclass
class RayOptions:
    """Where and how wide an RLlib run goes (not part of `TrainConfig`: a run may resume on
    another cluster).

    Args:
        address: a running cluster (`HOST:PORT` of `ray start --head`, or `auto`); None: start
            Ray locally.
        num_env_runners: Ray actors that step envs (0: the driver steps them).
        envs_per_runner: envs per runner (None: the config's `n_envs` spread over the runners).
        num_learners: learner actors (0: the driver learns).
        num_gpus_per_learner: GPUs per learner (None: 1 when the config's device is cuda/auto and
            torch sees a GPU, else 0).
        games: Megabonk: `host:port` of each env's game (env i: games[i]); None: `base_port + i`
            on `env_kwargs.host`.
        runner_resources: custom Ray resources each runner needs (places runners on nodes that
            offer them, e.g. `{"game_node": 1}`).
        cpus_per_runner: CPUs Ray reserves per runner.
        num_cpus: CPUs of a locally started Ray (None: enough for the runners).
        sample_timeout_s: how long the driver waits for a runner's samples before treating it
            as failed.
    """

    address: str | None = None
    num_env_runners: int = 1
    envs_per_runner: int | None = None
    num_learners: int = 0
    num_gpus_per_learner: float | None = None
    games: list[str] | None = None
    runner_resources: dict[str, float] = field(default_factory=dict)
    cpus_per_runner: float = 1.0
    num_cpus: int | None = None
    sample_timeout_s: float = 120.0

    def runners(self) -> int:
        return max(int(self.num_env_runners), 1)

    def total_envs(self, n_envs: int | None = None) -> int:
        per = self.envs_per_runner
        if per is None:
            per = max(1, -(-int(n_envs or 1) // self.runners()))
        return per * self.runners()

    def per_runner(self, n_envs: int) -> int:
        return self.total_envs(n_envs) // self.runners()

    def vectorize_mode(self, env_id: str) -> str:
        """`async` (one process per env) for emulators, `sync` (in the runner) for TCP clients."""
        return "async" if env_traits(env_id).one_per_process else "sync"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RayOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown Ray option(s) {unknown}; valid: {', '.join(sorted(known))}")
        return cls(**dict(data))


def parse_games(items: list[str] | None) -> list[str] | None:
    """`host:port` entries, checked (one game per env)."""
    if not items:
        return None
    out = []
    for item in items:
        for part in str(item).split(","):
            host, sep, port = part.strip().rpartition(":")
            if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
                raise ConfigError(f"a game is HOST:PORT (e.g. 127.0.0.1:5560), not {part!r}")
            out.append(f"{host or '127.0.0.1'}:{int(port)}")
    return out


def rllib_settings(cfg: TrainConfig, opts: RayOptions) -> dict[str, Any]:
    """RLlib training settings equivalent to the config's PPO keys: a rollout of `n_steps` per
    env over all envs, minibatches of `batch_size`, `n_epochs` passes, SB3's coefficients."""
    envs = opts.total_envs(cfg.n_envs)
    lr: Any = cfg.learning_rate
    if cfg.lr_schedule == "linear":
        lr = [[0, cfg.learning_rate], [max(cfg.total_steps, 1), cfg.learning_rate * 1e-3]]
    return {
        "lr": lr,
        "gamma": cfg.gamma,
        "train_batch_size_per_learner": cfg.n_steps * envs // max(opts.num_learners, 1),
        "minibatch_size": cfg.batch_size,
        "num_epochs": cfg.n_epochs,
        "lambda_": cfg.gae_lambda,
        "clip_param": cfg.clip_range,
        "entropy_coeff": cfg.ent_coef,
        "vf_loss_coeff": cfg.vf_coef,
        "grad_clip": cfg.max_grad_norm,
        "grad_clip_by": "global_norm",
    }


def check_options(env_id: str, cfg: TrainConfig, opts: RayOptions) -> None:
    """Bad combinations fail before Ray starts: counts, games for envs with a port each."""
    for name in ("num_env_runners", "num_learners"):
        if getattr(opts, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0")
    if opts.envs_per_runner is not None and opts.envs_per_runner < 1:
        raise ConfigError("--envs-per-runner must be >= 1")
    if any(w["name"] == "pause_to_think" and w.get("advice_fade") for w in cfg.wrappers):
        raise ConfigError(
            "advice_fade needs the trainer's step count, which the SB3 trainers (train ppo, "
            "curriculum) send; RLlib runs cannot fade the adviser yet: drop advice_fade"
        )
    traits = env_traits(env_id)
    envs = opts.total_envs(cfg.n_envs)
    if opts.games is not None and not traits.port_per_env:
        raise ConfigError(f"--game lists games for envs that connect to one; {env_id} does not")
    if opts.games is not None and len(opts.games) < envs:
        raise ConfigError(
            f"{envs} envs ({opts.runners()} runners x {opts.per_runner(cfg.n_envs)}) need "
            f"{envs} games, but {len(opts.games)} are listed; add games or lower the env count"
        )
    if cfg.batch_size > cfg.n_steps * envs:
        raise ConfigError(
            f"batch_size ({cfg.batch_size}) is larger than one rollout (n_steps x envs = "
            f"{cfg.n_steps * envs}); lower batch_size or raise n_steps"
        )


def with_env_count(cfg: TrainConfig, opts: RayOptions) -> TrainConfig:
    """`cfg` with `n_envs` set to the envs the runners really step (runners x envs per runner),
    so that config.yaml and the model's metadata say what ran."""
    return dataclasses.replace(cfg, n_envs=opts.total_envs(cfg.n_envs))


def check_games(games: list[str], timeout: float = ADDRESS_TIMEOUT_S) -> None:
    """Each listed game accepts a TCP connection (within `timeout` seconds each)."""
    for i, game in enumerate(games):
        host, _, port = game.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except OSError as exc:
            raise GameUnreachableError(
                f"env {i}'s game {game} does not answer ({exc}); start it first (e.g. "
                f"`metabonk bonklink-sim --lockstep --port {port}` on {host})"
            ) from exc


def probe(env_id: str, cfg: TrainConfig, opts: RayOptions) -> tuple[Any, Any, list[str]]:
    """Observation space (after the frame stack), action space and info names of env 0, made
    in this process; also checks the games or ports of all envs."""
    if opts.games:
        check_games(opts.games[: opts.total_envs(cfg.n_envs)])
    elif env_traits(env_id).port_per_env:
        check_reachable(cfg, opts.total_envs(cfg.n_envs))
    else:
        probe_env(env_id, cfg)
    env = build_one(env_id, cfg.to_dict(), opts.games, 0)
    try:
        check_policy_fit(cfg, env.observation_space)
        names = list(env.unwrapped.info_names)  # type: ignore[attr-defined]
        return env.observation_space, env.action_space, names
    finally:
        env.close()


def check_address(address: str, timeout: float = ADDRESS_TIMEOUT_S) -> None:
    """A `HOST:PORT` cluster address accepts TCP within `timeout` s (`auto` is left to Ray)."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayError(
            f"--address takes HOST:PORT of a Ray head (e.g. 10.0.0.5:6379), not {address!r}"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RayError(
            f"no Ray cluster answers at {address} ({exc}); start one there with `ray start --head "
            f"--port {port}` or drop --address to run locally"
        ) from exc


def connect(opts: RayOptions) -> bool:
    """Join `opts.address`, or start Ray locally; True when this call started Ray (the caller
    shuts it down). An already initialised Ray (a test's cluster) is used as it is."""
    import ray

    if opts.address:
        check_address(opts.address)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if opts.address:
        kwargs["address"] = opts.address
        if os.environ.get(PUBLISH_ENV):  # `--watch`: the cluster's workers send frames there
            kwargs["runtime_env"] = {"env_vars": {PUBLISH_ENV: os.environ[PUBLISH_ENV]}}
    else:  # a new local instance, never a cluster some earlier process left running (its
        # workers inherit this environment, `--watch`'s publish address too)
        kwargs["address"] = "local"
        need = opts.num_env_runners * opts.cpus_per_runner + opts.num_learners
        kwargs["num_cpus"] = opts.num_cpus or max(int(need + 0.999), os.cpu_count() or 1)
    try:
        ray.init(**kwargs)
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, ...
        raise RayError(
            f"cannot start or join Ray ({opts.address or 'local'}): {one_line(exc)}"
        ) from exc
    reclaim_stop_signals()  # ray.init's SIGTERM handler exits at once: SIGTERM saves, as Ctrl-C
    return True


def one_line(exc: BaseException) -> str:
    """The last meaningful line of an exception (Ray wraps a runner's traceback in its own)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("File ", "Traceback", "^", "~"))]
    return (useful[-1] if useful else type(exc).__name__)[:400]


def build_config(
    env_id: str,
    cfg: TrainConfig,
    opts: RayOptions,
    algo: str,
    obs_space: Any,
    action_space: Any,
    info_names: list[str],
    tensorboard: Path | None,
    per_trial: bool = False,
) -> Any:
    """The RLlib `AlgorithmConfig` (PPO or APPO) of a run."""
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from metabonk_gym.training import rllib_module as rm

    if algo not in ALGOS:
        raise ConfigError(f"algo must be one of {', '.join(ALGOS)}, not {algo!r}")
    config: Any = (
        PPOConfig(algo_class=rm.MetabonkPPO)
        if algo == "ppo"
        else APPOConfig(algo_class=rm.MetabonkAPPO)
    )
    env_config = {
        "env_id": env_id,
        "cfg": cfg.to_dict(),
        "games": opts.games,
        "envs_per_runner": opts.per_runner(cfg.n_envs),
        "info_names": info_names,
        "tensorboard": str(tensorboard) if tensorboard else None,
        "per_trial": per_trial,
        "algo": algo,
    }
    config.environment(
        ENV_NAME,
        env_config=env_config,
        observation_space=obs_space,
        action_space=action_space,
        normalize_actions=False,
        clip_actions=True,
    )
    config.framework("torch")
    config.env_runners(
        num_env_runners=opts.num_env_runners,
        num_envs_per_env_runner=opts.per_runner(cfg.n_envs),
        gym_env_vectorize_mode=opts.vectorize_mode(env_id),
        num_cpus_per_env_runner=opts.cpus_per_runner,
        custom_resources_per_env_runner=dict(opts.runner_resources),
        rollout_fragment_length=cfg.n_steps,
        sample_timeout_s=opts.sample_timeout_s,
        env_to_module_connector=None,
    )
    config.fault_tolerance(
        restart_failed_env_runners=True,
        max_num_env_runner_restarts=3,
        env_runner_health_probe_timeout_s=30.0,
        env_runner_restore_timeout_s=60.0,
    )
    gpus = opts.num_gpus_per_learner
    if gpus is None:
        gpus = 1.0 if cfg.device in ("cuda", "auto") and _cuda() else 0.0
    config.learners(num_learners=opts.num_learners, num_gpus_per_learner=gpus)
    config.rl_module(
        rl_module_spec=RLModuleSpec(
            module_class=rm.SB3PolicyModule, model_config={"cfg": cfg.to_dict()}
        )
    )
    settings = rllib_settings(cfg, opts)
    if algo == "appo":
        for key in ("lambda_", "grad_clip_by"):
            settings.pop(key)
        settings["vtrace"] = True
    config.training(**settings)
    if algo == "ppo":
        config.training(use_kl_loss=False, vf_clip_param=1e9)
    config.callbacks(rm.MetabonkCallbacks)
    config.debugging(seed=cfg.seed, log_level="ERROR")
    config.reporting(metrics_num_episodes_for_smoothing=cfg.win_window)
    return config


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def register_env() -> None:
    """Register the env creator runners look up (`rllib_module.ENV_NAME`)."""
    from ray.tune.registry import register_env as register

    register(ENV_NAME, env_creator)


# ---------------------------------------------------------------------------- checkpoints


def list_checkpoints(run: RunDir) -> list[tuple[int, Path]]:
    """(step, folder) of `checkpoints/step_<N>/` (RLlib checkpoints), oldest first."""
    if not run.checkpoints.is_dir():
        return []
    out = []
    for path in run.checkpoints.iterdir():
        name = path.name
        if (
            path.is_dir()
            and name.startswith(CHECKPOINT_PREFIX)
            and name[len(CHECKPOINT_PREFIX) :].isdigit()
        ):
            out.append((int(name[len(CHECKPOINT_PREFIX) :]), path))
    return sorted(out)


def save_checkpoint(algo: Any, run: RunDir, steps: int, keep: int) -> Path:
    """`checkpoints/step_<steps>/` (RLlib's checkpoint, with `model.zip` and `metabonk.json`),
    written under a temporary name and renamed; keeps the newest `keep` (0: all)."""
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    final = run.checkpoints / f"{CHECKPOINT_PREFIX}{steps:09d}"
    tmp = run.checkpoints / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_checkpoint(str(tmp))
    atomic_write_text(tmp / "metabonk.json", json.dumps({"num_timesteps": int(steps)}))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    if keep > 0:
        for _, old in list_checkpoints(run)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    run.write_state(num_timesteps=int(steps), last_checkpoint=final.name)
    return final


def resume_checkpoint(run: RunDir) -> tuple[Path, int]:
    """The newest whole checkpoint folder and its step count."""
    found = list_checkpoints(run)
    if not found:
        raise CheckpointError(
            f"cannot resume {run.path}: no checkpoints/step_*/ folder; start a new run"
        )
    steps, path = found[-1]
    meta = path / "metabonk.json"
    if not meta.is_file() or not (path / "rllib_checkpoint.json").is_file():
        raise CheckpointError(
            f"checkpoint {path} is incomplete; delete it to resume from the one before"
        )
    return path, int(json.loads(meta.read_text())["num_timesteps"])


# ---------------------------------------------------------------------------- training


def _resolve(
    env_id: str,
    run: RunDir,
    config_file: str | Path | None,
    overrides: dict[str, Any],
    resume: bool,
) -> tuple[TrainConfig, Path | None, int, dict[str, Any]]:
    if not resume:
        cfg = resolve_config(env_id, config_file, overrides)
        run.check_new()
        return cfg, None, 0, {}
    run.check_resumable()
    state = run.read_state()
    if state.get("engine") != "rllib":
        raise RunDirError(
            f"{run.path} is not an RLlib run (engine {state.get('engine', 'sb3')}); resume it with its own engine"
        )
    stored_env = state.get("env_id")
    if stored_env and stored_env.split(":")[-1] != env_id.split(":")[-1]:
        raise RunDirError(f"{run.path} is a run on {stored_env}, not {env_id}")
    if config_file is not None:
        raise ConfigError("--resume uses the run's own config.yaml; drop --config")
    stored = resolve_config(env_id, base=run.read_config())
    changed = resume_changes(stored, overrides)
    if changed:
        raise ConfigError(
            f"--resume cannot change {', '.join(changed)}; a resume may change only "
            f"{', '.join(sorted(RESUME_MUTABLE))}"
        )
    cfg = resolve_config(env_id, base=run.read_config(), overrides=overrides)
    path, steps = resume_checkpoint(run)
    if steps >= cfg.total_steps:
        raise RunDirError(
            f"{run.path} already has {steps} steps of {cfg.total_steps}; pass a larger --total-steps"
        )
    return cfg, path, steps, state


def train_rllib(
    env_id: str,
    run_dir: str | Path,
    *,
    algo: str = "ppo",
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    resume: bool = False,
    ray: RayOptions | None = None,
    progress: bool = False,
    on_iteration: Callable[[Any, dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Train (or `resume`) an RLlib PPO/APPO run in `run_dir` (see the module docstring).

    `on_iteration(algorithm, result)` is called after each training iteration (research code's
    own logging or fault injection).

    Input errors (config, env, games, cluster address) are raised before the run directory is
    created; a runner that dies is restarted by RLlib (up to 3 times), after which the run stops
    with `TrainingFailed` (a checkpoint saved first; the CLI exits with 1). Ctrl-C saves a
    checkpoint and `model.zip` and returns `interrupted=True`.
    """
    opts = ray or RayOptions()
    run = RunDir(Path(run_dir))
    cfg, resume_from, start_steps, state = _resolve(
        env_id, run, config_file, dict(overrides or {}), resume
    )
    algo = str(state.get("rllib_algo", algo)) if resume else algo
    if algo not in ALGOS:
        raise ConfigError(f"algo must be one of {', '.join(ALGOS)}, not {algo!r}")
    check_options(env_id, cfg, opts)
    cfg = with_env_count(cfg, opts)
    obs_space, action_space, info_names = probe(env_id, cfg, opts)
    check_env_fit(cfg, env_id, info_names)
    started = connect(opts)
    existed = run.path.exists()
    try:
        register_env()
        config = build_config(
            env_id, cfg, opts, algo, obs_space, action_space, info_names, run.tensorboard
        )
        try:
            algorithm = config.build_algo()
        except Exception as exc:
            raise RayError(
                f"RLlib could not start its env runners or learners: {one_line(exc)}"
            ) from exc
        try:
            check_runners(algorithm, opts)
            if resume_from is not None:
                algorithm.restore_from_path(str(resume_from))
            else:
                run.path.mkdir(parents=True, exist_ok=True)
                _write_config_text(run, cfg)
            run.write_config(config_to_yaml(cfg))
            run.write_state(
                env_id=env_id,
                algo="ppo",
                engine="rllib",
                rllib_algo=algo,
                status="running",
                total_steps=cfg.total_steps,
                ray=opts.to_dict(),
            )
            return _loop(algorithm, run, cfg, env_id, start_steps, progress, on_iteration)
        finally:
            with contextlib.suppress(Exception):
                algorithm.stop()
    except Exception:
        if not resume and not list_checkpoints(run):  # a failed start leaves nothing behind
            run.discard_new(existed)
        elif run.state_file.is_file():
            run.write_state(status="failed")
        raise
    finally:
        if started:
            import ray as ray_module

            ray_module.shutdown()


def _write_config_text(run: RunDir, cfg: TrainConfig) -> None:
    from stable_baselines3.common.logger import configure

    logger = configure(str(run.tensorboard), ["tensorboard"])
    writer = tensorboard_writer(logger)
    if writer is not None:
        writer.add_text("config", "```\n" + config_to_yaml(cfg) + "\n```", 0)
        writer.flush()
    logger.close()


def _loop(
    algorithm: Any,
    run: RunDir,
    cfg: TrainConfig,
    env_id: str,
    start_steps: int,
    progress: bool,
    on_iteration: Callable[[Any, dict[str, Any]], None] | None = None,
) -> TrainResult:
    from metabonk_gym.training import rllib_module as rm

    steps = max(rm.lifetime_steps(algorithm), start_steps)
    next_ckpt = (
        (steps // cfg.checkpoint_every + 1) * cfg.checkpoint_every if cfg.checkpoint_every else None
    )
    info: dict[str, Any] = {}
    interrupted = False
    progressed = time.monotonic()
    stall_s = 3 * float(algorithm.config.sample_timeout_s or 60.0) + 60.0
    bar = _Progress(cfg.total_steps, steps, f"RLlib {env_id.split('/')[-1]}") if progress else None
    try:
        while steps < cfg.total_steps:
            try:
                result = algorithm.train()
            except KeyboardInterrupt:
                interrupted = True
                break
            except Exception as exc:
                raise _failed(
                    algorithm,
                    run,
                    cfg,
                    steps,
                    f"{one_line(exc)} (env runners failed more than RLlib restarts them)",
                ) from exc
            info = result.get("metabonk") or info
            if int(info.get("steps", steps)) > steps:
                progressed = time.monotonic()
            elif time.monotonic() - progressed > stall_s:
                raise _failed(
                    algorithm,
                    run,
                    cfg,
                    steps,
                    f"no env steps for {stall_s:.0f} s (env runners "
                    f"keep failing; healthy runners: {healthy_runners(algorithm)}; see the Ray logs)",
                )
            if on_iteration is not None:
                on_iteration(algorithm, result)
            steps = int(info.get("steps", steps))
            if bar is not None:
                bar.update(steps, info)
            if next_ckpt is not None and steps >= next_ckpt and steps < cfg.total_steps:
                save_checkpoint(algorithm, run, steps, cfg.keep_checkpoints)
                next_ckpt = (steps // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    finally:
        if bar is not None:
            bar.stop()
    final = save_checkpoint(algorithm, run, steps, cfg.keep_checkpoints)
    shutil.copyfile(final / "model.zip", run.path / ".model.zip.tmp")
    os.replace(run.path / ".model.zip.tmp", run.model)
    run.write_state(
        status="interrupted" if interrupted else "finished",
        num_timesteps=steps,
        episodes=info.get("episodes", 0),
        win_rate=info.get("win_rate"),
        mean_return=info.get("mean_return"),
    )
    return TrainResult(
        run_dir=run.path,
        model_path=run.model,
        num_timesteps=steps,
        interrupted=interrupted,
        episodes=int(info.get("episodes", 0) or 0),
        win_rate=info.get("win_rate"),
        mean_return=info.get("mean_return"),
        checkpoints=[p.name for _, p in list_checkpoints(run)],
        extra={
            "engine": "rllib",
            "algo": algorithm.config.env_config["algo"],
            "runner_nodes": runner_nodes(algorithm),
        },
    )


def _reset_envs(runner: Any) -> str | None:
    """Runs in a runner: reset its envs; the error as one line, or None."""
    try:
        runner.env.reset()
    except Exception as exc:  # any env error: reported to the driver
        return one_line(exc) if str(exc) else type(exc).__name__
    return None


def check_runners(algorithm: Any, opts: RayOptions) -> None:
    """Every env runner resets its envs once before training, so that one that cannot (a game
    it cannot reach, a ROM missing on its node) stops the run at once with its own error."""
    local = opts.num_env_runners == 0
    results = algorithm.env_runner_group.foreach_env_runner(
        _reset_envs, local_env_runner=local, timeout_seconds=opts.sample_timeout_s
    )
    errors = [r for r in results if r]
    if errors:
        raise RayError(f"an env runner cannot reset its envs: {errors[0]}")
    expected = 1 if local else opts.num_env_runners
    if len(results) < expected:
        raise RayError(
            f"{expected - len(results)} of {expected} env runners did not answer within "
            f"{opts.sample_timeout_s:.0f} s at start (died or hung); see the Ray logs"
        )


def _failed(
    algorithm: Any, run: RunDir, cfg: TrainConfig, steps: int, cause: str
) -> TrainingFailed:
    """The error of a run stopped mid-way, after saving a checkpoint where the learner allows."""
    try:
        saved = save_checkpoint(algorithm, run, steps, cfg.keep_checkpoints).name
        where = f"checkpoint {saved} saved; continue with --resume"
    except Exception as exc:  # the learner itself may be gone
        where = f"no checkpoint could be saved ({one_line(exc)}); --resume uses the newest one"
    return TrainingFailed(f"training stopped at step {steps}: {cause}; {where}")


def healthy_runners(algorithm: Any) -> int | None:
    """Remote env runners RLlib counts as healthy (None: unknown)."""
    with contextlib.suppress(Exception):
        return int(algorithm.env_runner_group.num_healthy_remote_workers())
    return None


def runner_nodes(algorithm: Any) -> list[str]:
    """The Ray node id of each remote env runner (empty: the driver steps the envs)."""
    with contextlib.suppress(Exception):
        return list(
            algorithm.env_runner_group.foreach_env_runner(
                lambda _runner: __import__("ray").get_runtime_context().get_node_id(),
                local_env_runner=False,
            )
        )
    return []


class _Progress:
    """A rich progress bar over env steps (episodes, return, win rate, steps/s)."""

    def __init__(self, total: int, done: int, label: str) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[extra]}"),
        )
        self.progress.start()
        self.task = self.progress.add_task(label, total=total, completed=done, extra="")
        self.started = time.monotonic()

    def update(self, steps: int, info: Mapping[str, Any]) -> None:
        extra = f"episodes {info.get('episodes', 0)}"
        if info.get("mean_return") is not None:
            extra += f"  return {info['mean_return']:.2f}"
        if info.get("win_rate") is not None:
            extra += f"  win {info['win_rate']:.2f}"
        if info.get("fps"):
            extra += f"  {info['fps']:.0f} steps/s"
        self.progress.update(self.task, completed=steps, extra=extra)

    def stop(self) -> None:
        self.progress.stop()
