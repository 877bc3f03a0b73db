"""Benchmarks of the observation wrappers: tokenizer cost against the env step, and frame
predictors' quality against `copy` (`metabonk bench tiles`, `metabonk bench predictors`).

Tiles: one env, each step timed three ways in turn (the env step, then the VRAM path and the
pixel path on the frame it produced), so machine noise hits all alike; medians are reported,
as ratios to the env step (and in ms, against their budgets: 0.3 ms VRAM, 2 ms pixels).

Predictors: held-out episodes of both games (seeds no training run uses) under the sticky
random policy; every predictor sees the same frames; PSNR (from the mean squared error over all
predicted frames) and SSIM (mean) at t+1..t+3 against the real frames, as differences and
ratios to `copy`; cost per step (update + predict) as a ratio to `copy`'s and to the env step.

>>> still = np.zeros((8, 16, 16, 3), np.uint8)  # an episode of 8 identical frames
>>> scores = evaluate_predictors([still], {"copy": CopyPredictor})["copy"]
>>> scores["frames"], scores["psnr"][0] > 90
(3, True)
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.training.predictor import (
    DEFAULT_ENVS,
    _n_actions,
    record_episode,
    sticky_actions,
    train_predictor,
)
from metabonk_gym.wrappers.frame_metrics import ssim
from metabonk_gym.wrappers.predictors import (
    CopyPredictor,
    FlowPredictor,
    LearnedPredictor,
    LinearPredictor,
)
from metabonk_gym.wrappers.tile_tokens import TileTokens

#: Seeds of held-out episodes: training uses seed .. seed + episodes and 10_000 + i.
HELDOUT_SEED = 20_000
TILE_BUDGET_MS = {"vram": 0.3, "pixels": 2.0}


def tile_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run_tiles`'s figures as records for `docs/figures/wrappers.json`, ids named by game.

    >>> rows = tile_records({"env_id": "MetaBonk/BonkArena-v0", "env_step_ms": 0.62,
    ...                      "vram_ms": 0.24, "pixels_ms": 0.19})
    >>> [(r["id"], r["met"]) for r in rows]
    [('env-step-bonkarena', None), ('tiles-vram-bonkarena', True), ('tiles-pixels-bonkarena', True)]
    """
    game = result["env_id"].split("/")[-1].split("-v")[0]
    slug, env_ms = game.lower(), result["env_step_ms"]
    rows: list[dict[str, Any]] = [
        {
            "id": f"env-step-{slug}",
            "name": f"env step (the baseline the wrappers are timed against), {game}",
        }
    ]
    rows[0] |= {"value": round(env_ms, 3), "unit": "ms", "target": None, "met": None}
    for path, words in (("vram", "from VRAM"), ("pixels", "from pixels")):
        ms, budget = result[f"{path}_ms"], TILE_BUDGET_MS[path]
        name = f"`TileTokens` {words}, per step, {game}"
        text = f"{ms:.3f} ms ({ms / env_ms:.2f}x of an env step)"
        rows.append(
            {"id": f"tiles-{path}-{slug}", "name": name, "value": round(ms, 3), "unit": "ms"}
        )
        rows[-1] |= {"text": text, "target": f"<= {budget:g} ms", "met": ms <= budget}
    return rows


#: The predictors' target: above `copy` in PSNR at t+1 and at t+3, on every game measured.
PREDICTOR_TARGET = "beats copy at t+1 and t+3"


