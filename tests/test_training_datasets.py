"""Datasets that do not fit: actions of another space, and damaged files. Both fail with a clear
`DatasetError` before anything is written to the run directory."""

from __future__ import annotations

import uuid
from pathlib import Path

import gymnasium as gym
import minari
import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.record import record
from metabonk_gym.training.bc import train_bc
from metabonk_gym.training.datasets import datasets_root, load_dataset
from metabonk_gym.training.errors import DatasetError

QUEST = "MetaBonk/BonkQuest-v0"
SMALL = {"downscale": 8, "frame_stack": 2, "features_dim": 32, "bc_epochs": 1}


def new_id(name: str) -> str:
    return f"test/{name}-{uuid.uuid4().hex[:8]}-v0"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_bc_refuses_a_dataset_of_another_action_space(tmp_path: Path) -> None:
    dataset_id = new_id("buttons")
    result = record(
        QUEST,
        "random",
        dataset_id,
        episodes=1,
        overrides={"env_kwargs": {"action_space": "multibinary"}, "max_episode_steps": 6},
    )
    assert result.saved_episodes == 1
    ds = minari.load_dataset(dataset_id)
    assert ds.spec.action_space == gym.spaces.MultiBinary(10)
    episode = next(ds.iterate_episodes())
    assert episode.actions.shape == (6, 10) and set(np.unique(episode.actions)) <= {0, 1}
    assert "expert_action" not in episode.infos, "button arrays are not Discrete labels"

    run_dir = tmp_path / "bc"
    with pytest.raises(
        DatasetError,
        match=rf"dataset {dataset_id} has actions MultiBinary\(10\) but {QUEST} has Discrete\(6\)",
    ):
        train_bc(QUEST, dataset_id, run_dir, overrides=SMALL)
    assert not run_dir.exists()


def test_truncated_dataset_file_cannot_be_read_and_changes_nothing(tmp_path: Path) -> None:
    dataset_id = new_id("damaged")
    record(QUEST, "random", dataset_id, episodes=2, overrides={"max_episode_steps": 5})
    assert load_dataset(dataset_id).total_episodes == 2  # readable while whole
    data = next((datasets_root() / dataset_id / "data").glob("main_data.*"))
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) // 2])  # a copy cut short

    with pytest.raises(DatasetError, match=f"dataset {dataset_id} cannot be read"):
        load_dataset(dataset_id)
    run_dir = tmp_path / "bc"
    run_dir.mkdir()  # an empty run directory is a valid place for a new run
    (tmp_path / "other").mkdir()
    before = snapshot(tmp_path)
    with pytest.raises(DatasetError, match="cannot be read"):
        train_bc(QUEST, dataset_id, run_dir, overrides=SMALL)
    cli = CliRunner().invoke(
        app, ["train", "bc", QUEST, "--dataset", dataset_id, "--run-dir", str(run_dir)]
    )
    assert cli.exit_code == 2 and "cannot be read" in cli.output
    assert snapshot(tmp_path) == before and not any(run_dir.iterdir())

    data.unlink()  # the data file gone, its metadata left: still a damaged dataset, not a missing one
    with pytest.raises(DatasetError, match="cannot be read"):
        load_dataset(dataset_id)
