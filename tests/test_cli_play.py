"""A human playing in the window (SDL dummy driver, posted key events) and recording: closing the
window mid-episode saves the partial episode as truncated."""

from __future__ import annotations

import uuid

import minari
import pygame
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.record import play

QUEST = "MetaBonk/BonkQuest-v0"


def test_human_plays_and_closes_the_window_mid_episode() -> None:
    calls = {"n": 0}

    def keyboard() -> bool:
        """Called once per step: hold RIGHT, then close the window after a few steps."""
        calls["n"] += 1
        if calls["n"] == 1:
            pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_RIGHT))
        if calls["n"] == 6:
            pygame.event.post(pygame.event.Event(pygame.QUIT))
        return False

    dataset_id = f"test/human-{uuid.uuid4().hex[:8]}-v0"
    result = play(
        QUEST, "human", episodes=3, dataset_id=dataset_id, stop=keyboard, overrides={"downscale": 8}
    )
    assert result.stopped and result.partial == "saved as truncated" and result.saved_episodes == 1
    episode = next(minari.load_dataset(dataset_id).iterate_episodes())
    assert episode.truncations[-1] and not episode.terminations.any()
    assert set(episode.actions.tolist()) == {4}  # RIGHT held throughout
    assert episode.infos["player_x"][-1] > episode.infos["player_x"][0]


def test_play_command_shows_the_key_map_and_reports() -> None:
    result = CliRunner().invoke(
        app, ["play", QUEST, "--agent", "random", "--episodes", "1", "--max-steps", "5", "--window"]
    )
    assert result.exit_code == 0, result.output
    assert "ended" in result.output and "time limit" in result.output
    human = CliRunner().invoke(app, ["play", QUEST, "--state", "room9"])
    assert human.exit_code == 2 and "room9" in human.output  # key map, then the error
    from metabonk_gym.agents.human import KEY_MAP

    rows = human.output.splitlines()
    for key, button in KEY_MAP.items():  # every key on a row with its GBA button
        assert any(key in row and button in row for row in rows), (key, button, human.output)
