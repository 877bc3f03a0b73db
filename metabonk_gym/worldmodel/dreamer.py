"""`metabonk train dreamer`: DreamerV3 on the project's envs through sheeprl (PyTorch, Lightning).

sheeprl (the `world` extra) is driven through its hydra config API: `exp=dreamer_v3` with a model
size (`algo=dreamer_v3_XS` ...), the env made by `gymnasium.make(ENV_ID, **env_kwargs)` in the
training process (`env.sync_env=True`, so the project's one-emulator-per-process envs work), on the
CPU unless told otherwise. The run directory holds metabonk's `config.yaml` and `run.json` as
`train ppo`'s does, `tensorboard/` with `train ppo`'s episode and game scalars (`episode/*`,
`game/*`, `reward_terms/*`, written by the env: `metabonk_gym.worldmodel.scalars`), and sheeprl's
own log directory `sheeprl/` (its losses as TensorBoard events, its config,
`checkpoint/ckpt_<step>_0.ckpt`; sheeprl fixes these names). Replay buffers are not checkpointed:
sheeprl pickles them, and a file that would need unpickling is never loaded here. `--resume` first
checks the newest checkpoint loads with `torch.load(weights_only=True)` (tensors and plain values
only), then lets sheeprl continue from it (it refills its buffer for `learning_starts` steps).
`DreamerPolicy` plays a trained run's actor on the env's own observations (resized as in training),
and `evaluate_dreamer` plays episodes with it. A `wrappers:` stack (`train_dreamer(wrappers=...)`,
`--config`) is recorded in `config.yaml` and rebuilt from there by the env sheeprl makes, by
`DreamerPolicy` and by every command that plays the run; its Dict observation reaches sheeprl as
the frame plus flat vectors (`metabonk_gym.worldmodel.dreamer_env`).

>>> overrides = dreamer_overrides("MetaBonk/BonkQuest-v0", Path("/tmp/run"), {"total_steps": 300})
>>> "exp=dreamer_v3" in overrides, "algo.total_steps=300" in overrides
(True, True)
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import UntrustedFileError
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.config import config_to_yaml
from metabonk_gym.training.errors import CheckpointError, ConfigError, RunDirError
from metabonk_gym.training.wrapstack import (
    WrapperSpec,
    apply_wrappers,
    check_wrappers_match,
    describe_wrappers,
    normalize_wrappers,
)
from metabonk_gym.utils import Log
from metabonk_gym.worldmodel.dreamer_env import IMAGE_KEY, DreamerKeys, DreamerObs, wrap_for_dreamer

#: Options of `train_dreamer` and their defaults (what `config.yaml` records).
DREAMER_DEFAULTS: dict[str, Any] = {
    "total_steps": 100_000,
    "size": "XS",
    "learning_starts": 1024,
    "batch_size": 16,
    "sequence_length": 64,
    "replay_ratio": 0.5,
    "checkpoint_every": 10_000,
    "screen_size": 64,
    "grayscale": False,
    "num_envs": 1,
    "seed": 0,
    "accelerator": "cpu",
    "log_every": 1000,
    "env_kwargs": {},
}
SIZES = ("XS", "S", "M", "L", "XL")
SHEEPRL_DIR = "sheeprl"
LOGGED_ENV = "metabonk_gym.worldmodel.dreamer_env.make_dreamer_env"
_CKPT_RE = re.compile(r"^ckpt_(\d+)_0\.ckpt$")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: Range of each whole-number option (inclusive); a run directory's config.yaml is checked too.
_INT_RANGES: dict[str, tuple[int, int]] = {
    "total_steps": (1, 10**10),
    "learning_starts": (0, 10**10),
    "batch_size": (1, 4096),
    "sequence_length": (1, 4096),
    "checkpoint_every": (1, 10**10),
    "screen_size": (8, 1024),
    "num_envs": (1, 256),
    "seed": (0, 2**32 - 1),
    "log_every": (1, 10**10),
}
ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "auto")
#: env keyword arguments reach hydra as `+env.wrapper.KEY=VALUE`: plain names and plain values
#: only, so a run directory's config.yaml cannot add a `_target_` (code hydra would call).
_KWARG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_KWARG_TEXT = re.compile(r"^[A-Za-z0-9_.,:/@+= -]{0,4096}$")


def check_dreamer_options(opts: dict[str, Any]) -> None:
    """Refuse Dreamer options of the wrong type or range (flags, or a run's config.yaml).

    Every value becomes a hydra override, and hydra calls any `_target_` it meets; so only
    numbers in range, known words and plain `env_kwargs` pass.

    >>> check_dreamer_options({**DREAMER_DEFAULTS, "total_steps": -1})
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.RunDirError: Dreamer total_steps must be a whole number in 1..10000000000, not -1
    """
    for key, (low, high) in _INT_RANGES.items():
        value = opts[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise RunDirError(
                f"Dreamer {key} must be a whole number in {low}..{high}, not {value!r}"
            )
    ratio = opts["replay_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1024:
        raise RunDirError(f"Dreamer replay_ratio must be a number in (0, 1024], not {ratio!r}")
    if opts["size"] not in SIZES:
        raise RunDirError(
            f"unknown Dreamer size {opts['size']!r}; choose one of {', '.join(SIZES)}"
        )
    if opts["accelerator"] not in ACCELERATORS:
        raise RunDirError(
            f"unknown Dreamer accelerator {opts['accelerator']!r}; "
            f"choose one of {', '.join(ACCELERATORS)}"
        )
    if not isinstance(opts["grayscale"], bool):
        raise RunDirError(f"Dreamer grayscale must be true or false, not {opts['grayscale']!r}")
    kwargs = opts["env_kwargs"] or {}
    if not isinstance(kwargs, dict):
        raise RunDirError(f"Dreamer env_kwargs must be a mapping, not {kwargs!r}")
    for key, value in kwargs.items():
        if not isinstance(key, str) or not _KWARG_NAME.match(key):
            raise RunDirError(
                f"Dreamer env_kwargs key {key!r} refused: a name of letters, digits and _ "
                "(no dots, no leading _: hydra would read `_target_` as code to call)"
            )
        plain = value is None or isinstance(value, bool | int | float)
        if not plain and not (isinstance(value, str) and _KWARG_TEXT.match(value)):
            raise RunDirError(
                f"Dreamer env_kwargs {key}={value!r} refused: only numbers, true/false and "
                "plain text (letters, digits, ._,:/@+= -) pass to sheeprl's config"
            )


def read_dreamer_config(
    path: str | Path,
) -> tuple[dict[str, Any], list[WrapperSpec] | None]:
    """A `train dreamer --config` file: (Dreamer options, `wrappers:` stack or None without the
    key); any other key is a one-line `ConfigError` naming the known ones.

    >>> import tempfile
    >>> file = Path(tempfile.mkdtemp()) / "d.yaml"
    >>> _ = file.write_text("size: S\\nwrappers: [tile_tokens]\\n")
    >>> read_dreamer_config(file)
    ({'size': 'S'}, [{'name': 'tile_tokens'}])
    """
    try:
        data = load_config_file(path)
    except ConfigFileError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping (Dreamer options and wrappers:)")
    unknown = sorted(set(data) - set(DREAMER_DEFAULTS) - {"wrappers"})
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(map(str, unknown))}; a Dreamer config takes "
            f"wrappers and {', '.join(DREAMER_DEFAULTS)}"
        )
    if not isinstance(data.get("env_kwargs") or {}, dict):
        raise ConfigError(f"{path}: env_kwargs must be a mapping, not {data['env_kwargs']!r}")
    options = {k: v for k, v in data.items() if k != "wrappers"}
    if "wrappers" not in data:  # None: nothing said (a resumed run keeps its own)
        return options, None
    return options, normalize_wrappers(data["wrappers"], str(path))


def dreamer_overrides(
    env_id: str, out: Path, options: dict[str, Any], vectors: list[str] | None = None
) -> list[str]:
    """sheeprl's hydra overrides for a run of `env_id` logging into `out/sheeprl`; `vectors`:
    the keys its MLP encodes beside the frame (a wrapper stack's, `DreamerKeys.vectors`)."""
    opts = {**DREAMER_DEFAULTS, **options}
    check_dreamer_options(opts)
    if not isinstance(env_id, str) or not _KWARG_TEXT.match(env_id):
        raise RunDirError(f"Dreamer env id {env_id!r} refused: not a plain env id")
    vectors = list(vectors or [])
    for key in vectors:
        if not _KWARG_NAME.match(key):
            raise RunDirError(f"Dreamer observation key {key!r} refused: not a plain name")
    out = Path(out).expanduser().resolve()
    overrides = [
        "exp=dreamer_v3",
        f"algo=dreamer_v3_{opts['size']}",
        "env=gym",
        f"env.id={env_id}",
        # gymnasium.make plus the project's episode scalars into `out/tensorboard`
        f"env.wrapper._target_={LOGGED_ENV}",
        f"+env.wrapper.scalars_dir={out / 'tensorboard'}",
        "+env.wrapper.scalars_step=0",
        # the wrapper stack: read by the env from the run's config.yaml, not through hydra
        f"+env.wrapper.run_dir={out}",
        "env.sync_env=true",
        "env.capture_video=false",
        f"env.num_envs={int(opts['num_envs'])}",
        f"env.screen_size={int(opts['screen_size'])}",
        f"env.grayscale={_value(bool(opts['grayscale']))}",
        f"algo.total_steps={int(opts['total_steps'])}",
        f"algo.learning_starts={int(opts['learning_starts'])}",
        f"algo.per_rank_batch_size={int(opts['batch_size'])}",
        f"algo.per_rank_sequence_length={int(opts['sequence_length'])}",
        f"algo.replay_ratio={float(opts['replay_ratio'])}",
        f"algo.cnn_keys.encoder=[{IMAGE_KEY}]",
        f"algo.cnn_keys.decoder=[{IMAGE_KEY}]",
        f"algo.mlp_keys.encoder=[{','.join(vectors)}]",
        "algo.mlp_keys.decoder=[]",  # the world model reconstructs the frame only
        "algo.run_test=false",
        f"checkpoint.every={int(opts['checkpoint_every'])}",
        "checkpoint.save_last=true",
        "buffer.checkpoint=false",
        f"buffer.size={max(int(opts['total_steps']), int(opts['learning_starts']) + 1)}",
        f"fabric.accelerator={opts['accelerator']}",
        "fabric.devices=1",
        f"seed={int(opts['seed'])}",
        f"metric.log_every={int(opts['log_every'])}",
        # sheeprl logs into <log_root>/<root_dir>/<run_name>/<version>: here `out/sheeprl/`
        f"log_root={out}",
        "root_dir=.",
        f"run_name={SHEEPRL_DIR}",
        "metric.logger.version=''",
    ]
    for key, value in dict(opts["env_kwargs"] or {}).items():
        text = "null" if value is None else _value(value)
        if isinstance(value, str):  # quoted: hydra reads it as text, never a list or a dict
            text = "'" + value + "'"
        overrides.append(f"+env.wrapper.{key}={text}")
    return overrides


def list_dreamer_checkpoints(run: RunDir) -> list[tuple[int, Path]]:
    """(policy step, path) of sheeprl's checkpoints in a run, oldest first."""
    folder = run.path / SHEEPRL_DIR / "checkpoint"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _CKPT_RE.match(p.name))]
    return sorted(found)


