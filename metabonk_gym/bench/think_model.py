"""`metabonk bench think-model` and `bench think-play`: what a real language model is worth as System 2.

Two parts, each its own command so that each README row has one:

* **model** (`model_figures`): the game is played by the oracle for `episodes` episodes, and at
  each of its decision points (the state, its history and trigger) the model is asked the same
  question in process (llama-cpp-python, the prompt profile `profile`). Figures: prompt tokens
  per call, how many of them were evaluated and how many came from the KV cache (the constant
  system prompt first), latency p50/p95 in seconds (1 env, nothing else asked of the model),
  the share of answers that are schema-valid directives, that are sensible (the game adapter's
  `check` and `sensible`: a walkable target that is not the player's own cell, an action the
  state allows), and that agree with the oracle (same action, tile target within 2 cells);
  with the choice profile also how often its first option (the nearest thing) agrees, the
  floor a model that always answers 1 would reach. `model` may be a rule instead of a GGUF
  (`first`, `random`: `metabonk_gym.think.baselines`), asked the same questions; `state` the
  start of the oracle's episodes (`riddles`: the riddle quest).
* **play** (`play_figures`): the think agent (strategist + the game's follower, pause mode)
  plays from each start state for `seeds` seeds: win rate and mean steps to a win. A start
  `roomN` (`riddles_roomN`) is won by leaving room N (room 5: by taking the treasure), `start`
  (`riddles`) by winning the whole game. Strategists: a GGUF, `oracle` (the ceiling), the rules
  `first` and `random` (the baselines) or `fallback` (the follower alone with its fallback
  directives, the floor).

>>> agrees({"action": "go_to", "target": {"x": 3, "y": 4}}, {"action": "go_to", "target": {"x": 5, "y": 5}})
True
>>> agrees({"action": "open", "target": None}, {"action": "open", "target": {"x": 1, "y": 1}})
False
>>> whole_game("riddles"), whole_game("riddles_room3"), whole_game("room5")
(True, False, True)
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.baselines import RULE_STRATEGISTS, RuleEngine, make_rule_strategist
from metabonk_gym.think.directive import DirectiveError, parse_answer
from metabonk_gym.think.engines import Engine, EngineError, LlamaCppEngine
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.models import check_gguf, resolve_model
from metabonk_gym.think.oracle import OracleStrategist
from metabonk_gym.think.prompts import HistoryItem, PromptBuilder, prompt_profile
from metabonk_gym.think.strategist import Strategist
from metabonk_gym.think.view import GameView

ENV_ID = "MetaBonk/BonkQuest-v0"
STARTS = ("room1", "room2", "room3", "room4", "room5", "start")
#: The riddle quest's whole game (`bench think-play --starts riddles`).
RIDDLE_STARTS = ("riddles",)


def agrees(a: dict[str, Any], b: dict[str, Any], cells: int = 2) -> bool:
    """Same action, and both targets absent, or both tiles at most `cells` apart (each axis),
    or the same menu option."""
    if a.get("action") != b.get("action"):
        return False
    ta, tb = a.get("target"), b.get("target")
    if not ta or not tb:
        return not ta and not tb
    if "x" in ta and "x" in tb:
        return abs(ta["x"] - tb["x"]) <= cells and abs(ta["y"] - tb["y"]) <= cells
    return bool(ta == tb)


class _Recorder(Strategist):
    """The oracle, keeping each question it was asked (state, history, trigger)."""

    name = "oracle"

    def __init__(self, oracle: OracleStrategist) -> None:
        self.oracle = oracle
        self.asked: list[tuple[GameView, list[HistoryItem], str]] = []

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> Any:
        self.asked.append((view, list(history), trigger))
        return self.oracle.request(view, history, trigger, note)


def decision_points(
    env_id: str = ENV_ID, episodes: int = 2, first_seed: int = 100, state: str = "start"
) -> tuple[list[tuple[GameView, list[HistoryItem], str]], Any]:
    """The oracle's decision points over `episodes` episodes (state, history, trigger), and
    the adapter."""
    env = gym.make(env_id, state=state)
    adapter = adapter_for(env)
    recorder = _Recorder(OracleStrategist(adapter))
    agent = make_think_agent(env, model_path="oracle")
    agent.director.strategist = recorder
    try:
        for seed in range(first_seed, first_seed + episodes):
            obs, info = env.reset(seed=seed)
            agent.reset(obs, info)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                done = terminated or truncated
    finally:
        agent.close()
        env.close()
    for view, _, _ in recorder.asked:
        _ = view.frame  # captured now, while the env is open
    return recorder.asked, adapter


def model_figures(
    model: str | Path | None = None,
    episodes: int = 2,
    profile: str = "auto",
    timeout_s: float = 300.0,
    env_id: str = ENV_ID,
    progress: Callable[[str], None] | None = None,
    n_threads: int | None = None,
    first_seed: int = 100,
    state: str = "start",
) -> dict[str, Any]:
    """The model part (see the module docstring); `n_threads`: llama.cpp's threads (None:
    the engine's default); `first_seed`: the first oracle episode's seed (and the `random`
    rule's)."""
    rule = str(model) if str(model) in RULE_STRATEGISTS else None
    path: Path | str = rule or check_gguf(resolve_model(model))
    points, adapter = decision_points(env_id, episodes, first_seed, state)
    builder = PromptBuilder(adapter, adapter.game_card(), profile=prompt_profile(profile, False))
    engine: Engine
    if rule is not None:
        engine, threads = RuleEngine(make_rule_strategist(rule, adapter, seed=first_seed)), 0
    else:
        engine = LlamaCppEngine(path, n_ctx=4096, n_threads=n_threads)
        threads = int(engine.llm.n_threads)
    rows: list[dict[str, Any]] = []
    try:
        for i, (view, history, trigger) in enumerate(points):
            request = builder.build(view, history, trigger, vision=False)
            start = time.monotonic()
            try:
                completion = engine.complete(request, start + timeout_s)
            except EngineError as exc:  # a timeout counts as a call that gave nothing
                rows.append(_gave_nothing(time.monotonic() - start))
                if progress is not None:
                    progress(f"call {i + 1}/{len(points)}: {exc}")
                continue
            latency = time.monotonic() - start
            rows.append(_judged(completion, request, adapter, view, latency))
            if progress is not None:
                progress(f"call {i + 1}/{len(points)}: {latency:.2f} s {completion.text}")
    finally:
        engine.close()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "model": str(path),
        "state": state,
        "profile": builder.profile,
        "n_threads": threads,
        "calls": len(rows),
        "timeouts": sum(r["prompt_tokens"] is None for r in rows),
        "timeout_s": timeout_s,
        **_call_figures(rows),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(load[0], 1),
    }


