"""`metabonk train world-model`: fit a `WorldModel` to episodes, in a run directory.

The run directory is laid out as `train ppo`'s: `config.yaml`, `run.json`, `tensorboard/`,
`checkpoints/step_<N>.pt` (+ `.json`), and the final `model.pt` with `model.json` (weights only,
read with `weights_only=True`; the JSON has the game, env id, frame shape and action space).
`--resume` continues from the newest checkpoint (weights and optimizer) to the new step count.
Training minimises the squared error of frames t+1..t+horizon (what PSNR measures) plus the
Gaussian likelihood of the error under the predicted variance, on random crops; TensorBoard gets
the losses, held-out PSNR against `copy` per horizon, and real vs imagined strips side by side.

>>> clip_psnr(np.zeros((2, 4, 4, 1), np.uint8), np.full((2, 4, 4, 1), 255, np.uint8))
0.0
>>> sorted(TRAIN_DEFAULTS)[:3]
['action_dim', 'batch_size', 'checkpoint_every']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from metabonk_gym.rundir import RunDir
from metabonk_gym.runloop import RunLoop, seed_all
from metabonk_gym.training.config import config_to_yaml
from metabonk_gym.training.errors import CheckpointError, RunDirError
from metabonk_gym.utils import Log
from metabonk_gym.worldmodel.data import EnvFacts, Episode, split_heldout, windows
from metabonk_gym.worldmodel.files import (
    MODEL_NAME,
    WorldModelError,
    build_model,
    read_metadata,
    read_weights,
    save_weights,
)
from metabonk_gym.worldmodel.model import CONTEXT, WorldModel, imagine, to_tensor
from metabonk_gym.wrappers.temporal_strip import strip_image

#: Training options and their defaults (what `config.yaml` records).
TRAIN_DEFAULTS: dict[str, Any] = {
    "steps": 2000,
    "batch_size": 16,
    "crop": 64,
    "lr": 1e-3,
    "width": 8,
    "action_dim": 16,
    "horizon": 3,
    "nll_weight": 1.0,
    "checkpoint_every": 500,
    "eval_every": 250,
    "seed": 0,
    "time_limit_s": None,
}


def clip_psnr(pred: np.ndarray, real: np.ndarray) -> float:
    """PSNR in dB of uint8 frames (from the mean squared error over all of them)."""
    mse = float(np.mean((pred.astype(np.float64) - real.astype(np.float64)) ** 2))
    return float(10 * np.log10(255.0**2 / max(mse, 1e-10)))


def heldout_scores(
    model: WorldModel, episodes: Sequence[Episode], horizon: int, every: int = 3
) -> dict[str, float]:
    """PSNR at t+1..t+horizon of the model and of `copy` over held-out episodes."""
    err = np.zeros(horizon)
    err_copy = np.zeros(horizon)
    n = 0
    for ep in episodes:
        for t in range(CONTEXT - 1, len(ep.frames) - horizon, every):
            pred, _ = imagine(
                model, ep.frames[t - CONTEXT + 1 : t + 1], ep.actions[t : t + horizon]
            )
            real = ep.frames[t + 1 : t + 1 + horizon].astype(np.float64)
            err += ((pred.numpy().astype(np.float64) - real) ** 2).mean(axis=(1, 2, 3))
            err_copy += ((ep.frames[t].astype(np.float64)[None] - real) ** 2).mean(axis=(1, 2, 3))
            n += 1
    out: dict[str, float] = {}
    for k in range(horizon):
        out[f"psnr_t{k + 1}"] = float(10 * np.log10(255.0**2 / max(err[k] / max(n, 1), 1e-10)))
        copy = float(10 * np.log10(255.0**2 / max(err_copy[k] / max(n, 1), 1e-10)))
        out[f"copy_psnr_t{k + 1}"] = copy
        out[f"psnr_vs_copy_db_t{k + 1}"] = out[f"psnr_t{k + 1}"] - copy
    out["heldout_clips"] = float(n)
    return out


def comparison_image(model: WorldModel, episode: Episode, t: int, horizon: int) -> np.ndarray:
    """Real frames t..t+horizon above the imagined ones and the model's uncertainty (RGB)."""
    context = episode.frames[t - CONTEXT + 1 : t + 1]
    pred, std = imagine(model, context, episode.actions[t : t + horizon])
    real = episode.frames[t : t + horizon + 1]
    imagined = np.concatenate([real[:1], pred.numpy()])
    spread = np.clip(std.numpy() * 4, 0, 255).astype(np.uint8)[..., None]
    spread = np.concatenate([np.zeros_like(spread[:1]), spread])
    rows = [
        strip_image(np.asarray(r), past=0, labels=i == 0)
        for i, r in enumerate((real, imagined, spread))
    ]
    width = max(r.shape[1] for r in rows)
    return np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows])