def predictor_records(result: dict[str, Any], horizon: int = 3) -> list[dict[str, Any]]:
    """`run_predictors`' figures as records for `docs/figures/wrappers.json`: one per predictor,
    its PSNR difference to `copy` at each step ahead on every game, and its cost.

    >>> demo = {"BonkQuest_env_step_ms": 0.5, "BonkQuest_flow_ms_per_step": 8.5}
    >>> demo |= {f"BonkQuest_flow_psnr_vs_copy_db_t{k}": v for k, v in ((1, 1.36), (2, 0.54), (3, 0.21))}
    >>> [(r["id"], r["text"], r["met"]) for r in predictor_records(demo)]
    [('flow-predictor', 'BonkQuest +1.36 / +0.54 / +0.21 dB (17x an env step)', True)]
    """
    games = [k.removesuffix("_env_step_ms") for k in result if k.endswith("_env_step_ms")]
    names = sorted(
        {
            k.split("_")[1]
            for k in result
            if k.endswith("_psnr_vs_copy_db_t1") and k.split("_")[0] in games
        }
    )
    rows: list[dict[str, Any]] = []
    for name in names:
        parts, met = [], True
        for game in games:
            diffs = [result[f"{game}_{name}_psnr_vs_copy_db_t{k + 1}"] for k in range(horizon)]
            cost = result[f"{game}_{name}_ms_per_step"] / result[f"{game}_env_step_ms"]
            shown = " / ".join(f"{d:+.2f}" for d in diffs)
            times = f"{cost:.1f}" if cost < 10 else f"{cost:.0f}"
            parts.append(f"{game} {shown} dB ({times}x an env step)")
            met = met and diffs[0] > 0 and diffs[-1] > 0
        title = f"`{name}` predictor vs `copy`, PSNR at t+1 / t+2 / t+3"
        first = result[f"{games[0]}_{name}_psnr_vs_copy_db_t1"]
        rows.append(
            {"id": f"{name}-predictor", "name": title, "value": round(first, 2), "unit": "dB"}
        )
        rows[-1] |= {"text": "; ".join(parts), "target": PREDICTOR_TARGET, "met": met}
    return rows


