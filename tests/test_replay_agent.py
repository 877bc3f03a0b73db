"""`replay:SOURCE` agents (issues 33 and 34, the ladder items): an explorer archive's best
trajectory replayed in `metabonk ladder` reaches the archive's best score again on the real
core; a recorded Minari dataset replays to its recorded returns; a missing, foreign or corrupt
source is one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.training.explore import ExploreSettings, run_explore
from metabonk_gym.training.explore_archive import Archive

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


@pytest.fixture(scope="module")
def archive_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small exploration of room 1 (as tests/test_explore.py's, shorter)."""
    out = tmp_path_factory.mktemp("explore") / "quest"
    settings = ExploreSettings(n_envs=1, max_frames=6_000, seed=0, state="room1", game_seed=7)
    run_explore(QUEST, out, settings)
    return out / "archive.npz"


def ladder(args: list[str], out: Path) -> tuple[int, str, dict]:
    cli = runner.invoke(app, ["ladder", QUEST, *args, "--no-video", "--out", str(out)])
    data = json.loads((out / "ladder.json").read_text()) if cli.exit_code == 0 else {}
    return cli.exit_code, cli.output, data


def test_the_archive_replays_to_its_best_score_in_the_ladder(
    archive_path: Path, tmp_path: Path
) -> None:
    archive = Archive.load(archive_path)
    best = archive.best()
    assert archive.scores[best] > 0, archive.scores  # it found something worth replaying
    steps = len(archive.actions[best])
    code, output, data = ladder(
        ["--agents", f"random,replay:{archive_path}", "--state", "room1", "--episodes", "2"]
        + ["--max-steps", str(steps + 20)],
        tmp_path / "ladder",
    )
    assert code == 0, output
    cell = next(c for c in data["cells"] if c["agent"].startswith("replay:"))
    assert cell["kind"] == "replay" and isinstance(cell["rank"], int)
    replay = cell["replay"]
    assert replay["archive_score"] == archive.scores[best]
    for episode in replay["episodes"]:  # every recorded action played, then 20 no-ops
        assert episode["played_steps"] == episode["recorded_steps"] == steps
        assert episode["score_at_end"] == archive.scores[best]  # the best cell, reached again
    returns = [e["return"] for e in cell["episode_results"]]
    assert returns[0] == returns[1]  # open-loop from the archive's start: the same game
    said = " ".join(output.split())  # (the console wraps long lines)
    assert "then the no-op for 20 steps" in said, said
    assert f"(the archive: {archive.scores[best]:g})" in said, said
    assert "then the no-op for 20 steps" in (tmp_path / "ladder" / "ladder.md").read_text()


def test_a_recorded_dataset_replays_to_its_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    dataset = "metabonk/quest-replay-v0"
    cli = runner.invoke(
        app,
        ["record", QUEST, "--agent", "random", "--episodes", "2", "--seed", "5"]
        + ["--dataset", dataset, "--max-steps", "60"],
    )
    assert cli.exit_code == 0, cli.output
    from metabonk_gym.training.datasets import load_dataset

    recorded = [float(np.sum(e.rewards)) for e in load_dataset(dataset).iterate_episodes()]
    assert len(recorded) == 2
    code, output, data = ladder(
        ["--agents", f"replay:{dataset}", "--episodes", "3", "--goal", "config"]
        + ["--max-steps", "60"],
        tmp_path / "ladder",
    )
    assert code == 0, output
    (cell,) = data["cells"]
    results = cell["episode_results"]
    assert [r["seed"] for r in results] == [5, 6, 5]  # episode i: the dataset's i mod 2
    assert [r["return"] for r in results] == pytest.approx([*recorded, recorded[0]])
    # by path, as by id
    folder = tmp_path / "datasets" / dataset
    code, output, data = ladder(
        ["--agents", f"replay:{folder}", "--episodes", "1", "--goal", "config"]
        + ["--max-steps", "60"],
        tmp_path / "ladder2",
    )
    assert code == 0, output
    assert data["cells"][0]["episode_results"][0]["return"] == pytest.approx(recorded[0])


def one_line_error(args: list[str], tmp_path: Path, message: str) -> None:
    out = tmp_path / "ladder"
    cli = runner.invoke(
        app, ["ladder", QUEST, "--episodes", "1", "--no-video", *args, "--out", str(out)]
    )
    assert cli.exit_code == 2, cli.output
    lines = cli.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in cli.output, lines
    assert not (out / "ladder.json").exists()


def test_bad_sources_are_one_line_errors(archive_path: Path, tmp_path: Path) -> None:
    one_line_error(["--agents", f"replay:{tmp_path / 'none.npz'}"], tmp_path, "archive not found")
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(archive_path.read_bytes()[:-100])
    one_line_error(["--agents", f"replay:{corrupt}"], tmp_path, "corrupt.npz")
    foreign = Archive.load(archive_path)
    foreign.meta["rom_sha1"] = "cd" * 20
    foreign.save(tmp_path / "foreign.npz")
    one_line_error(
        ["--agents", f"replay:{tmp_path / 'foreign.npz'}", "--state", "room1"],
        tmp_path,
        "was made on the ROM with SHA-1 cdcd",
    )
    one_line_error(
        ["--agents", f"replay:{archive_path}", "--state", "room2"], tmp_path, "--state room1"
    )
    one_line_error(["--agents", "replay:metabonk/no-such-v0"], tmp_path, "not found")
    one_line_error(["--agents", "replay:"], tmp_path, "replay: names nothing")
