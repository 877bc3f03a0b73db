"""`evaluate`: fixed-seed episodes of any agent, a JSON report, best/worst videos and a ladder.

Episode i is reset with seed `seed + i`, so two models evaluated with the same seed meet the same
game seeds (Megabonk: BonkLink v1 has no seed command; seed the game instead, e.g.
`bonklink-sim --seed S`; a report of an env whose info has `survival_time` adds each episode's).
Videos are streamed to disk while each episode runs (an episode is never held in memory); only the best and the worst are kept. The ladder is a JSON file of every evaluation so
far, ranked by win rate then mean return.

>>> summarize([{"return": 1.0, "won": True, "length": 5}, {"return": 3.0, "won": False, "length": 7}])
{'mean_return': 2.0, 'std_return': 1.0, 'win_rate': 0.5, 'mean_length': 6.0}
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.agents.episode import episode_config, scoring, with_goal
from metabonk_gym.agents.registry import make_agent
from metabonk_gym.agents.replay import replay_summary
from metabonk_gym.agents.runs import agent_path, describe
from metabonk_gym.experts.base import close_agent
from metabonk_gym.registration import env_traits
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.megabonk import check_reachable
from metabonk_gym.training.rollout import EpisodeResult, run_episode
from metabonk_gym.training.video import Mp4Stream
from metabonk_gym.utils import atomic_write_text


def check_writable(path: str | Path | None, flag: str, folder: bool = False) -> None:
    """Before any work: `ConfigError` unless a file can be written at `path` (or, `folder`,
    inside the folder `path`), so a long evaluation never ends in a failed write.

    >>> check_writable("/dev/null/report.json", "--out")
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ConfigError: --out /dev/null/report.json: /dev/null is a file, not a folder; choose a path in a folder you can write to
    """
    import tempfile

    if path is None:
        return
    path = Path(path).expanduser()
    target = path if folder else path.parent
    if not folder and path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; give a file name, e.g. {path}/report.json")
    missing = [p for p in (target, *target.parents) if not p.exists()]
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(
            f"{flag} {path}: {existing} is a file, not a folder; choose a path in a folder "
            "you can write to"
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".metabonk-write-check-"):
            pass
    except OSError as exc:
        reason = f"{exc.strerror}: {exc.filename!r}" if exc.filename else str(exc)
        raise ConfigError(
            f"{flag} {path}: cannot write there ({reason}); choose a path in a folder you can "
            "write to"
        ) from None
    finally:
        for made in missing:  # leave no empty folders behind from the check
            if made.is_dir() and not any(made.iterdir()):
                made.rmdir()


def summarize(episodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    returns = np.asarray([e["return"] for e in episodes], dtype=np.float64)
    return {
        "mean_return": float(returns.mean()) if len(returns) else 0.0,
        "std_return": float(returns.std()) if len(returns) else 0.0,
        "win_rate": float(np.mean([bool(e["won"]) for e in episodes])) if episodes else 0.0,
        "mean_length": float(np.mean([e["length"] for e in episodes])) if episodes else 0.0,
    }


def evaluate(
    env_id: str,
    agent: str,
    *,
    episodes: int = 10,
    seed: int = 0,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    video_dir: str | Path | None = None,
    ladder: str | Path | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    deterministic: bool = False,
    goal: str = "config",
) -> dict[str, Any]:
    """Evaluate `agent` (a model PATH.zip, a run directory of any trainer, "scripted",
    "random", ...) and return the report.

    A model samples its actions (`deterministic=False`, seeded per episode so reports repeat):
    PPO policies often loop forever when always taking their most likely action.

    `out` writes the report as JSON; `video_dir` keeps `best.mp4` and `worst.mp4`; `ladder`
    adds this evaluation to a ranking file. `goal` is what `won` scores: "config" (the config's
    goal) or "game" (the game's own win); the report's `scoring` says which.
    """
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if ladder is not None and Path(ladder).suffix != ".json":
        raise ConfigError(f"--ladder {ladder} must be a .json file")
    check_writable(out, "--out")
    check_writable(ladder, "--ladder")
    check_writable(video_dir, "--video", folder=True)
    cfg = with_goal(episode_config(env_id, agent, config_file, overrides), goal)
    spec, agent = agent, agent_path(agent)  # a run directory: its model zip (or Dreamer run)
    run_info = describe(spec)  # before any episode: a bad run fails first
    env = make_env(env_id, cfg)
    if env_traits(env_id).port_per_env:  # a quick clear error when no game answers
        try:
            check_reachable(cfg, n_envs=1)
        except Exception:
            env.close()
            raise
    results: list[EpisodeResult] = []
    actor: Any = None
    videos: dict[str, Any] = {}
    think: dict[str, Any] | None = None
    replay: dict[str, Any] | None = None
    kwargs = dict(agent_kwargs or {})
    is_model = Path(agent).expanduser().is_file()
    if is_model:
        kwargs.setdefault("deterministic", deterministic)
    try:
        actor = make_agent(agent, env, seed=seed, **kwargs)
        fps = 60.0 / cfg.frameskip
        kept: dict[int, Path] = {}
        for i in range(episodes):
            stream = None
            if video_dir is not None:
                stream = Mp4Stream(Path(video_dir) / f".episode_{i:04d}.mp4", fps)
            if is_model:
                _seed_torch(seed + i)  # sampled actions repeat for the same seed
            try:
                result = run_episode(
                    env, actor, index=i, seed=seed + i, on_frame=stream.add if stream else None
                )
            finally:
                if stream is not None:
                    stream.close()
            results.append(result)
            if stream is not None:
                kept[i] = stream.path
                _keep_extremes(kept, results)
            if on_episode is not None:
                on_episode(result)
        if video_dir is not None:
            videos = _publish_videos(kept, results, Path(video_dir))
        think = think_counts(actor)
        replay = replay_summary(actor)
    finally:
        close_agent(actor)
        env.close()
    report = make_report(env_id, spec, cfg.to_dict(), seed, results)
    if think is not None:
        report["think"] = think
    if replay is not None:
        report["replay"] = replay
    report["run"] = run_info
    report["scoring"] = scoring(cfg, goal)
    report["deterministic"] = bool(kwargs.get("deterministic", False)) if is_model else None
    report["videos"] = videos
    if out is not None:
        atomic_write_text(Path(out), json.dumps(report, indent=2))
    if ladder is not None:
        report["ladder_rank"] = update_ladder(Path(ladder), report)
    return report


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


def _seed_torch(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _order(results: list[EpisodeResult]) -> list[int]:
    """Episode indices from worst to best (success first, then return)."""
    return sorted(range(len(results)), key=lambda i: (results[i].success, results[i].ret, -i))


def _keep_extremes(kept: dict[int, Path], results: list[EpisodeResult]) -> None:
    order = _order(results)
    keep = {order[0], order[-1]}
    for index in list(kept):
        if index not in keep:
            kept.pop(index).unlink(missing_ok=True)


def _publish_videos(
    kept: dict[int, Path], results: list[EpisodeResult], folder: Path
) -> dict[str, Any]:
    order = _order(results)
    out: dict[str, Any] = {}
    for label, index in (("worst", order[0]), ("best", order[-1])):
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


def make_report(
    env_id: str, agent: str, config: dict[str, Any], seed: int, results: list[EpisodeResult]
) -> dict[str, Any]:
    episodes = [r.to_dict() for r in results]
    return {
        "env_id": env_id,
        "agent": agent,
        "state": config.get("state"),
        "reward": config.get("reward"),
        "goal": config.get("goal"),
        "seed": seed,
        "n_episodes": len(episodes),
        **summarize(episodes),
        "game_win_rate": float(np.mean([r.won for r in results])) if results else 0.0,
        **survival(results),
        "episodes": episodes,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def survival(results: Sequence[EpisodeResult]) -> dict[str, Any]:
    """Megabonk: each episode's survival time (game seconds, `info["survival_time"]`) and their
    mean; `{}` for envs without it.

    >>> survival([EpisodeResult(0, 0, 1.0, 5, False, variables={"survival_time": 2.0})])
    {'survival_times': [2.0], 'mean_survival_time': 2.0}
    """
    times = [r.variables.get("survival_time") for r in results]
    if not times or any(t is None for t in times):
        return {}
    values = [float(t) for t in times if t is not None]
    return {"survival_times": values, "mean_survival_time": float(np.mean(values))}


def _agent_name(agent: str) -> str:
    path = Path(agent)
    return str(path.resolve()) if agent.endswith(".zip") else agent


def update_ladder(path: Path, report: Mapping[str, Any]) -> int:
    """Add (or replace) this evaluation in the ladder file; returns its 1-based rank."""
    entries: list[dict[str, Any]] = []
    if path.exists():
        try:
            data = json.loads(path.read_text())
            entries = list(data.get("entries", []))
        except (json.JSONDecodeError, AttributeError) as exc:
            raise ConfigError(
                f"ladder file {path} is not a metabonk ladder ({exc}); choose another file"
            ) from exc
    entry = {
        "agent": _agent_name(str(report["agent"])),
        "env_id": report["env_id"],
        "state": report.get("state"),
        "reward": report.get("reward") if isinstance(report.get("reward"), str) else "custom",
        "seed": report["seed"],
        "episodes": report["n_episodes"],
        "win_rate": report["win_rate"],
        "mean_return": report["mean_return"],
        "std_return": report["std_return"],
        "created": report["created"],
    }
    same = ("agent", "env_id", "state", "reward", "seed", "episodes")
    entries = [e for e in entries if tuple(e.get(k) for k in same) != tuple(entry[k] for k in same)]
    entries.append(entry)
    entries.sort(key=lambda e: (-float(e["win_rate"]), -float(e["mean_return"])))
    atomic_write_text(path, json.dumps({"entries": entries}, indent=2))
    return entries.index(entry) + 1


def read_ladder(path: Path) -> list[dict[str, Any]]:
    """The ranked entries of a ladder file."""
    entries: list[dict[str, Any]] = json.loads(Path(path).read_text()).get("entries", [])
    return entries