def _gave_nothing(latency: float) -> dict[str, Any]:
    """The row of a call that timed out or failed: no tokens, nothing valid."""
    return {
        "latency_s": latency,
        "prompt_tokens": None,
        "cached_tokens": 0,
        "valid": False,
        "sensible": False,
        "agrees": False,
    }


def _judged(
    completion: Any, request: Any, adapter: Any, view: Any, latency: float
) -> dict[str, Any]:
    """The row of one answer: its tokens, and whether it parses, makes sense in `view` and
    agrees with the game's oracle (and whether the first option would have)."""
    row: dict[str, Any] = {
        "latency_s": latency,
        "prompt_tokens": completion.prompt_tokens,
        "cached_tokens": completion.cached_tokens or 0,
    }
    oracle = adapter.advise(view)
    # the choice profile's floor: always its first option (the nearest thing)
    row["first_agrees"] = bool(
        request.choices
        and oracle is not None
        and agrees(request.choices[0].to_dict(), oracle.to_dict())
    )
    try:
        directive = parse_answer(completion.text, adapter.spec, request.choices)
        row["valid"] = True
        try:
            adapter.check(directive, view)
            reason = adapter.sensible(directive, view)
        except DirectiveError as exc:
            reason = str(exc)
        row["sensible"] = reason is None
        row["agrees"] = oracle is not None and agrees(directive.to_dict(), oracle.to_dict())
    except DirectiveError:
        row.update(valid=False, sensible=False, agrees=False)
    return row