def list_checkpoints(run: RunDir) -> list[tuple[int, Path]]:
    """(step, path) of `checkpoints/step_<N>.pt` with their `.json`, oldest first."""
    return [(n, p) for n, p in run.list_checkpoints(".pt") if p.with_suffix(".json").is_file()]


def _options(overrides: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(overrides) - set(TRAIN_DEFAULTS))
    if unknown:
        raise RunDirError(
            f"unknown world-model option(s) {', '.join(unknown)}; known: {', '.join(TRAIN_DEFAULTS)}"
        )
    opts = {**TRAIN_DEFAULTS, **{k: v for k, v in overrides.items() if v is not None}}
    for key in ("steps", "batch_size", "width", "action_dim", "horizon"):
        if int(opts[key]) < 1:
            raise RunDirError(f"{key} must be at least 1, not {opts[key]}")
    if int(opts["crop"]) < 0:
        raise RunDirError(f"crop must be 0 (whole frames) or a size in pixels, not {opts['crop']}")
    return opts


def _resume(
    run: RunDir, facts: EnvFacts, overrides: dict[str, Any], log: Log
) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """(options, steps done, checkpoint state) of the run in `run` to go on with: its stored
    options under `overrides` (which may not change the model's shape), its newest checkpoint,
    checked to be of these episodes' game and frames."""
    run.check_resumable()
    note = run.check_not_running()
    if note:
        log(note)
    stored = run.read_config()
    opts = _options({**{k: v for k, v in stored.items() if k in TRAIN_DEFAULTS}, **overrides})
    for key in ("width", "action_dim", "horizon"):
        if key in overrides and overrides[key] is not None and overrides[key] != stored.get(key):
            raise RunDirError(f"--resume cannot change {key} (the model's shape); start a new run")
    checkpoints = list_checkpoints(run)
    if not checkpoints:
        raise CheckpointError(
            f"cannot resume {run.path}: no checkpoints/step_*.pt; start a new run"
        )
    start_step, latest = checkpoints[-1]
    meta = read_metadata(latest)
    if meta.get("game") != facts.game or list(meta.get("obs_shape", [])) != list(facts.obs_shape):
        raise WorldModelError(
            f"{run.path} trains a model of {meta.get('game')} on {tuple(meta.get('obs_shape', []))} "
            f"frames; these episodes are {facts.game} {facts.obs_shape}"
        )
    state = read_weights(latest)
    log(f"resuming {run.path} from step {start_step} ({latest.name})")
    return opts, start_step, state


def _build(
    opts: dict[str, Any], facts: EnvFacts, state: dict[str, Any] | None, run: RunDir
) -> tuple[dict[str, Any], WorldModel, Any]:
    """(the model's config, the model, its Adam optimizer), from a checkpoint's `state` when
    given."""
    meta_config = {
        "channels": facts.obs_shape[2],
        "n_actions": facts.n_actions,
        "width": int(opts["width"]),
        "action_dim": int(opts["action_dim"]),
        "horizon": int(opts["horizon"]),
        "action_box": int(facts.action_box),
    }
    model = build_model({"config": meta_config})
    optimizer = torch.optim.Adam(model.parameters(), lr=float(opts["lr"]))
    if state is not None:
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise CheckpointError(
                f"checkpoint of {run.path} does not fit this model: {exc}"
            ) from exc
    return meta_config, model, optimizer


def _train_step(
    model: WorldModel, optimizer: Any, batch: tuple[Any, Any, Any], nll_weight: float
) -> tuple[float, float]:
    """One Adam step on a batch of windows; (mse, nll) of it."""
    x, a, y = batch
    frames, target = to_tensor(x), to_tensor(y)
    present = frames[:, -1:]
    mean, logvar = model(frames, torch.as_tensor(a))
    diff = target - present
    mse = (mean - diff).pow(2).mean()
    nll = 0.5 * (logvar + (mean.detach() - diff).pow(2) / logvar.exp()).mean()
    loss = mse + nll_weight * nll
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(mse.detach()), float(nll.detach())


def _evaluate(
    loop: RunLoop, step: int, model: WorldModel, heldout: list[Episode], horizon: int, rng: Any
) -> dict[str, float]:
    """Held-out scores at `step` (TensorBoard scalars) and one real vs imagined strip."""
    model.eval()
    scores = heldout_scores(model, heldout, horizon)
    loop.report(step, scores, prefix="world_model/")
    ep = max(heldout, key=lambda e: len(e.frames))
    if len(ep.frames) > CONTEXT + horizon and loop.writer is not None:
        t = int(rng.integers(CONTEXT - 1, len(ep.frames) - horizon))
        image = comparison_image(model, ep, t, horizon)
        loop.writer.add_image("world_model/real_vs_imagined", image, step, dataformats="HWC")
    model.train()
    return scores


