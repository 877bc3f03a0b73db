"""Episodes of one agent in many envs at once, on the shared-memory vector engine: what
`metabonk eval --n-envs N` runs for agents that see only observations (models, random).

Each episode keeps its own seed (`seed + index`, as one env at a time would play it; an agent
other than a model is made afresh per episode with that seed) and the results come back in
episode order, so a report does not depend on how many envs ran it or which finished first; a
deterministic model gives the report of one env. An agent that reads the emulator (the scripted experts) needs the env in
its own process: evaluate it with one env.

>>> from metabonk_gym.training.config import resolve_config
>>> cfg = resolve_config("MetaBonk/BonkArena-v0", None, {"obs_type": "state", "max_episode_steps": 5})
>>> results = play_parallel("MetaBonk/BonkArena-v0", "random", cfg, seeds=[0, 1, 2], n_envs=2)
>>> [(r.index, r.seed, r.length) for r in results]
[(0, 0, 5), (1, 1, 5), (2, 2, 5)]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from metabonk_gym.agents.registry import make_agent
from metabonk_gym.agents.runs import agent_path
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.envs import make_env, start_method
from metabonk_gym.training.rollout import EpisodeResult, info_numbers
from metabonk_gym.training.safeload import SpacesEnv
from metabonk_gym.vector import VecEngine, default_envs_per_worker
from metabonk_gym.vector.view import bind_views, tap_env_fns

#: Agents that act on observations alone, so they can run in this process beside many envs.
PARALLEL_AGENTS = ("random",)


def parallel_ok(agent: str) -> bool:
    """Whether `agent` (a name, a model path or a run directory) can act from observations
    alone."""
    return agent in PARALLEL_AGENTS or agent_path(agent).endswith(".zip")


def _result(
    index: int,
    seed: int,
    total: float,
    length: int,
    info: Mapping[str, Any],
    flags: tuple[bool, bool],
    game_seed: Any,
) -> EpisodeResult:
    terminated, truncated = flags
    return EpisodeResult(
        index=index,
        seed=seed,
        ret=total,
        length=length,
        success=bool(info.get("success", info.get("won", False))),
        won=bool(info.get("won", False)),
        lost=bool(info.get("lost", False)),
        terminated=terminated,
        truncated=truncated,
        game_seed=int(game_seed) if game_seed is not None else None,
        variables={k: v for k, v in info_numbers(info).items() if k != "success"},
    )


def play_parallel(
    env_id: str,
    agent: str,
    cfg: TrainConfig,
    seeds: Sequence[int],
    n_envs: int,
    *,
    agent_kwargs: Mapping[str, Any] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    step_timeout_s: float = 60.0,
) -> list[EpisodeResult]:
    """Play one episode per seed with `agent`, `n_envs` envs at a time; results in seed order.

    Args:
        env_id: the env.
        agent: "random" or a model path (agents that act on observations alone).
        cfg: the env's config (`episode_config`): wrappers, frame stacking, time limit.
        seeds: one episode per seed; episode `i` is reset with `seeds[i]`.
        n_envs: envs stepping at once.
        agent_kwargs: keyword arguments of the agent's factory (e.g. `deterministic`).
        on_episode: called with each episode's result as it ends (in the order they end).
        step_timeout_s: the longest one step may take (`EnvWorkerError` past it).
    """
    agent = agent_path(agent)  # a run directory: its model zip
    if not parallel_ok(agent):
        raise ValueError(
            f"agent {agent!r} reads the emulator, so it plays one env at a time; "
            f"with several envs use a model or one of {', '.join(PARALLEL_AGENTS)}"
        )
    n_envs = max(1, min(int(n_envs), len(seeds)))
    env_fns = tap_env_fns([partial(make_env, env_id, cfg, i) for i in range(n_envs)])
    engine = VecEngine(
        env_fns,
        envs_per_worker=default_envs_per_worker(env_id, n_envs),
        autoreset=AutoresetMode.DISABLED,
        info_keys=(),
        context=start_method(),
        step_timeout_s=step_timeout_s,
    )
    bind_views(env_fns, engine)  # a live viewer's frames (`--watch`)
    results: dict[int, EpisodeResult] = {}
    try:
        # a model agent stacks frames itself, as training did; each agent gets its own copy of
        # the spaces (a random agent seeds and samples its action space in place)
        obs_space, act_space = engine.single_observation_space, engine.single_action_space

        def spaces() -> SpacesEnv:
            return SpacesEnv(copy.deepcopy(obs_space), copy.deepcopy(act_space))

        kwargs = dict(agent_kwargs or {})
        # A model is loaded once per env (it keeps nothing between episodes but its frame
        # stack); any other agent is made afresh for each episode with that episode's seed, so
        # its actions do not depend on which env played the episode.
        per_env = agent.endswith(".zip")
        actors: list[Any] = [
            make_agent(agent, spaces(), seed=int(seeds[0]) + i, **kwargs) if per_env else None
            for i in range(n_envs)
        ]
        queue = list(enumerate(seeds))
        running: dict[
            int, list[Any]
        ] = {}  # env -> [episode index, seed, return, length, game seed]

        def start(env_ids: list[int]) -> None:
            todo = [(i, queue.pop(0)) for i in env_ids if queue]
            if not todo:
                return
            ids = [i for i, _ in todo]
            _, infos = engine.reset(ids, seeds=[int(s) for _, (_, s) in todo])
            for (i, (episode, seed)), info in zip(todo, infos):
                obs = _observe(engine.observations, i)
                if not per_env:
                    actors[i] = make_agent(agent, spaces(), seed=int(seed), **kwargs)
                actors[i].reset(obs, info)
                running[i] = [episode, int(seed), 0.0, 0, info.get("game_seed"), obs]

        start(list(range(n_envs)))
        while running:
            ids = sorted(running)
            actions = [actors[i].act(running[i][5], {}) for i in ids]
            engine.send(np.asarray(actions), ids)
            engine.recv()
            replies = engine.pop_replies(ids)
            finished = []
            for i in ids:
                state = running[i]
                state[2] += float(engine.rewards[i])
                state[3] += 1
                state[5] = _observe(engine.observations, i)
                terminated, truncated = bool(engine.terminations[i]), bool(engine.truncations[i])
                if terminated or truncated:
                    info = (replies.get(i) or {}).get("final_info") or {}
                    result = _result(
                        state[0],
                        state[1],
                        state[2],
                        state[3],
                        info,
                        (terminated, truncated),
                        state[4],
                    )
                    results[result.index] = result
                    if on_episode is not None:
                        on_episode(result)
                    del running[i]
                    finished.append(i)
            start(finished)
    finally:
        engine.close()
    return [results[i] for i in sorted(results)]


def _observe(batch: Any, i: int) -> Any:
    """Env `i`'s observation (a copy: the next step overwrites shared memory)."""
    if isinstance(batch, dict):
        return {key: value[i].copy() for key, value in batch.items()}
    return batch[i].copy()
