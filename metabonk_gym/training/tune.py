"""`tune_pbt`: population-based training (Ray Tune's PBT) of PPO over the config's PPO
hyperparameters and, where the game has them, start states; members are RLlib PPO (`engine:
rllib`, the default) or the `train ppo` path (`engine: sb3`, `metabonk_gym.training.pbt_sb3`).

A PBT file (YAML/TOML/JSON) sets `population_size`, `perturbation_interval` (env steps),
`total_steps` (per member), `mutations` (config key -> `[low, high]` range or list of choices),
optional `quantile_fraction`, `resample_probability`, `seed`, `engine`, plus `train:` (config
keys, as `--set`, a `wrappers:` stack included) and `ray:` (`RayOptions` keys). Each member logs
the SB3 path's scalars to `DIR/members/<member>/`; the best member's policy (by win rate, else mean
return) lands in `DIR/best/model.zip` with its `config.yaml` (hyperparameters and wrappers), which
`metabonk eval`, `play`, `record` and `ladder` load and rebuild the stack from.

>>> spec = PBTSpec.from_dict({"population_size": 2, "mutations": {"learning_rate": [1e-4, 1e-3]}})
>>> spec.population_size, rllib_key("learning_rate"), rllib_key("state")
(2, 'lr', ('env_config', 'cfg', 'state'))
>>> PBTSpec.from_dict({"engine": "sb4"})
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: unknown PBT engine 'sb4' (did you mean 'sb3'?); engines: rllib, sb3 [PBT file]
>>> PBTSpec.from_dict({"mutations": {"gama": [0.9, 0.99]}})
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: PBT cannot mutate 'gama' (did you mean 'gamma'?); mutable keys: batch_size, clip_range, ent_coef, gae_lambda, gamma, learning_rate, max_grad_norm, n_epochs, state, vf_coef
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import BadNumberError
from metabonk_gym.process import graceful_stop_signals, stop_signal
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.config import check_env_fit, config_to_yaml, resolve_config, traits_of
from metabonk_gym.training.envs import probe_env
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.rllib import (
    RayOptions,
    build_config,
    check_options,
    connect,
    one_line,
    probe,
    register_env,
    with_env_count,
)
from metabonk_gym.utils import atomic_write_text, check_number, did_you_mean, env_var

#: Config keys PBT may mutate -> the RLlib config key they set.
MUTABLE: dict[str, str] = {
    "learning_rate": "lr",
    "ent_coef": "entropy_coeff",
    "clip_range": "clip_param",
    "gamma": "gamma",
    "gae_lambda": "lambda_",
    "vf_coef": "vf_loss_coeff",
    "n_epochs": "num_epochs",
    "batch_size": "minibatch_size",
    "max_grad_norm": "grad_clip",
}
#: Keys of a PBT file.
SPEC_KEYS = (
    "population_size",
    "perturbation_interval",
    "total_steps",
    "mutations",
    "quantile_fraction",
    "resample_probability",
    "seed",
    "engine",
    "train",
    "ray",
)
#: Who trains the members: RLlib PPO, or SB3 PPO as `train ppo` (`pbt_sb3`).
ENGINES = ("rllib", "sb3")


def rllib_key(key: str) -> str | tuple[str, ...]:
    """Where a mutated config key lives in RLlib's config (`state`: the envs' config)."""
    if key == "state":
        return ("env_config", "cfg", "state")
    return MUTABLE[key]


#: Most members of one PBT population (each is an RLlib trial with its own env processes).
MAX_POPULATION = 256


@dataclass
class PBTSpec:
    """A PBT run's settings (see the module docstring).

    Args:
        population_size: members trained at once.
        perturbation_interval: env steps between exploit/explore decisions.
        total_steps: env steps per member.
        mutations: config key -> [low, high] (sampled, learning rate log-uniformly) or a list
            of choices.
        quantile_fraction: the share of members that copy a top member at each decision.
        resample_probability: chance to resample a value rather than perturb it.
        seed: seed of the members' initial samples.
        engine: `rllib` (RLlib PPO members) or `sb3` (the `train ppo` path per member).
        train: config keys for every member (as `--set`).
        ray: `RayOptions` keys.
    """

    population_size: int = 4
    perturbation_interval: int = 20_000
    total_steps: int = 200_000
    mutations: dict[str, Any] = field(
        default_factory=lambda: {
            "learning_rate": [1e-4, 1e-3],
            "ent_coef": [0.0, 0.05],
            "clip_range": [0.1, 0.3],
        }
    )
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25
    seed: int = 0
    engine: str = "rllib"
    train: dict[str, Any] = field(default_factory=dict)
    ray: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "PBT file") -> PBTSpec:
        unknown = sorted(set(data) - set(SPEC_KEYS))
        if unknown:
            raise ConfigError(
                f"unknown PBT key(s) {unknown} [{source}]; valid: {', '.join(SPEC_KEYS)}"
            )
        spec = cls(**dict(data))

        def number(key: str, value: Any, low: float, high: float, integer: bool = False) -> None:
            try:
                check_number(key, value, low, high, integer=integer)
            except BadNumberError as exc:
                raise ConfigError(f"{exc} [{source}]") from None

        number("population_size", spec.population_size, 2, MAX_POPULATION, integer=True)
        number("perturbation_interval", spec.perturbation_interval, 1, 10**11, integer=True)
        number("total_steps", spec.total_steps, 1, 10**11, integer=True)
        number("quantile_fraction", spec.quantile_fraction, 0, 0.5)
        number("resample_probability", spec.resample_probability, 0, 1)
        number("seed", spec.seed, 0, 2**32 - 1, integer=True)
        if spec.perturbation_interval < 1 or spec.total_steps < spec.perturbation_interval:
            raise ConfigError(
                f"perturbation_interval ({spec.perturbation_interval}) must be >= 1 and at most "
                f"total_steps ({spec.total_steps}) [{source}]"
            )
        if spec.engine not in ENGINES:
            hint = did_you_mean(spec.engine, ENGINES)
            raise ConfigError(
                f"unknown PBT engine {spec.engine!r}{hint}; engines: {', '.join(ENGINES)} [{source}]"
            )
        if not spec.mutations:
            raise ConfigError(f"mutations is empty: name at least one key to mutate [{source}]")
        valid = sorted([*MUTABLE, "state"])
        for key, value in spec.mutations.items():
            if key not in valid:
                hint = did_you_mean(key, valid)
                raise ConfigError(
                    f"PBT cannot mutate {key!r}{hint}; mutable keys: {', '.join(valid)}"
                )
            if not isinstance(value, list) or not value:
                raise ConfigError(
                    f"mutation {key} must be [low, high] or a list of choices, not {value!r} [{source}]"
                )
            for item in value:  # NaN and infinity would pass every comparison unnoticed
                if isinstance(item, float):
                    number(f"mutations.{key}", item, -1e300, 1e300)
        return spec

    @classmethod
    def load(cls, path: str | Path | None) -> PBTSpec:
        """The spec in a YAML/TOML/JSON file (None: the defaults)."""
        if path is None:
            return cls.from_dict({})
        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"PBT file not found: {path}")
        try:
            data = load_config_file(path)
        except ConfigFileError as exc:
            raise ConfigError(f"PBT file: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"PBT file {path} must hold a mapping of keys")
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _search_space(key: str, value: list[Any]) -> Any:
    from ray import tune

    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    if len(value) == 2 and numeric and key not in ("n_epochs", "batch_size"):
        low, high = float(min(value)), float(max(value))
        if key == "learning_rate" and low > 0:
            return tune.loguniform(low, high)
        return tune.uniform(low, high)
    return tune.choice(list(value))


def _set(space: dict[str, Any], key: str | tuple[str, ...], value: Any) -> None:
    if isinstance(key, str):
        space[key] = value
        return
    node = space
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


@dataclass
class TuneResult:
    """What `tune_pbt` did; `to_dict()` is what the CLI prints."""

    run_dir: Path
    best_model: Path
    best_member: str
    best_score: float
    members: list[dict[str, Any]]
    exploits: int

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["run_dir"], data["best_model"] = str(self.run_dir), str(self.best_model)
        return data


def _before_tune(signum: int, frame: Any) -> None:
    """SIGUSR1 before Tune's loop takes it: ignored (the stop handler raises instead)."""