def _call_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens and latency over the warm calls (all but the first), answers over all calls."""
    warm = rows[1:] or rows
    latencies = [float(r["latency_s"]) for r in warm]
    prompt = [int(r["prompt_tokens"]) for r in warm if r["prompt_tokens"]] or [0]
    cached = [int(r["cached_tokens"]) for r in warm if r["prompt_tokens"]] or [0]
    n = len(rows)
    return {
        "prompt_tokens_p50": statistics.median(prompt),
        "prompt_tokens_max": max(prompt),
        "evaluated_tokens_p50": statistics.median(p - c for p, c in zip(prompt, cached)),
        "cached_tokens_p50": statistics.median(cached),
        "cold_s": rows[0]["latency_s"],
        "latency_p50_s": statistics.median(latencies),
        "latency_p95_s": float(np.percentile(latencies, 95)),
        "schema_valid": sum(r["valid"] for r in rows) / n,
        "sensible": sum(r["sensible"] for r in rows) / n,
        "oracle_agreement": sum(r["agrees"] for r in rows) / n,
        "first_option_agreement": sum(r.get("first_agrees", False) for r in rows) / n,
    }


def room_won(start: str, first: dict[str, Any], info: dict[str, Any]) -> bool:
    """Whether an episode from `start` is won at `info` (see the module docstring).

    >>> room_won("room2", {"room": 2}, {"room": 3, "won": 0}), room_won("start", {}, {"won": 0})
    (True, False)
    """
    if info.get("won"):
        return True
    return not whole_game(start) and info.get("room") != first.get("room")


def whole_game(start: str) -> bool:
    """Whether a start is won only by winning the game (`start`, `riddles`, room 5's starts)."""
    return start in ("start", "riddles") or start.endswith("room5")


def play_figures(
    model: str,
    starts: Sequence[str] = STARTS,
    seeds: int = 20,
    first_seed: int = 0,
    max_steps: int = 600,
    timeout_s: float | None = None,
    env_id: str = ENV_ID,
    progress: Callable[[str], None] | None = None,
    log_dir: str | Path | None = None,
) -> dict[str, Any]:
    """The play part (see the module docstring): per start, the win rate and mean steps to a
    win, with the think calls, fallbacks, the think latency p50, the 1-minute load average at
    its end and the deadline and cooldown used (`timeout_s` None: calibrated,
    `metabonk_gym.think.calibrate`). `log_dir`: the agent's decision log goes to
    `log_dir/START` (what was asked and answered, to see why a game was lost)."""
    out: dict[str, Any] = {"model": model, "seeds": seeds, "max_steps": max_steps}
    out["first_seed"] = first_seed
    for start in starts:
        env = gym.make(env_id, state=start, max_episode_steps=max_steps)
        logs = None if log_dir is None else Path(log_dir) / start
        agent = make_think_agent(env, model_path=model, timeout_s=timeout_s, log_dir=logs)
        wins, steps, calls, fallbacks = 0, [], 0, 0
        started = time.monotonic()
        try:
            for seed in range(first_seed, first_seed + seeds):
                obs, info = env.reset(seed=seed)
                first = dict(info)
                agent.reset(obs, info)
                n, done, won = 0, False, False
                while not done and not won:
                    obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                    n += 1
                    won = room_won(start, first, info)
                    done = terminated or truncated
                wins += int(won)
                if won:
                    steps.append(n)
                if progress is not None:
                    progress(f"{start} seed {seed}: {'won' if won else 'lost'} in {n} steps")
            think = agent.director.info()
            calls, fallbacks = int(think.get("calls", 0)), int(think.get("fallbacks", 0))
            out[f"{start}_latency_p50_s"] = think.get("latency_p50_s")
            out.setdefault("timeout_s", agent.director.timeout_s)
            out.setdefault("cooldown_steps", agent.director.cooldown_steps)
        finally:
            agent.close()
            env.close()
        out[f"{start}_win_rate"] = wins / seeds
        out[f"{start}_steps_to_win"] = float(np.mean(steps)) if steps else None
        out[f"{start}_calls"] = calls
        out[f"{start}_fallbacks"] = fallbacks
        out[f"{start}_seconds"] = round(time.monotonic() - started, 1)
        out[f"{start}_load_avg_1m"] = (
            round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
        )
    return out


#: Targets of the win rate in a think-play figure by strategist: the ceiling, the rules (on the
#: riddle quest only), the floor.
PLAY_TARGETS = {"oracle": ">= 0.95", "first": "<= 0.3", "random": "<= 0.3", "fallback": "<= 0"}
#: A thinking model's (not the default one's) win-rate target on the riddle quest.
MODEL_RIDDLE_TARGET = ">= 0.8"
#: Latency target of a thinking model at 1 env (p50, seconds).
LATENCY_TARGET = 1.5


def strategist_label(model: str) -> str:
    """A short name of a strategist for a figure's id: a rule or `oracle` itself, `base` for
    the default model, `model-FOLDER` for a GGUF (its folder's name).

    >>> strategist_label("first"), strategist_label("default"), strategist_label("runs/ft1/model.gguf")
    ('first', 'base', 'model-ft1')
    """
    if model in (*RULE_STRATEGISTS, "oracle", "fallback"):
        return model
    if model in ("default", "", "None"):
        return "base"
    path = Path(model)
    name = path.parent.name if path.parent.name not in ("", ".") else path.stem
    return "model-" + "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")


def _met(value: float | None, target: str | None) -> bool | None:
    if value is None or target is None:
        return None
    op, number = target.split()
    return value >= float(number) if op == ">=" else value <= float(number)


