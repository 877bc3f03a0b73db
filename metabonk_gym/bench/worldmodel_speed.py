"""`metabonk bench world-model`: predicted-frame quality of a world model vs `flow` vs `copy`.

For each env: training episodes (seeds 0..n-1) and held-out episodes (seeds 20000+, as
`bench predictors`) under the sticky random policy; a world model is trained on the former in a
scratch run directory (or `models` are given), then every predictor sees the same held-out
frames. The world model is told the actions that were really taken next (what an agent plans),
and also scored with the last action repeated (`world-model-last`), which shows what action
conditioning adds; `world-model-random` plans random actions. PSNR (from the mean squared error over all predicted frames) and SSIM (mean,
every `ssim_every`-th step) at t+1..t+3, and milliseconds per step.

>>> still = Episode(np.zeros((8, 16, 16, 3), np.uint8), np.zeros(7, np.int64))
>>> scores = score_predictors([still], {"copy": CopyPredictor})["copy"]
>>> scores["frames"], scores["psnr"][0] == PSNR_CAP
(3, True)
>>> demo = {"BonkQuest_frame_shape": "40x60x1", "BonkQuest_world_model_vs_flow_db_t1": 1.41,
...         "BonkQuest_world_model_vs_flow_db_t2": 1.91, "BonkQuest_world_model_vs_flow_db_t3": 2.86}
>>> [(r["id"], r["text"], r["met"]) for r in figure_records(demo)]
[('vs-flow', 'BonkQuest +1.41 / +1.91 / +2.86 dB', True)]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.bench.wrappers_speed import HELDOUT_SEED
from metabonk_gym.training.predictor import DEFAULT_ENVS
from metabonk_gym.worldmodel.data import Episode, rollout_episodes
from metabonk_gym.wrappers.frame_metrics import PSNR_CAP, ssim
from metabonk_gym.wrappers.predictors import CopyPredictor, FlowPredictor

HORIZON = 3
#: How the world model is told the actions ahead (see `score_predictors`).
PLANS = ("taken", "last", "random")

__all__ = ["DEFAULT_ENVS", "run_world_model_bench", "score_predictors"]


def score_predictors(
    episodes: Sequence[Episode],
    predictors: dict[str, Callable[[], Any]],
    horizon: int = HORIZON,
    ssim_every: int = 5,
    plan: str = "taken",
) -> dict[str, dict[str, Any]]:
    """PSNR / SSIM per horizon and ms per step of each predictor over `episodes`. A predictor
    with `set_plan` is told each action taken and plans, by `plan`: "taken" the actions really
    taken next, "last" none (it repeats the last action), "random" uniformly random actions."""
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {', '.join(PLANS)}, not {plan!r}")
    rng = np.random.default_rng(0)
    out: dict[str, dict[str, Any]] = {}
    for name, factory in predictors.items():
        sq_err = np.zeros(horizon)
        ssims: list[list[float]] = [[] for _ in range(horizon)]
        count, calls, seconds = 0, 0, 0.0
        for episode in episodes:
            predictor = factory()
            predictor.reset()
            frames, actions = episode.frames, episode.actions
            for t in range(len(frames) - horizon):
                start = time.perf_counter()
                predictor.update(frames[t])
                if t > 0 and hasattr(predictor, "observe_action"):
                    predictor.observe_action(actions[t - 1], None)
                if plan == "taken" and hasattr(predictor, "set_plan"):
                    predictor.set_plan(actions[t : t + horizon].tolist())
                elif plan == "random" and hasattr(predictor, "set_plan"):
                    n = predictor.model.config.n_actions
                    predictor.set_plan(rng.integers(n, size=horizon).tolist())
                pred = predictor.predict(horizon)
                seconds += time.perf_counter() - start
                calls += 1
                if t < 2:  # every predictor has its context
                    continue
                for k in range(horizon):
                    real = frames[t + 1 + k]
                    sq_err[k] += float(np.mean((pred[k].astype(np.float64) - real) ** 2))
                    if t % ssim_every == 0:
                        ssims[k].append(ssim(pred[k], real))
                count += 1
        mse = sq_err / max(count, 1)
        out[name] = {
            "psnr": [
                float(min(PSNR_CAP, 10 * np.log10(255.0**2 / m))) if m > 0 else PSNR_CAP
                for m in mse
            ],
            "ssim": [float(np.mean(s)) if s else float("nan") for s in ssims],
            "ms_per_step": seconds / max(calls, 1) * 1e3,
            "frames": count,
        }
    return out


def run_world_model_bench(
    env_ids: Sequence[str] = DEFAULT_ENVS,
    train_episodes: int = 6,
    heldout_episodes: int = 2,
    episode_steps: int = 200,
    train_steps: int = 400,
    time_limit_s: float = 240.0,
    width: int = 8,
    crop: int = 64,
    models: Sequence[str | Path] | None = None,
    threads: int = 1,
    seed: int = HELDOUT_SEED,
    log: Callable[[str], None] | None = None,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Train (or load) one world model per env and score it with flow and copy on held-out
    episodes. Flat figures: `<game>_<predictor>_psnr_t<k>`, `..._vs_flow_db_t<k>`, ..."""
    import torch

    from metabonk_gym.worldmodel.files import check_fits, load_world_model
    from metabonk_gym.worldmodel.predictor import WorldModelPredictor
    from metabonk_gym.worldmodel.train import train_world_model

    log = log or (lambda _msg: None)
    torch.set_num_threads(int(threads))
    if models is not None and len(models) != len(env_ids):
        raise ValueError(f"give one --model per env ({len(env_ids)}), not {len(models)}")
    result: dict[str, Any] = {"horizon": HORIZON}
    for i, env_id in enumerate(env_ids):
        game = env_id.split("/")[-1].split("-")[0]
        heldout, facts = rollout_episodes(
            env_id, heldout_episodes, episode_steps, seed=seed, **env_kwargs
        )
        with tempfile.TemporaryDirectory(prefix="metabonk-world-model-") as scratch:
            if models is not None:
                net, meta = load_world_model(models[i])
                check_fits(
                    meta,
                    game=facts.game,
                    obs_shape=facts.obs_shape,
                    n_actions=facts.n_actions,
                    source=str(models[i]),
                )
            else:
                log(f"{env_id}: rolling out {train_episodes} training episode(s)")
                train, facts = rollout_episodes(
                    env_id, train_episodes, episode_steps, seed=0, **env_kwargs
                )
                figures = train_world_model(
                    train,
                    facts,
                    Path(scratch) / "run",
                    steps=train_steps,
                    time_limit_s=time_limit_s,
                    width=width,
                    crop=crop,
                    eval_every=max(train_steps, 1),
                    checkpoint_every=max(train_steps, 1),
                    log=log,
                )
                result[f"{game}_train_steps"] = figures["steps"]
                result[f"{game}_train_seconds"] = figures["train_seconds"]
                net, meta = load_world_model(Path(scratch) / "run")
        log(f"{env_id}: scoring copy, flow and the world model on {heldout_episodes} episode(s)")
        factories: dict[str, Callable[[], Any]] = {
            "copy": CopyPredictor,
            "flow": FlowPredictor,
            "world-model": partial(WorldModelPredictor, model=net, metadata=meta),
        }
        scores = score_predictors(heldout, factories)
        for mode in ("last", "random"):  # what knowing the plan adds
            scores[f"world-model-{mode}"] = score_predictors(
                heldout, {mode: factories["world-model"]}, plan=mode
            )[mode]
        result[f"{game}_frames"] = scores["copy"]["frames"]
        result[f"{game}_frame_shape"] = "x".join(str(v) for v in facts.obs_shape)
        for name, s in scores.items():
            for k in range(HORIZON):
                result[f"{game}_{name}_psnr_t{k + 1}"] = s["psnr"][k]
                result[f"{game}_{name}_ssim_t{k + 1}"] = s["ssim"][k]
            result[f"{game}_{name}_ms_per_step"] = s["ms_per_step"]
        wm, flow, copy = scores["world-model"], scores["flow"], scores["copy"]
        for k in range(HORIZON):
            result[f"{game}_world_model_vs_flow_db_t{k + 1}"] = wm["psnr"][k] - flow["psnr"][k]
            result[f"{game}_world_model_vs_copy_db_t{k + 1}"] = wm["psnr"][k] - copy["psnr"][k]
        result[f"{game}_world_model_above_flow_every_horizon"] = all(
            wm["psnr"][k] > flow["psnr"][k] for k in range(HORIZON)
        )
    return result