@contextlib.contextmanager
def tune_stops_gracefully() -> Iterator[None]:
    """Ctrl-C and SIGTERM end a Tune run the way Tune's own Ctrl-C does (the members stop, the
    experiment state is saved, `fit` returns) and are kept as the stop (`process.stop_signal`:
    the command writes best/ from what was saved, then exits 130 / 143); a second one kills at
    once. Why: Tune takes SIGINT for itself, so the command used to exit 0 after a Ctrl-C, while
    SIGTERM interrupted `fit` and left no best/. Tune also stops on SIGUSR1, which is how the
    handler asks it; `TUNE_DISABLE_SIGINT_HANDLER` keeps SIGINT ours.

    >>> with tune_stops_gracefully():
    ...     os.environ["TUNE_DISABLE_SIGINT_HANDLER"]
    '1'
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGUSR1"):
        yield
        return

    def ask_tune_to_stop() -> None:
        if signal.getsignal(signal.SIGUSR1) is _before_tune:  # Tune's loop has not started
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGUSR1)  # Tune's handler: stop the trials, save, return

    previous_usr1 = signal.signal(signal.SIGUSR1, _before_tune)
    try:
        with graceful_stop_signals(ask_tune_to_stop), env_var("TUNE_DISABLE_SIGINT_HANDLER", "1"):
            yield
    finally:
        signal.signal(signal.SIGUSR1, previous_usr1)


def tune_pbt(
    env_id: str,
    run_dir: str | Path,
    *,
    spec: PBTSpec | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    ray: RayOptions | None = None,
) -> TuneResult:
    """Population-based training of PPO (RLlib or SB3 members, `spec.engine`) on `env_id` in
    `run_dir` (a new directory)."""
    spec = spec or PBTSpec()
    run = RunDir(Path(run_dir))
    run.check_new()
    flags = {**spec.train, **dict(overrides or {}), "total_steps": spec.total_steps}
    flags.setdefault("lr_schedule", "constant")  # PBT sets the learning rate itself
    flags.setdefault("checkpoint_every", 0)
    cfg = resolve_config(env_id, config_file, flags)
    if "state" in spec.mutations and not traits_of(env_id).start_states:
        raise ConfigError(f"{env_id} cannot choose its start state; drop 'state' from mutations")
    opts = ray or RayOptions.from_dict({"num_env_runners": 0, **spec.ray})
    sb3 = spec.engine == "sb3"
    if sb3:  # the `train ppo` path per member: its own checks, its own vector env
        rllib_only = [
            name
            for name in ("num_env_runners", "envs_per_runner", "num_learners", "games")
            if getattr(opts, name) not in (0, None)
        ]
        if rllib_only:
            raise ConfigError(
                f"engine sb3 members step their own n_envs envs, so {', '.join(rllib_only)} "
                "(RLlib's) do not apply; drop them or use engine rllib"
            )
        obs_space, action_space, info_names = probe_env(env_id, cfg)
    else:
        check_options(env_id, cfg, opts)
        cfg = with_env_count(cfg, opts)
        obs_space, action_space, info_names = probe(env_id, cfg, opts)
    check_env_fit(cfg, env_id, info_names)
    started = connect(opts)
    existed = run.path.exists()
    try:
        run.path.mkdir(parents=True, exist_ok=True)
        run.write_config(config_to_yaml(cfg))
        atomic_write_text(run.path / "pbt.yaml", config_to_yaml(spec.to_dict()))
        run.write_state(
            env_id=env_id, algo="ppo", engine="sb3-pbt" if sb3 else "rllib-pbt", status="running"
        )
        if sb3:
            result = _fit_sb3(env_id, run, cfg, spec, info_names)
        else:
            result = _fit(env_id, run, cfg, spec, opts, obs_space, action_space, info_names)
        run.write_state(
            status="finished", best_member=result.best_member, best_score=result.best_score
        )
        return result
    except Exception:
        if not existed:
            shutil.rmtree(run.path, ignore_errors=True)
        raise
    finally:
        if started:
            import ray as ray_module

            ray_module.shutdown()


def _fit(
    env_id: str,
    run: RunDir,
    cfg: Any,
    spec: PBTSpec,
    opts: RayOptions,
    obs_space: Any,
    action_space: Any,
    info_names: list[str],
) -> TuneResult:
    from metabonk_gym.training import rllib_module as rm

    register_env()
    members = run.path / "members"
    config = build_config(
        env_id, cfg, opts, "ppo", obs_space, action_space, info_names, members, per_trial=True
    )
    space = config.to_dict()
    mutations = _mutations(space, spec, rllib_key)
    return _run_tuner(rm.MetabonkPPO, space, mutations, spec, run, cfg, rllib_key, at_end=True)


def _sb3_key(key: str) -> tuple[str, ...]:
    """Where a mutated config key lives in an SB3 member's config (`pbt_sb3.member_config`)."""
    return ("hyper", key)


