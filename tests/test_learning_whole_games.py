"""Learned agents for whole games (issue 22 items 3-4): DAgger from the screen-only teacher, the
`quest-full` and `arena` parts of `metabonk bench learning` run tiny end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.runs import find_run
from metabonk_gym.agents.whole_games import ARENA_TARGETS
from metabonk_gym.bench.figures import load_group
from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.target import describe
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.dagger import DaggerSettings, collect, teacher_class, train_dagger
from metabonk_gym.training.envs import make_env

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()
PIXELS = {"state": "start", "obs_type": "grayscale", "downscale": 8, "frame_stack": 2}
CELLS = {
    "state": "start",
    "obs_type": "rgb",
    "downscale": 1,
    "frame_stack": 2,
    "wrappers": [{"name": "pixel_cells"}],
    "features": "cells",
}


def test_screen_teacher_wins_the_whole_quest_without_the_sage() -> None:
    """The teacher a pixel policy copies finishes the game from `start` on its own (the game's
    win, not room 1's), without ever talking to the sage (what he says leaves the screen)."""
    cfg = resolve_config(QUEST, overrides={**PIXELS, "max_episode_steps": 1500})
    env = make_env(QUEST, cfg)
    try:
        teacher = teacher_class(env)(env)
        assert teacher.screen_only
        episodes = collect(env, teacher, 2, episodes=2, seed=7, noise=0.0)
        assert [e.won for e in episodes] == [True, True]
        assert all(e.variables["talked"] == 0 for e in episodes)
        assert all(e.variables["rooms_visited"] == 5 for e in episodes)
        assert episodes[0].obs.shape[1:] == (20, 30, 2)  # pixels only: 20x30 grey, 2 frames
    finally:
        env.close()


def test_dagger_relabels_the_policys_states_and_resumes(tmp_path: Path) -> None:
    """Round 1 runs the policy and labels its states with the teacher's actions; a finished run
    given again trains nothing more; the zip is a model `eval` loads with its own config."""
    settings = DaggerSettings(
        teacher_episodes=2, rounds=1, episodes_per_round=2, epochs_first=2, epochs_round=1
    )
    run = tmp_path / "run"
    lines: list[str] = []
    result = train_dagger(
        QUEST,
        run,
        settings=settings,
        overrides={**PIXELS, "max_episode_steps": 30},
        log=lines.append,
    )
    assert [line.split(":")[0] for line in lines] == [
        "dagger round 0/1 (teacher)",
        "dagger round 1/1 (policy)",
    ]
    with np.load(run / "data" / "round_001.npz") as data:
        assert data["obs"].shape == (60, 20, 30, 2) and data["obs"].dtype == np.uint8
        assert set(np.unique(data["labels"])) <= set(range(6))
    state = RunDir(run).read_state()
    assert state["rounds_done"] == 2 and state["status"] == "finished"
    assert result.num_timesteps == state["env_steps"] == 2 * 30 + 2 * 30
    meta = read_model_metadata(run / "model.zip")
    assert meta["algo"] == "dagger" and meta["config"]["obs_type"] == "grayscale"
    assert find_run(run).kind == "dagger"  # the ladder and eval name the trainer
    again: list[str] = []
    train_dagger(QUEST, run, log=again.append)
    assert again == []  # nothing left to do
    assert RunDir(run).read_state()["env_steps"] == state["env_steps"]
    # the same settings with one more round extend the finished run by that round only
    more: list[str] = []
    extended = DaggerSettings(**{**settings.__dict__, "rounds": 2})
    train_dagger(QUEST, run, settings=extended, log=more.append)
    assert [line.split(":")[0] for line in more][-1] == "dagger round 2/2 (policy)"
    assert len(more) == 2 and "extending" in more[0]
    after = RunDir(run).read_state()
    assert after["rounds_done"] == 3 and after["dagger"]["rounds"] == 2
    assert after["env_steps"] == state["env_steps"] + 2 * 30
    # other settings changed too: the run keeps its own and has nothing left to do
    other: list[str] = []
    train_dagger(QUEST, run, settings=DaggerSettings(rounds=5, noise=0.9), log=other.append)
    assert other == []


def test_ego_cells_dagger_records_the_players_cell(tmp_path: Path) -> None:
    """With `position`, every sample keeps the player's cell on the 20x30 grid, which is where
    the screen shows the player (the locator's labels); `EgoCellCNN` trains on them."""
    settings = DaggerSettings(
        teacher_episodes=1, rounds=0, epochs_first=1, position=["player_y", "player_x"]
    )
    run = tmp_path / "ego"
    train_dagger(
        QUEST,
        run,
        settings=settings,
        overrides={**CELLS, "features": "ego-cells", "max_episode_steps": 20},
        log=lambda _: None,
    )
    with np.load(run / "data" / "round_000.npz") as data:
        cells, obs = data["cells"], data["obs"]
    assert len(cells) == 20 and (cells >= 0).all()
    # the player's picture sits at the recorded cell in the newest frame: the recorded cell of
    # the first frame holds a code that no other cell of that frame has
    row, col = divmod(int(cells[0]), 30)
    newest = obs[0, :, :, 2].astype(np.int32) * 256 + obs[0, :, :, 3]
    assert (newest == newest[row, col]).sum() == 1
    meta = read_model_metadata(run / "model.zip")
    assert meta["config"]["features"] == "ego-cells"


def test_bench_learning_quest_full_small_prints_its_figure(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["bench", "learning", "quest-full", "--small", "--seeds", "2", "--out", str(tmp_path)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "quest-full figure: game win rate median" in result.output
    assert "seed 1: dagger round 1/1 (policy)" in result.output
    report = json.loads((tmp_path / "quest-full" / "seed0" / "eval.json").read_text())
    (entry,) = report.values()
    assert entry["state"] == "start" and entry["goal"] is None
    assert entry["scored_goal"].startswith("game_won")
    # a re-run resumes: both seeds are finished, so it only prints the figure again
    again = runner.invoke(
        app,
        ["bench", "learning", "quest-full", "--small", "--seeds", "2", "--out", str(tmp_path)],
        catch_exceptions=False,
    )
    assert "dagger round" not in again.output
    assert "quest-full figure" in again.output


def test_bench_learning_arena_small_prints_its_figure_and_writes_its_record(
    tmp_path: Path,
) -> None:
    """The smallest real `bench learning` run, with `--figures`: the record holds the median of
    the seeds, the target's words from `ARENA_TARGETS` and whether the printed result met it."""
    record_file = tmp_path / "learning.json"
    out = tmp_path / "runs"
    args = ["bench", "learning", "arena", "--small", "--seeds", "1", "--out", str(out)]
    result = runner.invoke(app, [*args, "--figures", str(record_file)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "arena figure: survival" in result.output
    assert "x random median" in result.output
    meta = read_model_metadata(out / "arena-dagger" / "seed0" / "model.zip")
    assert meta["config"]["obs_type"] == "state"
    printed = json.loads(result.output[result.output.rindex("\n{") :])["arena"]
    group = load_group(record_file)  # the schema's own reader: the record file is valid
    assert group.group == "learning" and group.title == "Proof that it learns"
    (figure,) = group.figures
    assert figure.id == "arena-dagger" and figure.unit == "x"
    assert figure.value == printed["survival_ratio_median"]
    assert figure.target == describe(ARENA_TARGETS) == printed["target"]
    assert figure.met is printed["passed"]
    assert figure.seeds == [0]
    assert figure.command == f"metabonk bench learning arena --out {out} --seeds 1 --small"
    assert figure.note is not None and figure.note.startswith("--small")
    assert figure.machine and figure.date and "median" in figure.text


def test_pixel_cells_tell_apart_pictures_one_grey_pixel_merges() -> None:
    """Two 8x8 pictures of the same mean grey are one value after `downscale 8` but two codes in
    `PixelCells`; equal pictures get equal codes in any process (no vocabulary)."""
    from metabonk_gym.wrappers.pixel_cells import cell_codes

    from metabonk_gym.preprocess import screen

    frame = np.zeros((8, 16, 3), np.uint8)
    frame[:4, :8] = 200  # top half bright
    frame[:, 8:] = 100  # flat: the same mean
    grey = screen(frame[None], "grayscale", 8)[0]
    assert grey[0, 0, 0] == grey[0, 1, 0]
    codes = cell_codes(frame)
    assert codes.shape == (1, 2, 2) and (codes[0, 0] != codes[0, 1]).any()
    assert (cell_codes(frame.copy()) == codes).all()


def test_pixel_cells_config_trains_a_cell_cnn_and_rejects_a_non_image(tmp_path: Path) -> None:
    """`wrappers: [pixel_cells]` + `features: cells`: DAgger's samples are codes, the policy is a
    `CellCNN` reading them unscaled, `eval` rebuilds the stack from the zip; a state-vector env
    is a clear error."""
    import gymnasium as gym
    import pytest
    from metabonk_gym.wrappers.pixel_cells import PixelCells

    from metabonk_gym.agents.evaluate import evaluate
    from metabonk_gym.training.policies import CellCNN, policy_kwargs

    run = tmp_path / "cells"
    train_dagger(
        QUEST,
        run,
        settings=DaggerSettings(teacher_episodes=1, rounds=0, epochs_first=1),
        overrides={**CELLS, "max_episode_steps": 20},
        log=lambda _: None,
    )
    with np.load(run / "data" / "round_000.npz") as data:
        assert data["obs"].shape == (20, 20, 30, 4)  # 2 code bytes x 2 frames per cell
    meta = read_model_metadata(run / "model.zip")
    assert meta["config"]["features"] == "cells"
    assert meta["config"]["wrappers"] == [{"name": "pixel_cells"}]
    kwargs = policy_kwargs(resolve_config(QUEST, overrides=CELLS))
    assert kwargs["features_extractor_class"] is CellCNN and kwargs["normalize_images"] is False
    report = evaluate(
        QUEST,
        str(run / "model.zip"),
        n_envs=1,
        episodes=1,
        seed=5,
        deterministic=True,
        goal="game",
        overrides={"max_episode_steps": 10},
    )
    assert report["episodes"][0]["length"] == 10
    env = gym.make("CartPole-v1")  # a float state vector, no frame
    with pytest.raises(ValueError, match="uint8"):
        PixelCells(env)
    env.close()