def run_tiles(
    env_id: str = "MetaBonk/BonkQuest-v0", steps: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Per-step cost of `TileTokens` (VRAM and pixel paths) against the env step."""
    env = gym.make(env_id)
    try:
        vram = TileTokens(env, source="vram")
        pixel = TileTokens(env, source="pixels")
        obs, _ = env.reset(seed=seed)
        actions = sticky_actions(np.random.default_rng(seed), _n_actions(env), steps)
        t_env, t_vram, t_pix = [], [], []
        clock = time.perf_counter
        for i, action in enumerate(actions):
            a = clock()
            obs, _, terminated, truncated, _ = env.step(int(action))
            b = clock()
            vram.observation(obs)
            c = clock()
            pixel.observation(obs)
            d = clock()
            if i >= 20:  # warm caches
                t_env.append(b - a)
                t_vram.append(c - b)
                t_pix.append(d - c)
            if terminated or truncated:
                env.reset()
        assert pixel.tokenizer is not None
        vocabulary = len(pixel.tokenizer)
    finally:
        env.close()
    env_ms = statistics.median(t_env) * 1e3
    vram_ms = statistics.median(t_vram) * 1e3
    pix_ms = statistics.median(t_pix) * 1e3
    return {
        "env_id": env_id,
        "steps": len(t_env),
        "env_step_ms": env_ms,
        "vram_ms": vram_ms,
        "pixels_ms": pix_ms,
        "vram_vs_env_step": vram_ms / env_ms,
        "pixels_vs_env_step": pix_ms / env_ms,
        "vram_p95_vs_env_step": float(np.percentile(t_vram, 95)) / statistics.median(t_env),
        "vram_within_0.3ms": vram_ms <= TILE_BUDGET_MS["vram"],
        "pixels_within_2ms": pix_ms <= TILE_BUDGET_MS["pixels"],
        "pixel_vocabulary": vocabulary,
    }


def _env_step_ms(env_id: str, steps: int = 300) -> float:
    env = gym.make(env_id)
    try:
        env.reset(seed=0)
        times = []
        for action in sticky_actions(np.random.default_rng(0), _n_actions(env), steps):
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(int(action))
            times.append(time.perf_counter() - start)
            if terminated or truncated:
                env.reset()
        return statistics.median(times) * 1e3
    finally:
        env.close()


def evaluate_predictors(
    episodes: Sequence[np.ndarray],
    predictors: dict[str, Callable[[], Any]],
    horizon: int = 3,
    ssim_every: int = 5,
) -> dict[str, dict[str, Any]]:
    """PSNR / SSIM per horizon and seconds per step of each predictor over `episodes`."""
    out: dict[str, dict[str, Any]] = {}
    for name, factory in predictors.items():
        sq_err = np.zeros(horizon)
        count = 0
        ssims: list[list[float]] = [[] for _ in range(horizon)]
        seconds = 0.0
        calls = 0
        for episode in episodes:
            predictor = factory()
            predictor.reset()
            for t in range(len(episode) - horizon):
                start = time.perf_counter()
                predictor.update(episode[t])
                pred = predictor.predict(horizon)
                seconds += time.perf_counter() - start
                calls += 1
                if t < 2:  # every predictor has its context
                    continue
                for k in range(horizon):
                    real = episode[t + 1 + k]
                    sq_err[k] += float(np.mean((pred[k].astype(np.float64) - real) ** 2))
                    if t % ssim_every == 0:
                        ssims[k].append(ssim(pred[k], real))
                count += 1
        mse = sq_err / max(count, 1)
        out[name] = {
            "psnr": [float(10 * np.log10(255.0**2 / max(m, 1e-10))) for m in mse],
            "ssim": [float(np.mean(s)) if s else float("nan") for s in ssims],
            "ms_per_step": seconds / max(calls, 1) * 1e3,
            "frames": count,
        }
    return out


def run_predictors(
    env_ids: Sequence[str] = DEFAULT_ENVS,
    episodes: int = 2,
    steps: int = 300,
    model: str | Path | None = None,
    train_seconds: float = 0.0,
    seed: int = HELDOUT_SEED,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Score copy / linear / flow (and learned, given `model` or `train_seconds > 0`) on held-out
    episodes of each env. Flat figures: `<game>_<predictor>_psnr_t<k>`, `..._vs_copy_db`, ..."""
    log = log or (lambda _msg: None)
    factories: dict[str, Callable[[], Any]] = {
        "copy": CopyPredictor,
        "linear": LinearPredictor,
        "flow": FlowPredictor,
    }
    result: dict[str, Any] = {}
    scratch = None
    if model is None and train_seconds > 0:
        scratch = tempfile.TemporaryDirectory(prefix="metabonk-predictor-")
        model = Path(scratch.name) / "predictor.pt"
        log(f"training the learned predictor for up to {train_seconds:.0f} s")
        trained = train_predictor(
            model, env_ids=env_ids, time_limit_s=train_seconds, threads=1, log=log
        )
        result["learned_train_iterations"] = trained["iterations"]
        result["learned_train_seconds"] = trained["train_seconds"]
    if model is not None:
        import torch

        from metabonk_gym.wrappers.predictor_net import load_model

        torch.set_num_threads(1)  # as in a subprocess env; more threads only contend on shared CPUs
        net = load_model(model)
        if scratch is not None:  # the net is in memory: the trained file goes with this run
            scratch.cleanup()
        factories["learned"] = lambda: LearnedPredictor(model=net)
    horizon = 3
    for env_id in env_ids:
        game = env_id.split("/")[-1].split("-")[0]
        log(f"recording {episodes} held-out episode(s) of {env_id}")
        eps = [record_episode(env_id, seed + i, steps) for i in range(episodes)]
        step_ms = _env_step_ms(env_id)
        scores = evaluate_predictors(eps, factories, horizon)
        copy = scores["copy"]
        result[f"{game}_env_step_ms"] = step_ms
        result[f"{game}_frames"] = copy["frames"]
        for name, s in scores.items():
            for k in range(horizon):
                result[f"{game}_{name}_psnr_t{k + 1}"] = s["psnr"][k]
                result[f"{game}_{name}_ssim_t{k + 1}"] = s["ssim"][k]
                if name != "copy":
                    result[f"{game}_{name}_psnr_vs_copy_db_t{k + 1}"] = (
                        s["psnr"][k] - copy["psnr"][k]
                    )
                    result[f"{game}_{name}_ssim_vs_copy_t{k + 1}"] = s["ssim"][k] / copy["ssim"][k]
            result[f"{game}_{name}_ms_per_step"] = s["ms_per_step"]
            result[f"{game}_{name}_cost_vs_env_step"] = s["ms_per_step"] / step_ms
        others = [n for n in scores if n != "copy"]
        best = max(others, key=lambda n: scores[n]["psnr"][0] + scores[n]["psnr"][horizon - 1])
        result[f"{game}_best"] = best
        result[f"{game}_best_beats_copy_t1"] = scores[best]["psnr"][0] > copy["psnr"][0]
        result[f"{game}_best_beats_copy_t3"] = (
            scores[best]["psnr"][horizon - 1] > copy["psnr"][horizon - 1]
        )
    return result


def run(kind: str = "tiles", **kwargs: Any) -> dict[str, Any]:
    """`run("tiles", env_id=..., steps=...)` or `run("predictors", episodes=..., model=...)`."""
    if kind == "tiles":
        return run_tiles(**kwargs)
    if kind == "predictors":
        return run_predictors(**kwargs)
    raise ValueError(f"kind must be 'tiles' or 'predictors', not {kind!r}")
