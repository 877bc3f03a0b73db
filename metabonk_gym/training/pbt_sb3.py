"""SB3 members of `tune_pbt` (`engine: sb3`): each member is the `train ppo` path (the same
vector env with the config's `wrappers:` stack and frame stack, the same PPO and learn loop) run
as a Ray Tune function trainable that reports and checkpoints every `perturbation_interval` steps.

What: a member builds its envs with `make_train_venv` (so a wrapper stack, Dict observations and
`MultiInputPolicy` come as in `train ppo`), keeps a run directory `members/<member>/` (its
`config.yaml` with its current hyperparameters and wrappers, `run.json`, TensorBoard,
`model.zip`), and on PBT's exploit restarts from the chosen member's checkpoint with mutated
hyperparameters. Why a second engine: RLlib's members step their envs in one process; the SB3
path is the one `train ppo` runs and measures, and PBT over it tunes what `train ppo` will train.

>>> member_config("MetaBonk/BonkQuest-v0", {"n_envs": 1}, {"learning_rate": 3e-4}, 128, 256)["hyper"]
{'learning_rate': 0.0003}
>>> apply_hyperparameters(type("M", (), {"rollout_buffer": None})(), {"gamma": 0.9}).gamma
0.9
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.rundir import RunDir, model_metadata, read_model_metadata, save_model
from metabonk_gym.training.callbacks import EpisodeStats
from metabonk_gym.training.config import config_to_yaml, resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.safeload import load_ppo
from metabonk_gym.training.wrapstack import check_wrappers_match, normalize_wrappers

#: The engine name `run.json` and each member's zip record.
ENGINE = "sb3-pbt"


def member_config(
    env_id: str,
    cfg: Mapping[str, Any],
    hyper: Mapping[str, Any],
    interval: int,
    total_steps: int,
    members: str = "",
    info_names: list[str] | None = None,
) -> dict[str, Any]:
    """The `param_space` of the SB3 members: the shared config, the mutated keys under `hyper`
    (Ray samples and perturbs them there), the report interval, the members' folder and the
    env's info names (logged as `game/<name>`)."""
    return {
        "env_id": env_id,
        "cfg": dict(cfg),
        "hyper": dict(hyper),
        "interval": int(interval),
        "total_steps": int(total_steps),
        "members": members,
        "info_names": list(info_names or []),
    }


def apply_hyperparameters(model: Any, hyper: Mapping[str, Any]) -> Any:
    """Set a loaded PPO's mutated scalars (the learning rate and clip range come in through the
    config when it loads); gamma and lambda also in its rollout buffer, which computes returns."""
    for key in ("ent_coef", "gamma", "gae_lambda", "vf_coef", "n_epochs", "batch_size"):
        if key in hyper:
            setattr(model, key, hyper[key])
    if "max_grad_norm" in hyper:
        model.max_grad_norm = hyper["max_grad_norm"]
    buffer = getattr(model, "rollout_buffer", None)
    for key in ("gamma", "gae_lambda"):
        if buffer is not None and key in hyper:
            setattr(buffer, key, hyper[key])
    return model


def check_checkpoint_stack(checkpoint: Path, wrappers: Any) -> None:
    """A member may continue only from a checkpoint trained with its own wrapper stack (one-line
    `ConfigError` naming both): a policy sees only the observations it was trained on."""
    stored = read_model_metadata(checkpoint).get("config", {}).get("wrappers")
    check_wrappers_match(checkpoint, normalize_wrappers(wrappers), normalize_wrappers(stored))


def train_member(config: dict[str, Any]) -> None:
    """One SB3 member (a Ray Tune function trainable; see the module docstring)."""
    import shutil

    import torch
    from ray import tune

    from metabonk_gym.training.policies import make_ppo
    from metabonk_gym.training.ppo import LearnLoop

    env_id = config["env_id"]
    hyper = {k: v for k, v in config["hyper"].items() if k != "state"}
    base = dict(config["cfg"])
    if "state" in config["hyper"]:
        base["state"] = config["hyper"]["state"]
    for key in ("n_epochs", "batch_size"):  # Ray's choices of integers arrive as numpy ints
        if key in hyper:
            hyper[key] = int(hyper[key])
    cfg = resolve_config(env_id, base=base, overrides=hyper)
    context = tune.get_context()  # the trial folder's name, as `best.json` names members
    name = Path(context.get_trial_dir()).name or context.get_trial_name() or "member"
    run = RunDir(Path(config["members"]) / name)
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(config_to_yaml(cfg))  # this member's hyperparameters now, and its wrappers
    run.write_state(env_id=env_id, algo="ppo", engine=ENGINE, status="running")
    torch.set_num_threads(cfg.torch_threads)
    venv = make_train_venv(env_id, cfg)
    logger = None
    try:
        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:  # PBT's exploit (or Ray's retry): another member's weights
            with checkpoint.as_directory() as folder:
                source = Path(folder) / "model.zip"
                check_checkpoint_stack(source, cfg.wrappers)
                local = run.path / "restored.zip"
                shutil.copyfile(source, local)
            model = apply_hyperparameters(load_ppo(local, venv, cfg, device=cfg.device), hyper)
            local.unlink()
        else:
            model = make_ppo(cfg, venv)
        from stable_baselines3.common.logger import configure

        logger = configure(str(run.tensorboard), ["tensorboard"])
        model.set_logger(logger)

        def metadata() -> dict[str, Any]:
            return model_metadata(env_id, "ppo", cfg.to_dict(), engine=ENGINE, member=name)

        stats = EpisodeStats(window=cfg.win_window)
        loop = LearnLoop(run, cfg, list(config["info_names"]), metadata, stats)
        total = int(config["total_steps"])
        while model.num_timesteps < total:
            steps = min(int(config["interval"]), total - int(model.num_timesteps))
            loop.learn(model, steps, reset=False, label=f"PBT {name}")
            save_model(model, run.model, metadata())
            with tempfile.TemporaryDirectory(dir=run.path) as folder:
                shutil.copyfile(run.model, Path(folder) / "model.zip")
                tune.report(
                    {
                        "metabonk_steps": int(model.num_timesteps),
                        "metabonk_score": stats.score(),
                        "metabonk": {
                            "steps": int(model.num_timesteps),
                            "episodes": stats.episodes,
                            "win_rate": stats.win_rate(),
                            "mean_return": stats.mean_return(),
                        },
                    },
                    checkpoint=tune.Checkpoint.from_directory(folder),
                )
        run.write_state(status="finished", num_timesteps=int(model.num_timesteps))
    finally:
        if logger is not None:
            logger.close()
        close_venv(venv)
