"""`play` and `record`: run an agent (or a human) for episodes, optionally into a Minari dataset.

A window closed mid-episode, or Ctrl-C, ends the current episode early. With a dataset, that
partial episode is saved with its last step marked truncated when it has at least
`min_partial_steps` steps, or dropped otherwise; the result says which. Complete episodes are
never lost, and the dataset appears under its id only once recording has ended.

>>> RecordResult(saved_episodes=2).to_dict()["saved_episodes"]
2
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.agents.episode import episode_config
from metabonk_gym.agents.human import GameInputAgent, PlayWindow
from metabonk_gym.agents.human import require_display as check_display
from metabonk_gym.agents.registry import make_agent
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.experts.base import AgentError, close_agent
from metabonk_gym.process import graceful_stop_signals
from metabonk_gym.registration import env_traits
from metabonk_gym.training.datasets import DatasetWriter, check_dataset_id
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rollout import EpisodeResult, Trajectory, run_episode
from metabonk_gym.training.video import Mp4Stream


@dataclass
class RecordResult:
    """Episodes played, and what reached the dataset."""

    episodes: list[EpisodeResult] = field(default_factory=list)
    dataset_id: str | None = None
    dataset_path: Path | None = None
    saved_episodes: int = 0
    saved_steps: int = 0
    partial: str | None = None  # "saved as truncated" | "dropped" | None
    stopped: bool = False
    messages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": [e.to_dict() for e in self.episodes],
            "dataset_id": self.dataset_id,
            "dataset_path": str(self.dataset_path) if self.dataset_path else None,
            "saved_episodes": self.saved_episodes,
            "saved_steps": self.saved_steps,
            "partial": self.partial,
            "stopped": self.stopped,
            "messages": self.messages,
        }


def _graceful_interrupt(flag: dict[str, bool]) -> contextlib.AbstractContextManager[None]:
    """The first Ctrl-C or SIGTERM sets `flag["stop"]`: the episode ends cleanly and is saved,
    marked truncated (`process.graceful_stop_signals`; the command then exits 130 / 143); a
    second one kills at once."""

    def stop() -> None:
        flag["stop"] = True

    return graceful_stop_signals(stop)


def play(
    env_id: str,
    agent: str | AgentSpec = "human",
    *,
    episodes: int = 1,
    seed: int = 0,
    dataset_id: str | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    window: bool | None = None,
    min_partial_steps: int = 1,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    noise: float = 0.0,
    require_display: bool = False,
    video_dir: str | Path | None = None,
) -> RecordResult:
    """Play `episodes` episodes of `agent` ("human", "random", "scripted", "think", PATH.zip).

    `require_display` (the CLI sets it): a human with no display to see the window is refused
    with `AgentError` instead of recording an invisible game's no-ops (tests drive a human
    through SDL's dummy driver and posted key events, so the library default allows it).

    `window` shows a pygame window (always for "human"); `dataset_id` records a Minari dataset.
    Episode i uses reset seed `seed + i`. `stop()` returning True ends play like a closed window.
    `agent_kwargs` go to the agent's factory (e.g. `model_path` for "think"). `noise` replaces that
    fraction of actions by random ones (DART); datasets keep the agent's choices in
    `infos["expert_action"]`, which `train bc` learns. `video_dir` gets one mp4 per episode
    (`episode_NNNN.mp4`, full-size frames at the env's step rate: what a player would upload).
    """
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if not 0.0 <= noise < 1.0:
        raise ConfigError(f"--noise must be in [0, 1), not {noise}")
    if dataset_id is not None:
        check_dataset_id(dataset_id)
    spec = AgentSpec.parse(agent)
    cfg = episode_config(env_id, spec, config_file, overrides)
    # a person at the game itself (Megabonk's input snapshot): the env only watches, no window
    at_game = spec.kind == "human" and env_traits(env_id).human_input == "snapshot"
    at_window = spec.kind == "human" and not at_game
    env = make_env(env_id, cfg, render_mode=None, **({"send_actions": False} if at_game else {}))
    if require_display and at_window:
        try:
            check_display(spec.text)
        except Exception:
            env.close()
            raise
    session = _Session(env_id, env, cfg, RecordResult(dataset_id=dataset_id), at_game)
    try:
        if dataset_id is not None:
            session.writer = DatasetWriter(dataset_id, env, algorithm_name=f"metabonk:{spec}")
        if (window if window is not None else at_window) or at_window:
            session.window = PlayWindow(
                title=f"metabonk play {env_id} ({spec})", fps=60.0 / cfg.frameskip
            )
        kwargs: dict[str, Any] = dict(agent_kwargs or {})
        if at_window:
            kwargs["window"] = session.window
        session.actor = (
            GameInputAgent(env) if at_game else make_agent(spec, env, seed=seed, **kwargs)
        )
        with _graceful_interrupt(session.flag):
            for i in range(episodes):
                episode = session.episode(i, seed + i, episodes, stop, noise, video_dir)
                if on_episode is not None:
                    on_episode(episode)
                session.save(episode, min_partial_steps)
                if episode.stopped or session.dropped is not None:
                    session.result.stopped = True
                    break
    finally:
        session.close()
    if session.dropped is not None:  # after the episodes so far are published
        raise AgentError(f"{session.dropped}; {session.kept()}")
    return session.result


class _Session:
    """What one `play` holds open: the env, the agent, the dataset writer and the window.

    Args:
        env_id: the env's id (the window's title).
        env: the env.
        cfg: its config.
        result: what the episodes add to.
        at_game: a person plays at the game itself (the env only watches).
    """

    def __init__(
        self, env_id: str, env: Any, cfg: Any, result: RecordResult, at_game: bool
    ) -> None:
        self.env_id, self.env, self.cfg = env_id, env, cfg
        self.result, self.at_game = result, at_game
        self.writer: Any = None
        self.window: Any = None
        self.actor: Any = None
        self.traj: Trajectory | None = None
        self.flag = {"stop": False}
        self.dropped: str | None = None  # the game ended the connection: what happened

    def should_stop(self, stop: Callable[[], bool] | None) -> bool:
        """Whether to end the episode now: the window closed, `stop()` or a Ctrl-C."""
        if self.window is not None:
            self.window.pump()
            if self.window.closed:
                self.flag["stop"] = True
        if stop is not None and stop():
            self.flag["stop"] = True
        return self.flag["stop"]

    def episode(
        self,
        i: int,
        seed: int,
        episodes: int,
        stop: Callable[[], bool] | None,
        noise: float,
        video_dir: str | Path | None,
    ) -> EpisodeResult:
        """Play episode `i` (reset with `seed`), shown in the window and streamed to
        `video_dir/episode_NNNN.mp4` when given."""
        self.traj = Trajectory() if self.writer is not None else None
        stream = None
        if video_dir is not None:
            rate = env_traits(self.env_id).tick_hz or self.env.metadata.get("render_fps", 60)
            stream = Mp4Stream(Path(video_dir) / f"episode_{i:04d}.mp4", rate / self.cfg.frameskip)

        def frame_out(frame: Any) -> None:
            if self.window is not None and not self.window.closed:
                self.window.show(frame, f"episode {len(self.result.episodes) + 1}/{episodes}")
            if stream is not None:
                stream.add(frame)

        try:
            episode = run_episode(
                self.env,
                self.actor,
                index=i,
                seed=seed,
                trajectory=self.traj,
                on_frame=frame_out if self.window or stream else None,
                should_stop=lambda: self.should_stop(stop),
                noise=noise,
            )
        finally:
            if stream is not None:
                stream.close()
                self.result.messages.append(f"episode {i} video: {stream.path}")
        self.result.episodes.append(episode)
        return episode

    def save(self, episode: EpisodeResult, min_partial_steps: int) -> None:
        """Add the episode to the dataset (a stopped or dropped one as its rules say)."""
        traj = self.traj
        if self.at_game and episode.truncated:
            self.dropped = _game_dropped(episode.index, episode, traj)
        if self.writer is None or traj is None:
            return
        if self.dropped is not None:
            _keep_partial(self.writer, traj, episode, min_partial_steps, self.result)
            return
        if self.at_game:
            _played_actions(traj)
        _save(self.writer, traj, episode, min_partial_steps, self.result)

    def close(self) -> None:
        """Publish the dataset (when any episode reached it), close the window, agent and env."""
        writer, result = self.writer, self.result
        if writer is not None:
            result.dataset_path = writer.close()
            result.saved_episodes, result.saved_steps = writer.episodes, writer.steps
            if result.dataset_path is None:
                result.messages.append(
                    f"no episode was recorded, so dataset {result.dataset_id} was not created"
                )
            else:
                result.messages.append(
                    f"dataset {result.dataset_id}: {writer.episodes} episodes, {writer.steps} "
                    f"steps in {result.dataset_path}"
                )
        if self.window is not None:
            self.window.close()
        close_agent(self.actor)
        self.env.close()

    def kept(self) -> str:
        """What of a dropped recording was kept, in words."""
        result = self.result
        if result.dataset_path is None:
            return "no episode kept"
        return (
            f"{result.saved_episodes} episode(s), {result.saved_steps} steps kept in dataset "
            f"{result.dataset_id} ({result.dataset_path})"
        )


#: `info["truncation_reason"]` values that mean the game's connection ended mid-episode.
LOST_CONNECTION = ("disconnected", "timeout", "protocol_error")


def _game_dropped(index: int, episode: EpisodeResult, traj: Trajectory | None) -> str | None:
    """What happened when the game ended the connection mid-episode (a realtime game drops a
    client that stops reading), as one line, or None when the episode ended normally."""
    infos = traj.infos if traj is not None else []
    last = infos[-1] if infos else {}
    reason = last.get("truncation_reason")
    if reason not in LOST_CONNECTION:
        return None
    detail = f" ({last['error']})" if last.get("error") else ""
    return (
        f"the game ended the connection in episode {index} after {episode.length} steps: "
        f"{reason}{detail} (a realtime game drops a client that stops reading; record on a "
        "less loaded machine or with smaller frames)"
    )


def _keep_partial(
    writer: Any, traj: Trajectory, episode: EpisodeResult, min_steps: int, result: RecordResult
) -> None:
    """Save the steps of a dropped episode before the one that found the connection gone (its
    observation is a stale copy, its input partial or missing), marked truncated."""
    n = len(traj.actions) - 1
    while n and traj.infos[n].get("human_action") is None:
        n -= 1
    del traj.observations[n + 1 :], traj.infos[n + 1 :]
    for part in (traj.actions, traj.labels, traj.rewards, traj.terminations, traj.truncations):
        del part[n:]
    if n < max(1, min_steps):
        result.partial = "dropped"
        result.messages.append(f"episode {episode.index}: {n} steps before the drop: dropped")
        return
    _played_actions(traj)
    traj.truncations[-1] = True
    writer.add(traj, seed=episode.seed)
    result.partial = "saved as truncated"
    result.messages.append(
        f"episode {episode.index}: {n} steps before the drop: saved, marked truncated"
    )


def _played_actions(traj: Trajectory) -> None:
    """The person's input (`info["human_action"]` after each step) as the trajectory's actions."""
    played = [info.get("human_action") for info in traj.infos[1:]]
    if any(a is None for a in played):
        missing = sum(a is None for a in played)
        raise AgentError(
            f"{missing} of {len(played)} steps came without the game's input snapshot; the "
            "plugin's EnableInputSnapshot must stay on while recording"
        )
    traj.actions = [np.asarray(a, np.float32) if not isinstance(a, dict) else a for a in played]
    traj.labels = list(traj.actions)


def _save(
    writer: Any, traj: Trajectory, episode: EpisodeResult, min_steps: int, result: RecordResult
) -> None:
    if not episode.stopped:
        writer.add(traj, seed=episode.seed)
        return
    if len(traj.actions) >= max(1, min_steps):
        traj.truncations[-1] = True
        writer.add(traj, seed=episode.seed)
        result.partial = "saved as truncated"
        result.messages.append(
            f"episode {episode.index} was stopped after {len(traj.actions)} steps: saved, marked truncated"
        )
    else:
        result.partial = "dropped"
        result.messages.append(
            f"episode {episode.index} was stopped after {len(traj.actions)} steps (fewer than {max(1, min_steps)}): "
            "dropped"
        )


def record(
    env_id: str,
    agent: str | AgentSpec,
    dataset_id: str,
    *,
    episodes: int = 10,
    seed: int = 0,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    window: bool = False,
    min_partial_steps: int = 1,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    stop: Callable[[], bool] | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    noise: float = 0.0,
    require_display: bool = False,
    video_dir: str | Path | None = None,
) -> RecordResult:
    """Record `episodes` episodes of `agent` as the Minari dataset `dataset_id`.

    Observations are the env's as configured (the training defaults: for BonkQuest room1,
    grayscale 20x30), so `train bc` can use them as they are; pass
    `overrides={"obs_type": "rgb", "downscale": 1}` for full frames that convert to any setting.
    """
    return play(
        env_id,
        agent,
        episodes=episodes,
        seed=seed,
        dataset_id=dataset_id,
        config_file=config_file,
        overrides=overrides,
        window=window,
        min_partial_steps=min_partial_steps,
        on_episode=on_episode,
        stop=stop,
        agent_kwargs=agent_kwargs,
        noise=noise,
        require_display=require_display,
        video_dir=video_dir,
    )
