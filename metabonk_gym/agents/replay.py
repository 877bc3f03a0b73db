"""`replay:SOURCE`: recorded actions played back open-loop, as an agent of the ladder.

What: `replay:ARCHIVE.npz` plays the best trajectory of a Go-Explore archive (`metabonk
explore`) from the archive's own start (its start state and game seed), so a deterministic env
reaches the archive's best cell again; `replay:DATASET` (a Minari dataset id or folder, e.g. a
person's play from `metabonk record ENV --agent human`) plays, in episode i, the actions of the
dataset's episode i mod N, reset with that episode's recorded seed. When the recorded actions
run out the agent takes the no-op (action 0) until the episode ends: every agent of a ladder
plays to the same episode limit, and the report says how many steps were no-ops
(`ReplayAgent.summary`, the ladder row's note). Why: the explorer's result and a person's
play rank beside the learned agents, on the same envs, with no new file format.

Nothing is unpickled: archives are read by `Archive.load` (checksummed, tied to their ROM),
datasets by Minari's Arrow/HDF5 storage, each episode up to `MAX_REPLAY_STEPS` actions.

>>> replay_source("replay:runs/explore/archive.npz"), replay_source("random")
('runs/explore/archive.npz', None)
>>> source_kind("runs/explore/archive.npz"), source_kind("metabonk/hat-person-v0")
('archive', 'dataset')
>>> replay_source("replay:")
Traceback (most recent call last):
...
metabonk_gym.errors.AgentError: replay: names nothing; use replay:ARCHIVE.npz (metabonk explore) or replay:DATASET_ID (metabonk record)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError
from metabonk_gym.gba.integration import rom_sha1
from metabonk_gym.training.datasets import (
    MAX_DATASET_META_BYTES,
    check_dataset_fits,
    check_dataset_id,
    load_dataset,
)
from metabonk_gym.training.explore_archive import Archive

#: The prefix of a replay agent's spec.
PREFIX = "replay:"
#: The most actions one replayed episode may hold.
MAX_REPLAY_STEPS = 1_000_000


def replay_source(spec: str) -> str | None:
    """The archive or dataset of a `replay:SOURCE` spec; None for any other spec."""
    if not spec.startswith(PREFIX):
        return None
    source = spec[len(PREFIX) :].strip()
    if not source:
        raise AgentError(
            "replay: names nothing; use replay:ARCHIVE.npz (metabonk explore) or "
            "replay:DATASET_ID (metabonk record)"
        )
    return source


def source_kind(source: str) -> str:
    """ "archive" for a `.npz` or any existing file, else "dataset" (an id or a folder)."""
    path = Path(source).expanduser()
    return "archive" if source.endswith(".npz") or path.is_file() else "dataset"


@dataclass
class Recording:
    """What a replay plays: episodes of actions, each with how its episode starts.

    Args:
        kind: "archive" or "dataset".
        source: the archive path or dataset id/folder as given.
        episodes: the actions of each episode.
        seeds: each episode's reset seed (None: the ladder's).
        options: reset options of every episode (the archive's start state and game seed).
        state: the start state it was recorded from (None: unknown).
        frameskip: emulator frames per action it was recorded with (None: unknown).
        score: the archive's best score and the variable it reads (archives only).
    """

    kind: str
    source: str
    episodes: list[np.ndarray]
    seeds: list[int | None]
    options: dict[str, Any] | None = None
    state: str | None = None
    frameskip: int | None = None
    score: dict[str, Any] = field(default_factory=dict)


def _capped(actions: np.ndarray, where: str) -> np.ndarray:
    if len(actions) > MAX_REPLAY_STEPS:
        raise AgentError(
            f"{where} holds {len(actions)} actions; a replay plays at most {MAX_REPLAY_STEPS}"
        )
    return actions


def read_archive(source: str, rom: str | None = None) -> Recording:
    """The best trajectory of the archive at `source` (refused when made on a ROM other than
    `rom`'s SHA-1, by the archive's own check)."""
    archive = Archive.load(source, rom_sha1=rom)
    best = archive.best()
    meta = archive.meta
    cells = meta.get("cells")
    cells = cells if isinstance(cells, dict) else {}
    actions = _capped(np.asarray(archive.actions[best], np.int64), f"{source}'s best trajectory")
    return Recording(
        kind="archive",
        source=source,
        episodes=[actions],
        seeds=[None],
        options={"state": meta.get("state"), "game_seed": int(meta.get("game_seed", 0))},
        state=meta.get("state"),
        frameskip=int(meta["frameskip"]) if meta.get("frameskip") is not None else None,
        score={
            "archive": float(archive.scores[best]),
            "variable": cells.get("score"),
            "won": bool(archive.won[best]),
        },
    )


def open_dataset(source: str) -> Any:
    """A Minari dataset by id (the datasets root) or by folder (holding `data/`)."""
    folder = Path(source).expanduser()
    if not folder.is_dir():
        return load_dataset(check_dataset_id(source))
    import minari

    meta = folder / "data" / "metadata.json"
    if not meta.is_file():
        raise AgentError(f"{folder} is a folder but not a Minari dataset (no data/metadata.json)")
    if meta.stat().st_size > MAX_DATASET_META_BYTES:
        raise AgentError(f"{meta} is larger than {MAX_DATASET_META_BYTES} bytes: not a dataset")
    try:
        dataset = minari.MinariDataset(folder / "data")
        list(dataset.storage.get_episode_metadata(range(dataset.total_episodes)))
    except Exception as exc:
        raise AgentError(f"dataset {folder} cannot be read (corrupt?): {exc}") from None
    return dataset


def read_dataset(source: str, env: gym.Env | None = None, env_id: str | None = None) -> Recording:
    """Every episode's actions and reset seed of a dataset (checked against `env`'s actions
    and frameskip when given)."""
    dataset = open_dataset(source)
    if env is not None and env_id is not None:
        kwargs = check_dataset_fits(
            dataset, env_id, env.action_space, int(getattr(env.unwrapped, "frameskip", 1))
        )
    else:
        kwargs = dict((dataset.spec.env_spec.kwargs or {}) if dataset.spec.env_spec else {})
    metas = list(dataset.storage.get_episode_metadata(range(dataset.total_episodes)))
    if not metas:
        raise AgentError(f"dataset {source} holds no episode")
    for i, m in enumerate(metas):
        _capped(np.zeros(int(m.get("total_steps", 0)), np.uint8), f"episode {i} of {source}")
    episodes, seeds = [], []
    for i, episode in enumerate(dataset.iterate_episodes()):
        episodes.append(_capped(np.asarray(episode.actions), f"episode {i} of {source}"))
        seed = metas[i].get("seed")
        seeds.append(int(seed) if seed is not None else None)
    frameskip = kwargs.get("frameskip")
    return Recording(
        kind="dataset",
        source=source,
        episodes=episodes,
        seeds=seeds,
        state=kwargs.get("state"),
        frameskip=int(frameskip) if frameskip is not None else None,
    )


def check_replay(spec: str, state: str | None = None, frameskip: int | None = None) -> None:
    """Refuse (one line) a replay whose source is missing, corrupt or not recorded from the
    episodes' start `state` or with their `frameskip` (None: not checked here)."""
    source = replay_source(spec)
    if source is None:
        return
    if source_kind(source) == "archive":
        recording = read_archive(source)
    else:
        dataset = open_dataset(source)
        spec_kwargs = (dataset.spec.env_spec.kwargs or {}) if dataset.spec.env_spec else {}
        recording = Recording(
            "dataset",
            source,
            [],
            [],
            state=spec_kwargs.get("state"),
            frameskip=spec_kwargs.get("frameskip"),
        )
    check_start(recording, state, frameskip)