def _fit_sb3(
    env_id: str, run: RunDir, cfg: Any, spec: PBTSpec, info_names: list[str]
) -> TuneResult:
    """The SB3 members: `pbt_sb3.train_member` per member, one CPU each (its env workers are
    its own processes)."""
    from ray import tune

    from metabonk_gym.training.pbt_sb3 import member_config, train_member

    members = run.path / "members"
    space = member_config(
        env_id,
        cfg.to_dict(),
        {},
        spec.perturbation_interval,
        spec.total_steps,
        str(members.resolve()),
        info_names,
    )
    mutations = _mutations(space, spec, _sb3_key)
    trainable = tune.with_resources(train_member, {"cpu": 1})
    # each report carries a checkpoint, the last one too (Tune's checkpoint_at_end is the
    # class trainables')
    return _run_tuner(trainable, space, mutations, spec, run, cfg, _sb3_key, at_end=False)


def _mutations(space: dict[str, Any], spec: PBTSpec, where: Any) -> dict[str, Any]:
    """Put each mutated key's search space into `space` (at `where(key)`) and return PBT's
    `hyperparam_mutations` in the same shape."""
    from ray.tune.search.sample import Categorical

    mutations: dict[str, Any] = {}
    for key, value in spec.mutations.items():
        sample = _search_space(key, value)
        _set(space, where(key), sample)
        # PBT perturbs a range by x0.8/x1.2 and moves a list's choice to a neighbour
        _set(mutations, where(key), list(value) if isinstance(sample, Categorical) else sample)
    return mutations


