"""Play or evaluate one agent in many games at once, one process each (`--n-envs N`).

What: `play_many(env_id, agent, n_envs, ...)` and `evaluate_in_processes(...)` (what
`evaluate(..., n_envs=N)` runs for agents that need their own env) split the episodes between
`n_envs` worker processes (spawned: each makes its own env and agent), run `record.play` /
`sequential.play_sequential` there, and merge the episodes in order; episode i keeps reset seed
`seed + i`, so the report is the one a single process would give (videos too: each worker keeps
its best and worst, the overall best and worst are among them). With `--agent think --server URL` every
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
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from metabonk_gym.agents.record import RecordResult, play
from metabonk_gym.agents.sequential import Played, play_sequential
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rollout import EpisodeResult


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
    env_id: str, agent: AgentSpec, first: int, count: int, seed: int, kwargs: dict[str, Any]
) -> RecordResult:
    result = play(env_id, agent, episodes=count, seed=seed + first, window=False, **kwargs)
    result.episodes = _shifted(result.episodes, first)
    return result


def _pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def play_many(
    env_id: str,
    agent: str | AgentSpec,
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
    spec = AgentSpec.parse(agent)
    kwargs = {
        "config_file": config_file,
        "overrides": dict(overrides or {}),
        "agent_kwargs": dict(agent_kwargs or {}),
    }
    merged = RecordResult()
    with _pool(len(parts)) as pool:
        futures = [
            pool.submit(_play_worker, env_id, spec, first, count, seed, kwargs)
            for first, count in parts
        ]
        for future in futures:
            part = future.result()
            merged.episodes += part.episodes
            merged.stopped = merged.stopped or part.stopped
            merged.messages += part.messages
    return merged


def evaluate_in_processes(
    env_id: str,
    spec: AgentSpec,
    cfg: TrainConfig,
    n_envs: int,
    *,
    episodes: int,
    seed: int,
    video_dir: str | Path | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> Played:
    """Episodes `0 .. episodes - 1` (seeds `seed + i`) split between `n_envs` processes, each
    playing its share with `play_sequential` (its agent seeded `seed + first`); `on_episode`
    sees each part's results, in episode order, as the part ends."""
    parts = split_episodes(episodes, n_envs)
    kwargs: dict[str, Any] = {"video_dir": video_dir, "agent_kwargs": dict(agent_kwargs or {})}
    played: list[Played] = []
    with _pool(len(parts)) as pool:
        futures = [
            pool.submit(
                play_sequential, env_id, spec, cfg, first=first, count=count, seed=seed, **kwargs
            )
            for first, count in parts
        ]
        for future in futures:
            played.append(future.result())
            for result in played[-1].results:
                if on_episode is not None:
                    on_episode(result)
    return Played.merge(played)