#: What sheeprl's DreamerV3 reads from a checkpoint it resumes from.
RESUME_KEYS = (
    "world_model",
    "actor",
    "critic",
    "target_critic",
    "world_optimizer",
    "actor_optimizer",
    "critic_optimizer",
    "moments",
    "ratio",
    "iter_num",
    "batch_size",
    "last_log",
    "last_checkpoint",
)


_NETS = ("world_model", "actor", "critic", "target_critic")


def check_checkpoint(
    path: Path, keys: tuple[str, ...] = ("world_model", "actor")
) -> dict[str, Any]:
    """A sheeprl checkpoint's contents, read with `weights_only=True` (no code unpickled),
    holding `keys`."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UntrustedFileError(
            f"{path} holds more than tensors and plain values (or is corrupt): loading it would "
            f"unpickle code, so it is refused; start a new run ({str(exc).splitlines()[0]})"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a DreamerV3 checkpoint of sheeprl")
    missing = [key for key in keys if key not in state]
    if missing:
        raise CheckpointError(
            f"{path} is not a DreamerV3 checkpoint of sheeprl (no {', '.join(missing[:4])})"
        )
    for key in keys:
        value = state[key]
        if key in _NETS and not (
            isinstance(value, dict) and value and all(torch.is_tensor(v) for v in value.values())
        ):
            raise CheckpointError(f"{path}: {key} holds no tensors; start a new run")
        if key.endswith("_optimizer") and not (
            isinstance(value, dict) and {"state", "param_groups"} <= set(value)
        ):
            raise CheckpointError(f"{path}: {key} is not an optimizer's state; start a new run")
    return state


def _misfit(exc: RuntimeError, checkpoint: Path | None) -> CheckpointError | None:
    """`exc` as a one-line `CheckpointError` when it is torch refusing the checkpoint's tensors
    (shapes that do not fit the run's model), else None."""
    text = str(exc)
    if checkpoint is None or "loading state_dict" not in text:
        return None
    detail = " ".join(line.strip() for line in text.splitlines()[1:3])
    return CheckpointError(
        f"{checkpoint} does not fit the model of this run's config.yaml ({detail[:300]}); "
        "start a new run"
    )


def _sheeprl() -> Any:
    try:
        import sheeprl  # noqa: F401
    except ModuleNotFoundError as exc:
        raise RunDirError(
            "Dreamer needs sheeprl: pip install 'metabonk-gym[world]' (sheeprl 0.8, lightning, hydra)"
        ) from exc
    return sheeprl


def dreamer_keys(
    env_id: str, env_kwargs: dict[str, Any] | None, specs: list[WrapperSpec]
) -> DreamerKeys | None:
    """Build the env a run steps (`gym.make` and the stack `specs`) once, check that Dreamer can
    train on it (Discrete actions, a frame) and say how its observation reaches sheeprl: the
    frame with vectors beside it (`DreamerKeys`), or None for a frame alone."""
    import gymnasium as gym

    import metabonk_gym  # noqa: F401  (registers the envs)

    try:
        env = wrap_for_dreamer(gym.make(env_id, **dict(env_kwargs or {})), specs)
    except ValueError as exc:  # DreamerObs: no frame, or a key that is no Box
        raise ConfigError(f"wrappers {describe_wrappers(specs)}: {exc}") from None
    try:
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise RunDirError(
                f"{env_id} has actions {env.action_space}; Dreamer here needs Discrete"
            )
        if isinstance(env, DreamerObs):
            return env.keys
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) in (2, 3)):
            raise RunDirError(f"{env_id} has observations {space}; Dreamer needs image frames")
        return None
    finally:
        env.close()


