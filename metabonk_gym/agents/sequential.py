"""Episodes of one agent in one env, in this process: the core that `evaluate` runs at any
`n_envs` (here, or in each worker process of a pool).

What: `play_sequential(env_id, spec, cfg, first=F, count=C, seed=S)` makes the env and the agent
(seeded `S + F`), plays episodes `F .. F + C - 1` reset with seeds `S + F + i` and returns a
`Played`: the results, the videos kept (each episode is streamed to disk while it runs and only
the best and the worst so far are kept, so an episode is never held in memory) and the think and
replay counters. `Played.merge` joins the parts of a pool in episode order; `publish_videos`
names the overall best and worst. Why one core: one env, many processes and the ladder's cells
give the same episodes, videos and counters because they run the same code.

>>> results = [EpisodeResult(0, 0, 1.0, 5, False), EpisodeResult(1, 1, 3.0, 7, False)]
>>> worst_to_best(results)
[0, 1]
>>> merged = Played.merge([Played(results[:1]), Played(results[1:])])
>>> [r.index for r in merged.results], merged.think
([0, 1], None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.agents.registry import make_agent
from metabonk_gym.agents.replay import replay_note, replay_summary
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.experts.base import close_agent
from metabonk_gym.registration import env_traits
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.megabonk import check_reachable
from metabonk_gym.training.rollout import EpisodeResult, run_episode
from metabonk_gym.training.video import Mp4Stream


@dataclass
class Played:
    """The episodes of an evaluation (or of one part of it) and what came with them.

    Args:
        results: the episodes, in episode order.
        kept: episode index -> its video, for the best and the worst episode so far.
        think: a thinking agent's counters (`think_counts`); None for other agents.
        replay: a replay agent's summary (`agents.replay`); None for other agents.
    """

    results: list[EpisodeResult]
    kept: dict[int, Path] = field(default_factory=dict)
    think: dict[str, Any] | None = None
    replay: dict[str, Any] | None = None

    @staticmethod
    def merge(parts: Sequence[Played]) -> Played:
        """The parts of one evaluation (consecutive episodes each) as one: results in order,
        the overall best and worst videos kept, counters added up."""
        merged = Played([])
        for part in parts:
            merged.results += part.results
            merged.kept.update(part.kept)
            merged.think = _add_think(merged.think, part.think)
            merged.replay = _add_replay(merged.replay, part.replay)
        keep_extremes(merged.kept, merged.results)
        return merged


def _add_think(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return a or b
    reasons = dict(a.get("fallback_reasons") or {})
    for reason, count in (b.get("fallback_reasons") or {}).items():
        reasons[reason] = int(reasons.get(reason, 0)) + int(count)
    added = {k: int(a.get(k) or 0) + int(b.get(k) or 0) for k in ("calls", "answered", "fallbacks")}
    return {**added, "fallback_reasons": reasons, "dropped": int(a["dropped"]) + int(b["dropped"])}


def _add_replay(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if a is None or b is None:
        return a or b
    out = {**a, "episodes": list(a.get("episodes") or []) + list(b.get("episodes") or [])}
    out["note"] = replay_note(out)
    return out


def think_counts(actor: Any) -> dict[str, Any] | None:
    """A thinking agent's strategist counters over the evaluation (calls, how many answered,
    fallbacks by reason, requests dropped unanswered); None for an agent that does not think.

    >>> think_counts(object()) is None
    True
    """
    info = getattr(actor, "info", None)
    counters = info() if callable(info) else None
    if not isinstance(counters, dict) or "calls" not in counters:
        return None
    calls, fallbacks = int(counters.get("calls") or 0), int(counters.get("fallbacks") or 0)
    return {
        "calls": calls,
        "answered": calls - fallbacks,
        "fallbacks": fallbacks,
        "fallback_reasons": dict(counters.get("fallback_reasons") or {}),
        "dropped": int(counters.get("dropped") or 0),
    }


def seed_torch(seed: int) -> None:
    """Seed torch's sampling, so a model's sampled actions repeat for the same episode seed."""
    import torch

    torch.manual_seed(seed)


def worst_to_best(results: Sequence[EpisodeResult]) -> list[int]:
    """Episode indices from worst to best (success first, then return; the earlier of equals
    is the better)."""
    ordered = sorted(results, key=lambda r: (r.success, r.ret, -r.index))
    return [r.index for r in ordered]


def keep_extremes(kept: dict[int, Path], results: Sequence[EpisodeResult]) -> None:
    """Delete every kept video but the best and the worst episode's."""
    order = worst_to_best(results)
    keep = {order[0], order[-1]} if order else set()
    for index in list(kept):
        if index not in keep:
            kept.pop(index).unlink(missing_ok=True)


def publish_videos(
    kept: dict[int, Path], results: Sequence[EpisodeResult], folder: Path
) -> dict[str, Any]:
    """The best and worst episode's videos as `best.mp4` and `worst.mp4` in `folder` (the
    report's `videos`: paths and episode indices); the working copies are removed."""
    order = worst_to_best(results)
    out: dict[str, Any] = {}
    for label, index in (("worst", order[0]), ("best", order[-1])) if order else ():
        source = kept.get(index)
        if source is None or not source.exists():
            continue
        target = folder / f"{label}.mp4"
        target.write_bytes(source.read_bytes())
        out[label] = str(target)
        out[f"{label}_episode"] = int(index)
    for path in kept.values():
        path.unlink(missing_ok=True)
    return out


def episode_video(video_dir: Path, index: int, cfg: TrainConfig) -> Mp4Stream:
    """A working video of episode `index` (hidden until published), at the env's step rate."""
    return Mp4Stream(video_dir / f".episode_{index:04d}.mp4", 60.0 / cfg.frameskip)


def play_sequential(
    env_id: str,
    spec: AgentSpec,
    cfg: TrainConfig,
    *,
    first: int,
    count: int,
    seed: int,
    video_dir: str | Path | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> Played:
    """Play episodes `first .. first + count - 1` of `spec` in one env made here from `cfg`.

    The agent is made once with seed `seed + first`; episode i is reset with `seed + i` (a
    model's sampling is seeded with it too). `video_dir` streams each episode there and keeps
    the best and worst; `agent_kwargs` go to the agent's factory; `on_episode` is called with
    each result as it ends.
    """
    env = make_env(env_id, cfg)
    if env_traits(env_id).port_per_env:  # a quick clear error when no game answers
        try:
            check_reachable(cfg, n_envs=1)
        except Exception:
            env.close()
            raise
    played = Played([])
    actor: Any = None
    try:
        actor = make_agent(spec, env, seed=seed + first, **dict(agent_kwargs or {}))
        for i in range(first, first + count):
            stream = episode_video(Path(video_dir), i, cfg) if video_dir is not None else None
            if spec.is_model:
                seed_torch(seed + i)  # sampled actions repeat for the same seed
            try:
                result = run_episode(
                    env, actor, index=i, seed=seed + i, on_frame=stream.add if stream else None
                )
            finally:
                if stream is not None:
                    stream.close()
            played.results.append(result)
            if stream is not None:
                played.kept[i] = stream.path
                keep_extremes(played.kept, played.results)
            if on_episode is not None:
                on_episode(result)
        played.think = think_counts(actor)
        played.replay = replay_summary(actor)
    finally:
        close_agent(actor)
        env.close()
    return played
