"""`metabonk bench think`: what thinking is worth, and what it costs on this machine.

Two parts, both run in one process:

* **ceiling**: the oracle strategist (reads RAM, perfect advice) with the `DirectiveFollower`
  plays BonkQuest for `seeds` seeds; the win rate is the most any strategist can add with this
  System 1 (target: >= 90%).
* **latency**: think calls per engine on real prompts (the game's system prompt + per-call
  text from live game states), as p50/p95 seconds and as a ratio to the env step time measured in
  the same process (how many env steps one call costs). Engines: the oracle, llama-cpp-python
  in-process (text, and with a vision projector through a multimodal chat handler), and
  llama-cpp-python's server over loopback HTTP. Without `model_path` the tiny random GGUFs of
  `metabonk_gym.think.testing` are used: their figures are the stack's overhead (prompt
  evaluation of a ~7k byte-token prompt, grammar, HTTP), not a real VLM's speed.

>>> figures = {}
>>> _put(figures, "demo", {"p50_s": 0.5}, step_s=0.001)
>>> figures["demo_env_steps_per_call"]
500.0
>>> [(r["id"], r["met"]) for r in figure_records({"oracle_seeds": 20, "oracle_wins": 20,
...     "oracle_win_rate": 1.0, "oracle_mean_steps": 222.0})]
[('oracle-ceiling', True)]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.directive import DirectiveError, parse_directive
from metabonk_gym.think.engines import LlamaCppEngine, OpenAIEngine
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.oracle import OracleStrategist
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.serve import ServerProcess
from metabonk_gym.think.testing import write_tiny_pair
from metabonk_gym.think.view import GameView

ENV_ID = "MetaBonk/BonkQuest-v0"


def oracle_win_rate(seeds: int = 20, env_id: str = ENV_ID, first_seed: int = 0) -> dict[str, Any]:
    """Oracle + follower on `seeds` seeds: win rate, mean steps and hits, follower cost."""
    env = gym.make(env_id)
    agent = make_think_agent(env, model_path="oracle")
    wins, steps, hits, act_time = 0, [], [], 0.0
    try:
        for seed in range(first_seed, first_seed + seeds):
            obs, info = env.reset(seed=seed)
            agent.reset(obs, info)
            n, done = 0, False
            while not done:
                t0 = time.perf_counter()
                action = agent.act(obs, info)
                act_time += time.perf_counter() - t0
                obs, _, terminated, truncated, info = env.step(action)
                n += 1
                done = terminated or truncated
            wins += int(bool(info.get("won")))
            steps.append(n)
            hits.append(int(info.get("hits", 0)))
    finally:
        agent.close()
        env.close()
    return {
        "oracle_seeds": seeds,
        "oracle_wins": wins,
        "oracle_win_rate": wins / seeds,
        "oracle_mean_steps": float(np.mean(steps)),
        "oracle_mean_hits": float(np.mean(hits)),
        "agent_ms_per_step": 1000 * act_time / max(1, sum(steps)),
    }


def _env_step_s(env: gym.Env, steps: int = 2000) -> float:
    rng = np.random.default_rng(0)
    actions = rng.integers(0, env.action_space.n, steps)  # type: ignore[attr-defined]
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - start) / steps


def _views(env: gym.Env, n: int) -> list[Any]:
    """`n` live game states a few random steps apart (so per-call prompts differ)."""
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=5)
    views = []
    for i in range(n):
        for _ in range(8):
            obs, _, terminated, truncated, info = env.step(int(rng.integers(0, env.action_space.n)))  # type: ignore[attr-defined]
            if terminated or truncated:
                obs, info = env.reset()
        view = GameView.capture(env, info, i, obs)
        _ = view.frame
        views.append(view)
    return views


def _time_engine(engine: Any, builder: Any, views: list[Any], timeout_s: float) -> dict[str, Any]:
    """Cold first call, then warm p50/p95 over the remaining views; validity counted."""
    latencies, valid, tokens = [], 0, []
    for view in views:
        request = builder.build(view, [], "benchmark", engine.vision)
        start = time.monotonic()
        completion = engine.complete(request, start + timeout_s)
        latencies.append(time.monotonic() - start)
        if completion.prompt_tokens:
            tokens.append(completion.prompt_tokens)
        try:
            parse_directive(completion.text, builder.adapter.spec)
            valid += 1
        except DirectiveError:
            pass
    warm = latencies[1:] or latencies
    return {
        "cold_s": latencies[0],
        "p50_s": statistics.median(warm),
        "p95_s": float(np.percentile(warm, 95)),
        "valid": f"{valid}/{len(views)}",
        "prompt_tokens": int(np.median(tokens)) if tokens else None,
    }


def think_latency(
    calls: int = 8,
    model_path: str | Path | None = None,
    mmproj_path: str | Path | None = None,
    server: bool = True,
    timeout_s: float = 120.0,
    env_id: str = ENV_ID,
) -> dict[str, Any]:
    """Think latency per engine against the env step time, on live BonkQuest prompts."""
    out: dict[str, Any] = {}
    tmp = tempfile.TemporaryDirectory(prefix="metabonk-bench-think-")
    env = gym.make(env_id)
    try:
        env.reset(seed=0)
        step_s = _env_step_s(env)
        out["env_step_ms"] = step_s * 1000
        adapter = adapter_for(env)
        builder = PromptBuilder(adapter, env.unwrapped.game_data.game_card())  # type: ignore[attr-defined]
        views = _views(env, calls)
        tiny = model_path is None
        if tiny:
            model_path, mmproj_path = write_tiny_pair(tmp.name)
        out["model"] = "tiny random llama (metabonk_gym.think.testing)" if tiny else str(model_path)
        model = Path(str(model_path))

        oracle = OracleStrategist(adapter)
        t0 = time.perf_counter()
        for view in views:
            oracle.request(view, [], "benchmark").result()
        oracle_s = (time.perf_counter() - t0) / len(views)
        out["oracle_mean_s"] = oracle_s
        out["oracle_env_steps_per_call"] = oracle_s / step_s

        runs: list[tuple[str, Any]] = [("llama_cpp_text", lambda: LlamaCppEngine(model))]
        if mmproj_path is not None:
            runs.append(("llama_cpp_vision", lambda: LlamaCppEngine(model, mmproj_path)))
        for name, factory in runs:
            engine = factory()
            try:
                figures = _time_engine(engine, builder, views, timeout_s)
            finally:
                engine.close()
            _put(out, name, figures, step_s)
        if server:
            with ServerProcess(model, engine="python") as url:
                engine = OpenAIEngine(url)
                try:
                    figures = _time_engine(engine, builder, views, timeout_s)
                finally:
                    engine.close()
            _put(out, "openai_server_text", figures, step_s)
    finally:
        env.close()
        tmp.cleanup()
    return out


def _put(out: dict[str, Any], name: str, figures: dict[str, Any], step_s: float) -> None:
    for key, value in figures.items():
        out[f"{name}_{key}"] = value
    out[f"{name}_env_steps_per_call"] = figures["p50_s"] / step_s


def run(
    seeds: int = 20,
    calls: int = 8,
    model_path: str | Path | None = None,
    mmproj_path: str | Path | None = None,
    server: bool = True,
) -> dict[str, Any]:
    """Both parts; see the module docstring."""
    result = oracle_win_rate(seeds)
    if calls > 0:
        result.update(think_latency(calls, model_path, mmproj_path, server))
    return result


#: Target of the ceiling: the oracle and the follower win at least this share of the seeds.
CEILING_TARGET = Target(">=", 0.9)
#: The latency figures' ids in `docs/figures/think.json`, and what each engine is.
ENGINES = {
    "llama_cpp_text": ("llama-text", "in-process llama-cpp-python, text, p50 / p95"),
    "llama_cpp_vision": (
        "llama-vision",
        "in-process llama-cpp-python, vision (mmproj chat handler), p50 / p95",
    ),
    "openai_server_text": (
        "openai-server",
        "llama-cpp-python's OpenAI server over loopback, p50 / p95",
    ),
}


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/think.json` (ids as there)."""
    rate, seeds = result["oracle_win_rate"], result["oracle_seeds"]
    name = "oracle strategist + `DirectiveFollower` on BonkQuest (the ceiling thinking can reach)"
    text = f"{result['oracle_wins']}/{seeds} wins, {result['oracle_mean_steps']:.0f} steps mean"
    rows = [
        {"id": "oracle-ceiling", "name": name, "value": round(rate, 3), "unit": "", "text": text}
    ]
    rows[0] |= CEILING_TARGET.record(rate)
    rows[0]["seeds"] = list(range(seeds))
    for key, (slug, words) in ENGINES.items():
        if f"{key}_p50_s" in result:
            p50, p95 = result[f"{key}_p50_s"], result[f"{key}_p95_s"]
            text = f"{p50:.2f} s / {p95:.2f} s ({result[f'{key}_valid']} schema-valid)"
            rows.append({"id": slug, "name": words, "value": round(p50, 3), "unit": "s"})
            rows[-1] |= {"text": text, "target": None, "met": None}
    return rows