@dataclass
class DreamerStart:
    """What a Dreamer run starts from (`dreamer_start`): its options, wrappers and, on a resume,
    the checkpoint and its step."""

    opts: dict[str, Any]
    specs: list[Any]
    checkpoint: Path | None = None
    step: int = 0


def dreamer_start(
    run: RunDir,
    env_id: str,
    resume: bool,
    given: dict[str, Any],
    wrappers: list[Any] | None,
    log: Log,
) -> DreamerStart:
    """A new run's options (`given` over the defaults), or a resumed run's own (`given` over
    them), its wrappers (another stack is an error) and newest checkpoint, checked."""
    if not resume:
        run.check_new()
        opts = {**DREAMER_DEFAULTS, **given}
        check_dreamer_options(opts)
        return DreamerStart(opts, normalize_wrappers(wrappers))
    run.check_resumable()
    note = run.check_not_running()
    if note:
        log(note)
    stored = run.read_config()
    if stored.get("env_id") != env_id:
        raise RunDirError(f"{run.path} trains {stored.get('env_id')}, not {env_id}")
    opts = {**DREAMER_DEFAULTS, **dict(stored.get("dreamer") or {}), **given}
    check_dreamer_options(opts)  # config.yaml is a file of the run directory: data only
    specs = normalize_wrappers(stored.get("wrappers"), str(run.path / "config.yaml"))
    check_wrappers_match(run.path, wrappers, specs)
    found = list_dreamer_checkpoints(run)
    if not found:
        raise CheckpointError(
            f"cannot resume {run.path}: no {SHEEPRL_DIR}/checkpoint/ckpt_*_0.ckpt"
        )
    step, checkpoint = found[-1]
    check_checkpoint(checkpoint, RESUME_KEYS)
    log(f"resuming {run.path} from step {step} ({checkpoint.name})")
    return DreamerStart(opts, specs, checkpoint, step)


