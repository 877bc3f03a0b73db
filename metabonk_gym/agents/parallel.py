"""Episodes of one agent in many envs at once, on the shared-memory vector engine: what
`metabonk eval --n-envs N` runs for agents that see only observations (models, random).

Each episode keeps its own seed (`seed + index`, as one env at a time would play it; an agent
other than a model is made afresh per episode with that seed) and the results come back in
episode order, so a report does not depend on how many envs ran it or which finished first; a
deterministic model gives the report of one env. An agent that reads the emulator (the scripted
experts) needs the env in its own process (`agents.many`). `evaluate_on_engine` is what
`evaluate(..., n_envs=N)` runs here: the episodes, then the best and the worst played again in
one env from their seeds (the agent and env are seeded, so they repeat) for their videos.

>>> from metabonk_gym.training.config import resolve_config
>>> cfg = resolve_config("MetaBonk/BonkArena-v0", None, {"obs_type": "state", "max_episode_steps": 5})
>>> results = play_parallel("MetaBonk/BonkArena-v0", "random", cfg, seeds=[0, 1, 2], n_envs=2)
>>> [(r.index, r.seed, r.length) for r in results]
[(0, 0, 5), (1, 1, 5), (2, 2, 5)]
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from metabonk_gym.agents.registry import make_agent
from metabonk_gym.agents.runs import agent_path
from metabonk_gym.agents.sequential import Played, episode_video, worst_to_best
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.experts.base import close_agent
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.envs import make_env, start_method
from metabonk_gym.training.rollout import EpisodeResult, info_numbers, run_episode
from metabonk_gym.training.safeload import SpacesEnv
from metabonk_gym.vector import VecEngine, default_envs_per_worker
from metabonk_gym.vector.view import bind_views, tap_env_fns

#: Agents that act on observations alone, so they can run in this process beside many envs.
PARALLEL_AGENTS = ("random",)


def parallel_ok(agent: str | AgentSpec) -> bool:
    """Whether `agent` (a name, a model path or a run directory, or a parsed spec) can act from
    observations alone."""
    if isinstance(agent, AgentSpec):
        return agent.acts_on_observations
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


@dataclass
class _Running:
    """An episode under way in one env of the engine."""

    index: int
    seed: int
    game_seed: Any
    obs: Any
    ret: float = 0.0
    length: int = 0


class _EngineEpisodes:
    """One episode per seed on a running engine, `n_envs` at a time; each env takes the next
    seed when its episode ends.

    Args:
        engine: the vector engine (autoreset off).
        spec: the agent (random or a model).
        seeds: episode i is reset with `seeds[i]`.
        agent_kwargs: keyword arguments of the agent's factory.
        on_episode: called with each result as its episode ends.
    """

    def __init__(
        self,
        engine: VecEngine,
        spec: AgentSpec,
        seeds: Sequence[int],
        agent_kwargs: Mapping[str, Any],
        on_episode: Callable[[EpisodeResult], None] | None,
    ) -> None:
        self.engine, self.spec, self.kwargs = engine, spec, dict(agent_kwargs)
        self.on_episode = on_episode
        self.queue = list(enumerate(int(s) for s in seeds))
        self.running: dict[int, _Running] = {}
        self.results: dict[int, EpisodeResult] = {}
        # A model is loaded once per env (it keeps nothing between episodes but its frame
        # stack); any other agent is made afresh for each episode with that episode's seed, so
        # its actions do not depend on which env played the episode.
        self.per_env = spec.is_model
        first = int(seeds[0]) if len(seeds) else 0
        self.actors: list[Any] = [
            self._agent(first + i) if self.per_env else None for i in range(engine.num_envs)
        ]

    def _agent(self, seed: int) -> Any:
        # a model agent stacks frames itself, as training did; each agent gets its own copy of
        # the spaces (a random agent seeds and samples its action space in place)
        spaces = SpacesEnv(
            copy.deepcopy(self.engine.single_observation_space),
            copy.deepcopy(self.engine.single_action_space),
        )
        return make_agent(self.spec, spaces, seed=seed, **self.kwargs)

    def start(self, env_ids: list[int]) -> None:
        """Reset the given envs with the next seeds (an env with none left stays idle)."""
        todo = [(i, self.queue.pop(0)) for i in env_ids if self.queue]
        if not todo:
            return
        _, infos = self.engine.reset([i for i, _ in todo], seeds=[s for _, (_, s) in todo])
        for (i, (episode, seed)), info in zip(todo, infos):
            obs = _observe(self.engine.observations, i)
            if not self.per_env:
                self.actors[i] = self._agent(seed)
            self.actors[i].reset(obs, info)
            self.running[i] = _Running(episode, seed, info.get("game_seed"), obs)

    def step(self) -> list[int]:
        """One step of every running env; the envs whose episode ended."""
        engine, ids = self.engine, sorted(self.running)
        actions = [self.actors[i].act(self.running[i].obs, {}) for i in ids]
        engine.send(np.asarray(actions), ids)
        engine.recv()
        replies = engine.pop_replies(ids)
        finished = []
        for i in ids:
            state = self.running[i]
            state.ret += float(engine.rewards[i])
            state.length += 1
            state.obs = _observe(engine.observations, i)
            flags = (bool(engine.terminations[i]), bool(engine.truncations[i]))
            if any(flags):
                info = (replies.get(i) or {}).get("final_info") or {}
                result = _result(
                    state.index, state.seed, state.ret, state.length, info, flags, state.game_seed
                )
                self.results[result.index] = result
                if self.on_episode is not None:
                    self.on_episode(result)
                del self.running[i]
                finished.append(i)
        return finished

    def run(self) -> list[EpisodeResult]:
        """Every episode, in seed order."""
        self.start(list(range(self.engine.num_envs)))
        while self.running:
            self.start(self.step())
        return [self.results[i] for i in sorted(self.results)]


def play_parallel(
    env_id: str,
    agent: str | AgentSpec,
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
    spec = AgentSpec.parse(agent)
    if not spec.acts_on_observations:
        raise ValueError(
            f"agent {spec.weights!r} reads the emulator, so it plays one env at a time; "
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
    try:
        return _EngineEpisodes(engine, spec, seeds, agent_kwargs or {}, on_episode).run()
    finally:
        engine.close()


def evaluate_on_engine(
    env_id: str,
    spec: AgentSpec,
    cfg: TrainConfig,
    *,
    episodes: int,
    seed: int,
    n_envs: int,
    video_dir: str | Path | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> Played:
    """Episodes `0 .. episodes - 1` (seeds `seed + i`) on the vector engine; with `video_dir`,
    the best and the worst are played again in one env, from their seeds, for their videos."""
    results = play_parallel(
        env_id,
        spec,
        cfg,
        seeds=[seed + i for i in range(episodes)],
        n_envs=n_envs,
        agent_kwargs=agent_kwargs,
        on_episode=on_episode,
    )
    played = Played(results)
    if video_dir is not None:
        played.kept = replay_for_videos(env_id, spec, cfg, results, Path(video_dir), agent_kwargs)
    return played


def replay_for_videos(
    env_id: str,
    spec: AgentSpec,
    cfg: TrainConfig,
    results: Sequence[EpisodeResult],
    video_dir: Path,
    agent_kwargs: Mapping[str, Any] | None = None,
) -> dict[int, Path]:
    """The best and the worst of `results` played again in one env made here, each with a
    fresh agent seeded as on the engine, into working videos (`sequential.episode_video`); a
    replay that differs from its episode (an env that does not repeat) keeps no video."""
    order = worst_to_best(results)
    by_index = {r.index: r for r in results}
    kept: dict[int, Path] = {}
    env = make_env(env_id, cfg)
    try:
        for index in dict.fromkeys((order[0], order[-1])) if order else ():
            seed = by_index[index].seed
            actor = make_agent(spec, env, seed=seed, **dict(agent_kwargs or {}))
            stream = episode_video(video_dir, index, cfg)
            try:
                again = run_episode(env, actor, index=index, seed=seed, on_frame=stream.add)
            finally:
                stream.close()
                close_agent(actor)
            if again.to_dict() == by_index[index].to_dict():
                kept[index] = stream.path
            else:  # not the episode the report shows (an env that does not repeat): no video
                stream.discard()
    finally:
        env.close()
    return kept


def _observe(batch: Any, i: int) -> Any:
    """Env `i`'s observation (a copy: the next step overwrites shared memory)."""
    if isinstance(batch, dict):
        return {key: value[i].copy() for key, value in batch.items()}
    return batch[i].copy()