def check_start(recording: Recording, state: str | None, frameskip: int | None) -> None:
    """The episodes must start where the recording started, at its frameskip."""
    what = "explored" if recording.kind == "archive" else "recorded"
    if state is not None and recording.state is not None and state != recording.state:
        raise AgentError(
            f"{recording.source} was {what} from the start {recording.state!r}, these episodes "
            f"start at {state!r}; give --state {recording.state} so the replay plays its own game"
        )
    if (
        frameskip is not None
        and recording.frameskip is not None
        and frameskip != recording.frameskip
    ):
        raise AgentError(
            f"{recording.source} was {what} with frameskip {recording.frameskip}, these episodes "
            f"use {frameskip}; one action would mean another number of frames"
        )


class ReplayAgent:
    """Plays recorded actions open-loop (see the module docstring).

    Args:
        spec: `replay:ARCHIVE.npz` or `replay:DATASET`.
        env: the env it plays (its ROM, actions, start and frameskip must be the recording's).
        env_id: the env's id (datasets: checked against the one they were recorded on).
    """

    name = "replay"

    def __init__(self, spec: str, env: gym.Env, env_id: str | None = None) -> None:
        source = replay_source(spec)
        if source is None:
            raise AgentError(f"{spec!r} is not a replay:SOURCE spec")
        base: Any = env.unwrapped
        env_id = env_id or (env.spec.id if env.spec is not None else None)
        if source_kind(source) == "archive":
            rom = getattr(base, "rom_path", None)
            if rom is None:
                raise AgentError(f"{spec}: an archive replays on the GBA env it was explored on")
            self.recording = read_archive(source, rom_sha1(Path(rom)))
            n = int(getattr(env.action_space, "n", 0))
            if n and int(self.recording.episodes[0].max(initial=0)) >= n:
                raise AgentError(f"{source} takes actions this env does not have ({n} actions)")
        else:
            self.recording = read_dataset(source, env, env_id)
        check_start(
            self.recording, getattr(base, "state_name", None), getattr(base, "frameskip", None)
        )
        if float(getattr(base, "sticky_action_prob", 0.0)) > 0.0:
            raise AgentError(
                f"{spec}: sticky actions make a replay play another game; run it with "
                "sticky_action_prob 0"
            )
        self.env = env
        space = env.action_space
        self.noop: Any = (
            0 if isinstance(space, gym.spaces.Discrete) else np.zeros(space.shape, space.dtype)
        )
        self.actions = self.recording.episodes[0]
        self.step = 0
        self.score_at_end: float | None = None
        self.episodes: list[dict[str, Any]] = []

    def episode_start(
        self, index: int, seed: int | None
    ) -> tuple[int | None, dict[str, Any] | None]:
        """The reset seed and options of episode `index`: the recorded episode's own start
        (`rollout.run_episode` asks an agent that has this method)."""
        i = index % len(self.recording.episodes)
        self.actions = self.recording.episodes[i]
        recorded = self.recording.seeds[i]
        options = dict(self.recording.options) if self.recording.options else None
        return (recorded if recorded is not None else seed), options

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self.step = 0
        self.score_at_end = None

    def _mark_end(self) -> None:
        variable = self.recording.score.get("variable")
        if variable and self.score_at_end is None and hasattr(self.env.unwrapped, "read_variable"):
            self.score_at_end = float(self.env.unwrapped.read_variable(variable))

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        if self.step == len(self.actions):
            self._mark_end()
        self.step += 1
        if self.step <= len(self.actions):
            action = self.actions[self.step - 1]
            return int(action) if np.ndim(action) == 0 else np.asarray(action)
        return self.noop

    def episode_end(self, info: dict[str, Any]) -> None:
        """Note how much of the recording the episode played (`rollout.run_episode` calls it)."""
        recorded = len(self.actions)
        if self.step == recorded:
            self._mark_end()
        played = min(self.step, recorded)
        self.episodes.append(
            {
                "recorded_steps": recorded,
                "played_steps": played,
                "noop_steps": max(0, self.step - recorded),
                "score_at_end": self.score_at_end if played == recorded else None,
            }
        )

    def summary(self) -> dict[str, Any]:
        """What the replay played, for reports: its source, each episode's recorded, played and
        no-op steps, and (an archive) the score its best cell has and the one reached; `note`
        says it in words."""
        out: dict[str, Any] = {
            "kind": self.recording.kind,
            "source": self.recording.source,
            "episodes": list(self.episodes),
            **({"options": self.recording.options} if self.recording.options else {}),
        }
        if self.recording.score:
            out["archive_score"] = self.recording.score.get("archive")
            out["score_variable"] = self.recording.score.get("variable")
        out["note"] = replay_note(out)
        return out


