"""`evaluate`: fixed-seed episodes of any agent, a JSON report, best/worst videos and a ladder,
with one env or many (`n_envs`): the one evaluation behind `metabonk eval`, `metabonk ladder`
and the benches.

Episode i is reset with seed `seed + i`, so two models evaluated with the same seed meet the same
game seeds (Megabonk: BonkLink v1 has no seed command; seed the game instead, e.g.
`bonklink-sim --seed S`; a report of an env whose info has `survival_time` adds each episode's).
Videos are streamed to disk while each episode runs (an episode is never held in memory); only
the best and the worst are kept. The ladder is a JSON file of every evaluation so far, ranked by
win rate then mean return (`agents.ranking`: the format `metabonk ladder` writes too).

Where the episodes run (`n_envs`): one env in this process (`agents.sequential`); with more, the
random agent and a deterministic model on one shared-memory vector engine in this process
(`agents.parallel`), any other agent in `n_envs` processes (`agents.many`). Every feature
(videos, the ladder, think and replay counters) works with each.

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
from metabonk_gym.agents.many import evaluate_in_processes, split_episodes
from metabonk_gym.agents.parallel import evaluate_on_engine
from metabonk_gym.agents.ranking import update_ladder
from metabonk_gym.agents.sequential import Played, play_sequential, publish_videos
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rollout import EpisodeResult
from metabonk_gym.utils import atomic_write_text

__all__ = [
    "check_writable",
    "evaluate",
    "make_report",
    "play_episodes",
    "summarize",
    "survival",
]


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
    agent: str | AgentSpec,
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
    n_envs: int = 1,
    config: TrainConfig | None = None,
) -> dict[str, Any]:
    """Evaluate `agent` (a model PATH.zip, a run directory of any trainer, "scripted",
    "random", ..., or an `AgentSpec`) and return the report.

    A model samples its actions (`deterministic=False`, seeded per episode so reports repeat):
    PPO policies often loop forever when always taking their most likely action.

    `out` writes the report as JSON; `video_dir` keeps `best.mp4` and `worst.mp4`; `ladder`
    adds this evaluation to a ranking file. `goal` is what `won` scores: "config" (the config's
    goal) or "game" (the game's own win); the report's `scoring` says which. `n_envs` plays
    that many episodes at once (the module's docstring says where); the episodes are the ones
    one env gives, except the random agent's, which is made afresh per episode there. `config`:
    the episodes' config already resolved for this agent (`episode_config` of the same file and
    overrides, as the ladder plans its cells), so it is not resolved again.
    """
    check_outputs(episodes, n_envs, out, video_dir, ladder)
    spec = AgentSpec.parse(agent)
    if config is None:
        config = episode_config(env_id, spec, config_file, overrides)
    cfg = with_goal(config, goal)
    run_info = spec.describe()  # before any episode: a bad run fails first
    kwargs = dict(agent_kwargs or {})
    if spec.is_model:
        kwargs.setdefault("deterministic", deterministic)
    played = play_episodes(
        env_id,
        spec,
        cfg,
        episodes=episodes,
        seed=seed,
        n_envs=n_envs,
        video_dir=video_dir,
        agent_kwargs=kwargs,
        on_episode=on_episode,
    )
    videos = (
        publish_videos(played.kept, played.results, Path(video_dir))
        if video_dir is not None
        else {}
    )
    report = make_report(env_id, spec.text, cfg.to_dict(), seed, played.results)
    if played.think is not None:
        report["think"] = played.think
    if played.replay is not None:
        report["replay"] = played.replay
    report["run"] = run_info
    report["scoring"] = scoring(cfg, goal)
    report["deterministic"] = bool(kwargs.get("deterministic", False)) if spec.is_model else None
    report["videos"] = videos
    if n_envs != 1:
        report["n_envs"] = len(split_episodes(episodes, n_envs))
    if out is not None:
        atomic_write_text(Path(out), json.dumps(report, indent=2))
    if ladder is not None:
        report["ladder_rank"] = update_ladder(Path(ladder), report)
    return report


def play_episodes(
    env_id: str,
    spec: AgentSpec,
    cfg: TrainConfig,
    *,
    episodes: int,
    seed: int,
    n_envs: int,
    video_dir: str | Path | None,
    agent_kwargs: Mapping[str, Any],
    on_episode: Callable[[EpisodeResult], None] | None,
) -> Played:
    """Episodes `0 .. episodes - 1` of `spec` (seeds `seed + i`) where they run: one env here
    (`n_envs` 1); the random agent or a deterministic model on one vector engine here; any
    other agent in `n_envs` processes."""
    where: dict[str, Any] = {
        "video_dir": video_dir,
        "agent_kwargs": agent_kwargs,
        "on_episode": on_episode,
    }
    if n_envs == 1:
        return play_sequential(env_id, spec, cfg, first=0, count=episodes, seed=seed, **where)
    if spec.kind == "random" or (spec.is_model and agent_kwargs.get("deterministic")):
        # acts from observations alone and repeats without per-process torch seeds: all envs
        # on one shared-memory vector engine, the agent in this process
        return evaluate_on_engine(
            env_id, spec, cfg, episodes=episodes, seed=seed, n_envs=n_envs, **where
        )
    return evaluate_in_processes(env_id, spec, cfg, n_envs, episodes=episodes, seed=seed, **where)


def check_outputs(
    episodes: int,
    n_envs: int,
    out: str | Path | None,
    video_dir: str | Path | None,
    ladder: str | Path | None,
) -> None:
    """Before any work: the counts are positive and every output can be written.

    >>> check_outputs(0, 1, None, None, None)
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ConfigError: --episodes must be >= 1, not 0
    """
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if n_envs < 1:
        raise ConfigError(f"--n-envs must be >= 1, not {n_envs}")
    if ladder is not None and Path(ladder).suffix != ".json":
        raise ConfigError(f"--ladder {ladder} must be a .json file")
    check_writable(out, "--out")
    check_writable(ladder, "--ladder")
    check_writable(video_dir, "--video", folder=True)


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