def _save(path: Path, model: WorldModel, optimizer: Any, meta: dict[str, Any]) -> None:
    """Save the weights with `meta`; with the optimizer's state when given (a checkpoint)."""
    if optimizer is None:
        save_weights(model.state_dict(), path, meta)
    else:
        save_weights({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path, meta)


def _failed(run: RunDir, resume: bool, existed: bool, steps: int) -> None:
    """After a failure: a new run without a checkpoint is removed, any other marked failed."""
    if not resume and not list_checkpoints(run):
        for path in (run.config_file, run.state_file):
            path.unlink(missing_ok=True)
        run.discard_new(existed)
    else:
        run.write_state(status="failed", num_timesteps=steps, pid=None)


def train_world_model(
    episodes: list[Episode],
    facts: EnvFacts,
    out: str | Path,
    *,
    resume: bool = False,
    source: dict[str, Any] | None = None,
    threads: int | None = None,
    log: Log | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Train (or with `resume`, continue) a world model in run directory `out`.

    Args:
        episodes, facts: the training episodes and the env they come from (`dataset_episodes`,
            `rollout_episodes`); the last fifth of the episodes is held out for evaluation.
        out: the run directory.
        resume: continue the run in `out` from its newest checkpoint, up to `steps`.
        source: where the episodes came from (`data.load_source`'s description; recorded in
            `config.yaml` and the metadata, so `--resume` can load them again).
        threads: torch threads (None: leave as is).
        log: progress messages.
        overrides: `TRAIN_DEFAULTS` keys (steps, batch_size, crop, lr, width, ...).

    Returns the figures also written into `model.json`.
    """
    say: Log = log or (lambda _msg: None)
    run = RunDir(Path(out))
    existed = True
    start_step, state = 0, None
    if resume:
        opts, start_step, state = _resume(run, facts, overrides, say)
    else:
        opts = _options(overrides)
        existed = run.path.exists()
        run.check_new()
    if len(episodes) < 1:
        raise WorldModelError("no episodes to train on")
    train_eps, heldout = split_heldout(episodes)
    horizon = int(opts["horizon"])
    rng = seed_all(int(opts["seed"]) + start_step, threads)
    meta_config, model, optimizer = _build(opts, facts, state, run)
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(config_to_yaml({**opts, "env_id": facts.env_id, "source": dict(source or {})}))
    run.write_state(algo="world-model", env_id=facts.env_id, status="running", **run.owner())
    crop = None if int(opts["crop"]) <= 0 else (int(opts["crop"]), int(opts["crop"]))
    base_meta = {**facts.to_dict(), "config": meta_config, "source": dict(source or {})}
    base_meta["context"] = CONTEXT

    steps_total = int(opts["steps"])
    loop = RunLoop(
        total=steps_total,
        start=start_step,
        tensorboard=run.tensorboard,
        checkpoint=lambda s: _save(
            run.checkpoint_path(s, ".pt"), model, optimizer, {**base_meta, "steps": s}
        ),
        checkpoint_every=int(opts["checkpoint_every"]),
        time_limit_s=opts["time_limit_s"],
        log=say,
        on_interrupt=lambda s: run.write_state(status="interrupted", num_timesteps=s, pid=None),
        on_error=lambda _exc: _failed(run, resume, existed, loop.step),
    )
    losses: list[float] = []
    scores: dict[str, float] = {}
    with loop:
        model.train()
        for step in loop.steps():
            batch = windows(train_eps, rng, int(opts["batch_size"]), horizon, crop)
            mse, nll = _train_step(model, optimizer, batch, float(opts["nll_weight"]))
            losses.append(mse)
            loop.report(step, {"mse": mse, "nll": nll}, prefix="world_model/")
            if step % int(opts["eval_every"]) == 0 or step == steps_total:
                say(f"step {step}/{steps_total}: mse {np.mean(losses[-50:]):.6f}")
                if heldout:
                    scores = _evaluate(loop, step, model, heldout, horizon, rng)
        model.eval()
        if heldout and not scores:
            scores = heldout_scores(model, heldout, horizon)
        figures: dict[str, Any] = {
            "steps": loop.step,
            "train_seconds": loop.seconds,
            "final_mse": float(np.mean(losses[-50:])) if losses else None,
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_episodes": len(train_eps),
            "heldout_episodes": len(heldout),
            **scores,
        }
        meta = {**base_meta, "steps": loop.step, "figures": figures}
        _save(run.path / MODEL_NAME, model, None, meta)
        run.write_state(status="finished", num_timesteps=loop.step, pid=None)
    figures["path"] = str(run.path / MODEL_NAME)
    return figures