def play_figure_records(
    result: dict[str, Any], baselines: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The figures of a `play_figures` result for `docs/figures/think-model.json`: one per
    start (`play-START-LABEL`), its win rate with steps, calls and latency, and the other
    strategists' figures of the same start already in the file beside it (`baselines`: figure
    id -> its `short`, wins and steps).

    >>> result = {"model": "first", "seeds": 20, "first_seed": 0, "max_steps": 600,
    ...           "riddles_win_rate": 0.0, "riddles_steps_to_win": None, "riddles_calls": 90,
    ...           "riddles_fallbacks": 0, "riddles_latency_p50_s": 0.0}
    >>> (r,) = play_figure_records(result, {"play-riddles-oracle": "20/20 (227 steps)"})
    >>> r["id"], r["value"], r["target"], r["met"], r["short"]
    ('play-riddles-first', 0.0, '<= 0.3', True, '0/20')
    >>> r["text"][:54]
    '0/20 (oracle 20/20 (227 steps), random not measured, f'
    >>> [r["target"] for r in play_figure_records({**result, "start_win_rate": 1.0})]
    ['<= 0.3', None]
    """
    label = strategist_label(str(result["model"]))
    seeds = int(result["seeds"])
    records = []
    for key in sorted(k for k in result if k.endswith("_win_rate")):
        start = key[: -len("_win_rate")]
        rate = float(result[key])
        steps = result.get(f"{start}_steps_to_win")
        latency = result.get(f"{start}_latency_p50_s")
        target = PLAY_TARGETS.get(label)
        if label in RULE_STRATEGISTS and not start.startswith("riddles"):
            target = None  # the classic quest lists the right option first: no rule target
        if target is None and label != "base" and start.startswith("riddles") and whole_game(start):
            target = MODEL_RIDDLE_TARGET
        others = [
            f"{name} {(baselines or {}).get(f'play-{start}-{name}', 'not measured')}"
            for name in ("oracle", "first", "random", "fallback", "base")
            if name != label
        ]
        wins = f"{round(rate * seeds)}/{seeds}"
        short = f"{wins} ({steps:.0f} steps)" if steps else wins
        text = (
            f"{result.get(f'{start}_calls')} calls, "
            f"{result.get(f'{start}_fallbacks')} fallbacks, think p50 "
            f"{latency if latency is None else round(float(latency), 2)} s at load "
            f"{result.get(f'{start}_load_avg_1m')}"
        )
        records.append(
            {
                "id": f"play-{start}-{label}",
                "name": f"think agent ({label} + follower) from `{start}`: win rate "
                f"({seeds} seeds, at most {result.get('max_steps')} steps)",
                "value": rate,
                "unit": "",
                "text": f"{short} ({', '.join(others)}); {text}",
                "short": short,
                "target": target,
                "met": _met(rate, target),
                "seeds": {"first": int(result.get("first_seed", 0)), "count": seeds},
            }
        )
    return records


def model_figure_records(result: dict[str, Any], episodes: int) -> list[dict[str, Any]]:
    """The figures of a `model_figures` result for `docs/figures/think-model.json`:
    agreement with the oracle (`agreement-STATE-LABEL`, beside always answering 1) and, for a
    model, the latency at 1 env (`latency-STATE-LABEL`, target p50 <= 1.5 s).

    >>> result = {"model": "first", "state": "riddles", "calls": 141, "oracle_agreement": 0.6,
    ...           "first_option_agreement": 0.6, "latency_p50_s": 0.0, "latency_p95_s": 0.0,
    ...           "prompt_tokens_p50": 410, "prompt_tokens_max": 479, "load_avg_1m": 9.7}
    >>> [r["id"] for r in model_figure_records(result, 10)]
    ['agreement-riddles-first']
    """
    label = strategist_label(str(result["model"]))
    state = str(result.get("state", "start"))
    seeds = {"first": 100, "count": episodes}
    agreement = float(result["oracle_agreement"])
    records = [
        {
            "id": f"agreement-{state}-{label}",
            "name": f"{label}: agreement with the oracle at its decision points from `{state}`",
            "value": round(agreement, 3),
            "unit": "",
            "text": f"{agreement:.2f} ({result['calls']} calls; always answering 1 scores "
            f"{float(result['first_option_agreement']):.2f} on them)",
            "target": None,
            "met": None,
            "seeds": seeds,
        }
    ]
    if label not in RULE_STRATEGISTS:
        p50 = float(result["latency_p50_s"])
        records.append(
            {
                "id": f"latency-{state}-{label}",
                "name": f"{label}: think latency at 1 env, p50 (one answer token, in process)",
                "value": round(p50, 2),
                "unit": "s",
                "text": f"p50 {p50:.2f} s, p95 {float(result['latency_p95_s']):.2f} s, prompt "
                f"tokens p50 / max {result['prompt_tokens_p50']} / {result['prompt_tokens_max']}"
                f", {result['calls']} calls at load {result['load_avg_1m']}",
                "target": f"<= {LATENCY_TARGET}",
                "met": p50 <= LATENCY_TARGET,
                "seeds": seeds,
            }
        )
    return records