def replay_note(summary: dict[str, Any]) -> str:
    """A replay's summary in words (the ladder row's note): per episode, on average, the
    recorded actions played and the no-op steps after them.

    >>> replay_note({"kind": "archive", "episodes": [{"recorded_steps": 5, "played_steps": 5,
    ...     "noop_steps": 3, "score_at_end": 80.0}], "archive_score": 80.0})
    'played 5 of 5 recorded actions, then the no-op for 3 steps (per episode, mean of 1); score at the end of the recording 80 (the archive: 80)'
    """
    eps = summary.get("episodes") or []
    n = max(1, len(eps))
    recorded = sum(int(e["recorded_steps"]) for e in eps) / n
    played = sum(int(e["played_steps"]) for e in eps) / n
    noops = sum(int(e["noop_steps"]) for e in eps) / n
    text = f"played {played:g} of {recorded:g} recorded actions"
    text += f", then the no-op for {noops:g} steps" if noops else ""
    text += f" (per episode, mean of {len(eps)})"
    if played < recorded:
        text += "; some episodes ended before their recordings did"
    reached = [e.get("score_at_end") for e in eps if e.get("score_at_end") is not None]
    if summary.get("archive_score") is not None and reached:
        text += (
            f"; score at the end of the recording {max(reached):g} "
            f"(the archive: {summary['archive_score']:g})"
        )
    return text


def replay_summary(actor: Any) -> dict[str, Any] | None:
    """A replay agent's `summary()`; None for any other agent.

    >>> replay_summary(object()) is None
    True
    """
    return actor.summary() if isinstance(actor, ReplayAgent) else None


__all__ = ["ReplayAgent", "check_replay", "replay_source", "replay_summary"]
