"""Megabonk learns offline (issue 27): demonstrations recorded from the game's own input
snapshot against a real realtime `bonklink-sim` (real TCP on loopback) whose keyboard is played by
a scripted person, a Box-action IDM and its labels, BC and the world model on Box actions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metabonk_gym.agents.record import record
from metabonk_gym.bonklink.actions import snapshot_to_action
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.experts.base import AgentError

pytestmark = pytest.mark.net

MEGABONK = "MetaBonk/Megabonk-v0"
FRAMES = {"obs_type": "rgb", "downscale": 2, "policy": "MultiInputPolicy"}


class LoggedSim:
    """A realtime sim with a scripted human whose every tick's input is logged."""

    def __init__(self, seed: int = 3, **kwargs: Any) -> None:
        self.sim = BonkLinkSim(port=0, human="scripted", seed=seed, input_snapshot=True, **kwargs)
        assert self.sim.player is not None
        self.played: list[np.ndarray] = []
        player, act = self.sim.player, self.sim.player.act

        def logged(game: Any) -> Any:
            action = act(game)
            self.played.append(snapshot_to_action(game.snapshot_of(action), "box"))
            return action

        player.act = logged  # type: ignore[method-assign]
        self.port = self.sim.start()

    def stop(self) -> None:
        self.sim.stop()


@pytest.fixture
def human_sim() -> Iterator[LoggedSim]:
    sim = LoggedSim(speed=4.0, jpeg_hz=15)
    try:
        yield sim
    finally:
        sim.stop()


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """`needle` (n, d) occurs as consecutive rows of `haystack`."""
    n = len(needle)
    return any(
        np.allclose(haystack[i : i + n], needle, atol=1e-6) for i in range(len(haystack) - n + 1)
    )


def test_record_human_at_the_game_stores_what_was_played(human_sim: LoggedSim, tmp_path: Path):
    import minari

    result = record(
        MEGABONK,
        "human",
        "test/mb-human-v0",
        episodes=2,
        overrides={**FRAMES, "base_port": human_sim.port, "max_episode_steps": 40, "frameskip": 1},
        video_dir=tmp_path / "videos",
    )
    assert result.saved_episodes == 2 and result.saved_steps == 80
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [
        "episode_0000.mp4",
        "episode_0001.mp4",
    ]
    played = np.asarray(human_sim.played)
    dataset = minari.load_dataset("test/mb-human-v0")
    moving = 0
    for episode in dataset.iterate_episodes():
        actions = np.asarray(episode.actions, np.float32)
        assert actions.shape == (40, 10)
        # the env sent nothing: every recorded action is the scripted person's, tick for tick
        assert _contains(played, actions)
        moving += int((np.hypot(actions[:, 0], actions[:, 1]) > 0.5).sum())
    assert moving > 0  # not all neutral


def test_human_steps_merge_the_ticks_they_span(human_sim: LoggedSim):
    import minari

    record(
        MEGABONK,
        "human",
        "test/mb-human4-v0",
        episodes=1,
        overrides={**FRAMES, "base_port": human_sim.port, "max_episode_steps": 30},
    )
    from metabonk_gym.bonklink.actions import merge_box_actions

    played = np.asarray(human_sim.played)
    actions = np.asarray(next(minari.load_dataset("test/mb-human4-v0").iterate_episodes()).actions)
    merged = [merge_box_actions(list(played[i : i + 4])) for i in range(len(played) - 3)]
    # each recorded step is 4 of the person's ticks, merged
    assert all(any(np.allclose(a, m, atol=1e-5) for m in merged) for a in actions)


def test_record_human_without_input_snapshot_is_one_line():
    # a person plays, but the plugin's EnableInputSnapshot is off: no HINP trailer
    sim = BonkLinkSim(port=0, seed=1, speed=4.0, human="scripted")
    port = sim.start()
    try:
        with pytest.raises(AgentError, match="EnableInputSnapshot") as info:
            record(
                MEGABONK,
                "human",
                "test/mb-none-v0",
                episodes=1,
                overrides={"base_port": port, "max_episode_steps": 10},
            )
        assert "\n" not in str(info.value)
    finally:
        sim.stop()