def _run_tuner(
    trainable: Any,
    space: dict[str, Any],
    mutations: dict[str, Any],
    spec: PBTSpec,
    run: RunDir,
    cfg: Any,
    where: Any,
    at_end: bool,
) -> TuneResult:
    """Run the population under PBT and copy the best member's policy and config to `best/`."""
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    scheduler = PopulationBasedTraining(
        time_attr="metabonk_steps",
        metric="metabonk_score",
        mode="max",
        perturbation_interval=spec.perturbation_interval,
        hyperparam_mutations=mutations,
        quantile_fraction=min(spec.quantile_fraction, 0.5),
        resample_probability=spec.resample_probability,
        synch=True,
        log_config=True,
        require_attrs=True,
    )

    def stop(_trial_id: str, result: Mapping[str, Any]) -> bool:
        return int(result.get("metabonk_steps", 0)) >= spec.total_steps

    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            num_samples=spec.population_size, scheduler=scheduler, reuse_actors=False
        ),
        run_config=tune.RunConfig(
            name="tune",
            storage_path=str(run.path.resolve()),
            stop=stop,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=at_end, num_to_keep=4),
            failure_config=tune.FailureConfig(max_failures=1),
            verbose=0,
        ),
    )
    try:
        with tune_stops_gracefully():
            grid = tuner.fit()
    except Exception as exc:
        raise RunDirError(f"PBT stopped: {one_line(exc)}") from exc
    rows: list[dict[str, Any]] = []
    for res in list(grid):  # type: ignore[call-overload]
        metrics = res.metrics or {}
        rows.append(
            {
                "member": Path(res.path).name if res.path else "?",
                "score": metrics.get("metabonk_score"),
                "steps": metrics.get("metabonk_steps"),
                "error": one_line(res.error) if res.error else None,
                "checkpoint": res.checkpoint.path if res.checkpoint else None,
                "hyperparameters": {k: _get(res.config or {}, where(k)) for k in spec.mutations},
            }
        )
    scored = [r for r in rows if r["checkpoint"] and r["score"] is not None]
    if not scored and stop_signal() is not None:
        raise KeyboardInterrupt  # stopped before any member saved: nothing to keep
    if not scored:
        errors = "; ".join(str(r["error"]) for r in rows if r["error"]) or "no member finished"
        raise RunDirError(f"PBT produced no member with a checkpoint: {errors}")
    best = max(scored, key=lambda r: float(r["score"]))
    best_dir = run.path / "best"
    best_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(best["checkpoint"]) / "model.zip", best_dir / ".model.zip.tmp")
    (best_dir / ".model.zip.tmp").replace(best_dir / "model.zip")
    atomic_write_text(best_dir / "best.json", json.dumps(best, indent=2, default=str))
    best_cfg = {
        **cfg.to_dict(),
        **{k: v for k, v in best["hyperparameters"].items() if v is not None},
    }
    atomic_write_text(best_dir / "config.yaml", config_to_yaml(best_cfg))
    return TuneResult(
        run_dir=run.path,
        best_model=best_dir / "model.zip",
        best_member=best["member"],
        best_score=float(best["score"]),
        members=rows,
        exploits=count_exploits(run.path / "tune"),
    )


def _get(config: Mapping[str, Any], key: str | tuple[str, ...]) -> Any:
    if isinstance(key, str):
        return config.get(key)
    node: Any = config
    for part in key:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def count_exploits(experiment: Path) -> int:
    """Exploit steps PBT logged (`pbt_global.txt`: one JSON line per member that copied another)."""
    log = experiment / "pbt_global.txt"
    if not log.is_file():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.strip())