def sheeprl_config(env_id: str, run: RunDir, start: DreamerStart, resume: bool) -> Any:
    """sheeprl's config of the run, composed from metabonk's checked options (never from a
    file of the run directory) and checked by sheeprl."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf, open_dict

    _sheeprl()
    from sheeprl.cli import check_configs
    from sheeprl.utils.utils import dotdict

    vectors: list[str] = []
    if not resume or start.specs:  # a new run checks its env; a resumed one needs its keys
        keys = dreamer_keys(env_id, start.opts["env_kwargs"], start.specs)
        vectors = keys.vectors if keys is not None else []
    overrides = dreamer_overrides(env_id, run.path, start.opts, vectors)
    if start.checkpoint is not None:
        overrides.append(f"checkpoint.resume_from={start.checkpoint.resolve()}")
    with initialize_config_module("sheeprl.configs", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    if start.checkpoint is not None:
        # Never sheeprl's `resume_from_checkpoint`: it merges DIR/sheeprl/config.yaml into the
        # config, and hydra calls any `_target_` in it (a shared run directory could run code).
        # The config is rebuilt from metabonk's own options, checked above.
        with open_dict(cfg):  # the game scalars continue at `step`
            cfg.env.wrapper.scalars_step = int(start.step)
    cfg = dotdict(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True))
    check_configs(cfg)
    return cfg


def train_dreamer(
    env_id: str,
    out: str | Path,
    *,
    resume: bool = False,
    log: Log | None = None,
    wrappers: list[Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Train DreamerV3 on `env_id` in run directory `out` (or continue it with `resume`).

    Args:
        env_id: a registered env id with image observations and discrete actions.
        out: the run directory.
        resume: continue from the newest checkpoint, up to `total_steps` (a new value is taken).
        log: progress messages.
        wrappers: a `wrappers:` list (`training.wrapstack`) around the env; a resumed run keeps
            its own (another one is an error).
        options: `DREAMER_DEFAULTS` keys (total_steps, size, learning_starts, batch_size, ...).
    """
    import metabonk_gym  # noqa: F401  (registers the envs)

    _sheeprl()
    from sheeprl.cli import run_algorithm

    unknown = sorted(set(options) - set(DREAMER_DEFAULTS))
    if unknown:
        raise RunDirError(
            f"unknown Dreamer option(s) {', '.join(unknown)}; known: {', '.join(DREAMER_DEFAULTS)}"
        )
    run = RunDir(Path(out))
    given = {k: v for k, v in options.items() if v is not None}
    start = dreamer_start(run, env_id, resume, given, wrappers, log or (lambda _msg: None))
    cfg = sheeprl_config(env_id, run, start, resume)
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(
        config_to_yaml(
            {"env_id": env_id, "algo": "dreamer_v3", "dreamer": start.opts, "wrappers": start.specs}
        )
    )
    run.write_state(env_id=env_id, algo="dreamer_v3", status="running", **run.owner())
    started = time.perf_counter()
    status = "failed"
    try:
        run_algorithm(cfg)
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except RuntimeError as exc:
        if (misfit := _misfit(exc, start.checkpoint)) is None:
            raise
        raise misfit from None
    finally:
        found = list_dreamer_checkpoints(run)
        steps = found[-1][0] if found else 0
        run.write_state(status=status, num_timesteps=steps, pid=None)
    return {
        "run_dir": str(run.path),
        "num_timesteps": steps,
        "checkpoint": str(found[-1][1]) if found else None,
        "seconds": time.perf_counter() - started,
        "tensorboard": str(run.path / "tensorboard"),
        "sheeprl_logs": str(run.path / SHEEPRL_DIR),
    }


