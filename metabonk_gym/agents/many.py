"""Play or evaluate one agent in many games at once, one process each (`--n-envs N`).

What: `play_many(env_id, agent, n_envs, ...)` and `evaluate_many(...)` split the episodes between
`n_envs` worker processes (spawned: each makes its own env and agent), run `record.play` /
`evaluate.evaluate` there, and merge the episodes in order; episode i keeps reset seed `seed + i`,
so the report is the one a single process would give. With `--agent think --server URL` every
worker's think agent sends its requests to that one server (`metabonk serve-vlm`), which batches
them.
Why processes: each agent that reads the emulator (scripted experts) or waits for its own
answers (think) plays beside its env. A deterministic model and the random agent, which act on
observations alone, instead play all episodes from this process on the shared-memory vector
engine (`metabonk_gym.agents.parallel`).

>>> split_episodes(10, 4)
[(0, 3), (3, 3), (6, 2), (8, 2)]
>>> split_episodes(2, 16)
[(0, 1), (1, 1)]
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from metabonk_gym.agents.episode import episode_config, scoring, with_goal
from metabonk_gym.agents.evaluate import check_writable, evaluate, make_report
from metabonk_gym.agents.parallel import parallel_ok, play_parallel
from metabonk_gym.agents.record import RecordResult, play
from metabonk_gym.agents.runs import agent_path, describe
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rollout import EpisodeResult
from metabonk_gym.utils import atomic_write_text


def split_episodes(episodes: int, n_envs: int) -> list[tuple[int, int]]:
    """(first episode, count) per worker: contiguous, as even as possible, none empty."""
    if n_envs < 1:
        raise ConfigError(f"--n-envs must be >= 1, not {n_envs}")
    workers = min(n_envs, episodes)
    out, first = [], 0
    for k in range(workers):
        count = episodes // workers + (1 if k < episodes % workers else 0)
        out.append((first, count))
        first += count
    return out


def _shifted(episodes: list[EpisodeResult], first: int) -> list[EpisodeResult]:
    for episode in episodes:
        episode.index += first
    return episodes


def _play_worker(
    env_id: str, agent: str, first: int, count: int, seed: int, kwargs: dict[str, Any]
) -> RecordResult:
    result = play(env_id, agent, episodes=count, seed=seed + first, window=False, **kwargs)
    result.episodes = _shifted(result.episodes, first)
    return result


def _evaluate_worker(
    env_id: str, agent: str, first: int, count: int, seed: int, kwargs: dict[str, Any]
) -> list[EpisodeResult]:
    episodes: list[EpisodeResult] = []
    evaluate(env_id, agent, episodes=count, seed=seed + first, on_episode=episodes.append, **kwargs)
    return _shifted(episodes, first)


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def play_many(
    env_id: str,
    agent: str,
    n_envs: int,
    *,
    episodes: int = 1,
    seed: int = 0,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
) -> RecordResult:
    """`record.play` in `n_envs` processes at once (no window, no dataset); the merged result."""
    parts = split_episodes(episodes, n_envs)
    kwargs = {
        "config_file": config_file,
        "overrides": dict(overrides or {}),
        "agent_kwargs": dict(agent_kwargs or {}),
    }
    merged = RecordResult()
    with _pool(len(parts)) as pool:
        futures = [
            pool.submit(_play_worker, env_id, agent, first, count, seed, kwargs)
            for first, count in parts
        ]
        for future in futures:
            part = future.result()
            merged.episodes += part.episodes
            merged.stopped = merged.stopped or part.stopped
            merged.messages += part.messages
    return merged


def evaluate_many(
    env_id: str,
    agent: str,
    n_envs: int,
    *,
    episodes: int = 10,
    seed: int = 0,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    deterministic: bool = False,
    goal: str = "config",
) -> dict[str, Any]:
    """`evaluate.evaluate` in `n_envs` processes at once; the report of all episodes (written to
    `out` as JSON when given). Videos and ladders need one process: use `evaluate`. `goal`: what
    `won` scores ("config" or "game", as `evaluate`)."""
    import json

    check_writable(out, "--out")
    parts = split_episodes(episodes, n_envs)
    spec = agent
    cfg = with_goal(episode_config(env_id, spec, config_file, overrides), goal)
    agent = agent_path(spec)  # a run directory: its model zip (or Dreamer run)
    run_info = describe(spec)  # before any episode: a bad run fails first
    if agent == "random" or (parallel_ok(agent) and deterministic):
        # acts from observations alone and repeats without per-process torch seeds: all envs
        # on one shared-memory vector engine, the agent in this process
        played = play_parallel(
            env_id,
            agent,
            cfg,
            seeds=[seed + i for i in range(episodes)],
            n_envs=n_envs,
            agent_kwargs={**dict(agent_kwargs or {}), "deterministic": deterministic}
            if agent != "random"
            else agent_kwargs,
        )
        report = make_report(env_id, spec, cfg.to_dict(), seed, played)
        report["run"] = run_info
        report["scoring"] = scoring(cfg, goal)
        report["n_envs"] = len(parts)
        report["deterministic"] = deterministic if agent != "random" else None
        if out is not None:
            atomic_write_text(Path(out), json.dumps(report, indent=2))
        return report
    kwargs = {
        "config_file": config_file,
        "overrides": dict(overrides or {}),
        "agent_kwargs": dict(agent_kwargs or {}),
        "deterministic": deterministic,
        "goal": goal,
    }
    results: list[EpisodeResult] = []
    with _pool(len(parts)) as pool:
        futures = [
            pool.submit(_evaluate_worker, env_id, agent, first, count, seed, kwargs)
            for first, count in parts
        ]
        for future in futures:
            results += future.result()
    report = make_report(env_id, spec, cfg.to_dict(), seed, results)
    report["run"] = run_info
    report["scoring"] = scoring(cfg, goal)
    report["n_envs"] = len(parts)
    if out is not None:
        atomic_write_text(Path(out), json.dumps(report, indent=2))
    return report