#: The full-size GBA frame; figures on it get ids of their own (`full-frame-...`).
FULL_FRAME = "160x240x3"


def _per_game(result: dict[str, Any], games: list[str], key: str) -> str:
    parts = []
    for game in games:
        values = [result[f"{game}_{key}_t{k + 1}"] for k in range(HORIZON)]
        parts.append(f"{game} " + " / ".join(f"{v:+.2f}" for v in values) + " dB")
    return "; ".join(parts)


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run_world_model_bench`'s figures as records for `docs/figures/world-models.json`: the
    world model vs flow, what the actions taken add over a random plan, and its cost per step."""
    games = [k.removesuffix("_frame_shape") for k in result if k.endswith("_frame_shape")]
    if not games:
        return []
    shape = result[f"{games[0]}_frame_shape"]
    prefix = "full-frame-" if shape == FULL_FRAME else ""
    first = result[f"{games[0]}_world_model_vs_flow_db_t1"]
    above = all(
        result[f"{g}_world_model_vs_flow_db_t{k + 1}"] > 0 for g in games for k in range(HORIZON)
    )
    name = f"world model vs flow, PSNR t+1 / t+2 / t+3, {shape} frames"
    rows = [{"id": f"{prefix}vs-flow", "name": name, "value": round(first, 2), "unit": "dB"}]
    rows[0] |= {"text": _per_game(result, games, "world_model_vs_flow_db")}
    rows[0] |= {"target": "above flow at every horizon", "met": above}
    if all(f"{g}_world-model-random_psnr_t1" in result for g in games):
        plan = {  # PSNR of the world model told the actions taken, minus told random ones
            f"{g}_plan_db_t{t}": result[f"{g}_world-model_psnr_t{t}"]
            - result[f"{g}_world-model-random_psnr_t{t}"]
            for g in games
            for t in range(1, HORIZON + 1)
        }
        name = f"world model at {shape}: the actions taken vs a random plan, PSNR t+1 / t+2 / t+3"
        value = round(plan[f"{games[0]}_plan_db_t1"], 2)
        rows.append(
            {"id": f"{prefix}action-conditioning", "name": name, "value": value, "unit": "dB"}
        )
        rows[-1] |= {"text": _per_game(plan, games, "plan_db"), "target": None, "met": None}
    if all(f"{g}_world-model_ms_per_step" in result for g in games):
        costs = {g: result[f"{g}_world-model_ms_per_step"] for g in games}
        text = "; ".join(f"{g} {ms:.1f} ms" for g, ms in costs.items())
        name = f"world model cost per step (update + predict) at {shape}"
        value = round(max(costs.values()), 1)
        rows.append({"id": f"{prefix}cost-per-step", "name": name, "value": value, "unit": "ms"})
        rows[-1] |= {"text": text, "target": None, "met": None}
    return rows