class DreamerPolicy:
    """A trained Dreamer run's actor as an observation -> action callable (recurrent: call
    `reset()` at each episode start). Frames are resized as in training; the checkpoint is read
    with `weights_only=True`.

    Args:
        run_dir: a `metabonk train dreamer` run directory.
        greedy: take the most likely action (else sample).
    """

    def __init__(self, run_dir: str | Path, greedy: bool = True) -> None:
        import gymnasium as gym
        import numpy as np
        from hydra import compose, initialize_config_module
        from lightning import Fabric
        from omegaconf import OmegaConf

        _sheeprl()
        from sheeprl.algos.dreamer_v3.agent import build_agent
        from sheeprl.utils.utils import dotdict

        run = RunDir(Path(run_dir))
        run.check_resumable()
        stored = run.read_config()
        found = list_dreamer_checkpoints(run)
        if not found:
            raise CheckpointError(f"{run.path} has no {SHEEPRL_DIR}/checkpoint/ckpt_*_0.ckpt yet")
        state = check_checkpoint(found[-1][1])
        self.env_id = str(stored.get("env_id"))
        self.options = {**DREAMER_DEFAULTS, **dict(stored.get("dreamer") or {})}
        check_dreamer_options(self.options)
        #: the run's wrapper stack (`config.yaml`): the env it plays must have it too
        self.wrappers = normalize_wrappers(stored.get("wrappers"), str(run.path / "config.yaml"))
        self.keys: DreamerKeys | None = None
        if self.wrappers:
            self.keys = dreamer_keys(self.env_id, self.options["env_kwargs"], self.wrappers)
        vectors = self.keys.vectors if self.keys is not None else []
        with initialize_config_module("sheeprl.configs", version_base="1.3"):
            cfg = compose(
                "config",
                overrides=dreamer_overrides(self.env_id, run.path, self.options, vectors),
            )
        self.cfg = dotdict(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True))
        self.fabric = Fabric(devices=1, accelerator="cpu")
        size = int(self.options["screen_size"])
        channels = 1 if self.options["grayscale"] else 3
        obs_space = gym.spaces.Dict(
            {
                IMAGE_KEY: gym.spaces.Box(0, 255, (channels, size, size), np.uint8),
                **{k: self.keys.space[k] for k in vectors},  # type: ignore[union-attr]
            }
        )
        head = state["actor"].get("mlp_heads.0.weight")  # (actions, units): a Discrete actor
        if head is None:
            raise CheckpointError(f"{found[-1][1]} has no discrete actor head (mlp_heads.0)")
        n = int(head.shape[0])
        try:
            *_, self.player = build_agent(
                self.fabric, (n,), False, self.cfg, obs_space, state["world_model"], state["actor"]
            )
        except RuntimeError as exc:
            if (misfit := _misfit(exc, found[-1][1])) is None:
                raise
            raise misfit from None
        self.greedy = greedy
        self.n_actions = n
        self.steps = found[-1][0]
        self.reset()

    def reset(self) -> None:
        """Forget the recurrent state (a new episode)."""
        self.player.num_envs = 1
        self.player.init_states()

    def frame(self, obs: Any) -> Any:
        """The env's observation as the net sees it: (C, S, S) uint8, resized as in training."""
        import cv2
        import numpy as np

        frame = np.asarray(obs["pixels"] if isinstance(obs, dict) else obs)
        frame = frame[..., None] if frame.ndim == 2 else frame
        size = int(self.options["screen_size"])
        if frame.shape[:2] != (size, size):
            frame = cv2.resize(frame, (size, size), interpolation=cv2.INTER_AREA)
        frame = frame[..., None] if frame.ndim == 2 else frame
        if self.options["grayscale"] and frame.shape[-1] == 3:
            frame = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)[..., None]
        elif not self.options["grayscale"] and frame.shape[-1] == 1:
            frame = np.repeat(frame, 3, axis=-1)
        return frame.transpose(2, 0, 1)

    def __call__(self, obs: Any) -> int:
        import torch
        from sheeprl.algos.dreamer_v3.utils import prepare_obs

        if self.keys is not None:  # the stack's Dict: the frame and the vectors, as in training
            if not isinstance(obs, dict) or self.keys.image_key not in obs:
                raise ConfigError(
                    f"this Dreamer run was trained with wrappers "
                    f"{describe_wrappers(self.wrappers)}; play it in an env with that stack"
                )
            named = self.keys(obs)
            named[IMAGE_KEY] = self.frame(named[IMAGE_KEY])
        else:
            named = {IMAGE_KEY: self.frame(obs)}
        with torch.no_grad():
            torch_obs = prepare_obs(self.fabric, named, cnn_keys=[IMAGE_KEY])
            actions = self.player.get_actions(torch_obs, self.greedy, {})
        return int(actions[0].argmax(dim=-1).reshape(-1)[0])


def evaluate_dreamer(
    run_dir: str | Path, episodes: int = 1, seed: int = 0, max_steps: int | None = None
) -> dict[str, Any]:
    """Play `episodes` episodes (seeds `seed`, `seed + 1`, ...) with a Dreamer run's policy."""
    import gymnasium as gym
    import numpy as np

    import metabonk_gym  # noqa: F401  (registers the envs)

    policy = DreamerPolicy(run_dir)
    returns, lengths = [], []
    env = gym.make(policy.env_id, **dict(policy.options["env_kwargs"] or {}))
    if policy.wrappers:
        env = apply_wrappers(env, policy.wrappers)
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            policy.reset()
            total, steps, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(policy(obs))
                total += float(reward)
                steps += 1
                done = terminated or truncated or (max_steps is not None and steps >= max_steps)
            returns.append(total)
            lengths.append(steps)
    finally:
        env.close()
    return {
        "env_id": policy.env_id,
        "checkpoint_steps": policy.steps,
        "episodes": episodes,
        "mean_return": float(np.mean(returns)),
        "mean_length": float(np.mean(lengths)),
        "returns": returns,
    }
