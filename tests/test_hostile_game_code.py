"""A shared run directory runs no game code it names (issue 26): a run whose `config.yaml` and
model name a game folder with a `game.py` is refused in one line (exit code 2) by `eval`, `play`,
`record`, `ladder` and `train ppo --resume`, and `game.py` does not run; `--trust-game-folder`, or
naming the folder with `--integration`, runs it (a marker file written by the folder's `game.py`
shows which)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from one_line import one_line_error

from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.training.errors import UntrustedGameCodeError
from metabonk_gym.training.gamecode import check_game_code, named_game_folders
from metabonk_gym.training.ppo import train_ppo

GBA = "MetaBonk/GBA-v0"
#: PauseToThink asks the game's adapter (its folder's `game.py`) from the first reset on.
THINK = [{"name": "pause_to_think", "engine": "oracle"}]
FAST = {
    "n_envs": 1,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "features_dim": 32,
    "max_episode_steps": 20,
    "checkpoint_every": 0,
    "video_every": 0,
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(run directory, the game folder it names, the marker its game.py writes): the run is
    trained on a copy of BonkQuest's data, then the folder gains a `game.py`, as a run someone
    else made and shared would come with one."""
    root = tmp_path_factory.mktemp("shared")
    game = root / "Foreign"
    game.mkdir()
    source = bundled_game_folder("BonkQuest")
    for name in ("data.json", "scenario.json", "metadata.json", "metabonk.json", "rom.gba"):
        shutil.copy(source / name, game / name)
    run = root / "run"
    overrides = {**FAST, "total_steps": 32, "env_kwargs": {"integration": str(game)}}
    train_ppo(GBA, run, overrides={**overrides, "wrappers": THINK}, progress=False)
    marker = root / "game-py-ran.txt"
    (game / "game.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    )
    return run, game, marker


def _commands(run: Path, out: Path) -> list[list[str]]:
    short = ["--episodes", "1", "--max-steps", "5"]
    return [
        ["eval", GBA, str(run), *short],
        ["eval", GBA, str(run / "model.zip"), *short],
        ["play", GBA, "--agent", str(run), "--no-window", *short],
        ["record", GBA, "--dataset", "metabonk/shared-run-v0", "--agent", str(run), *short],
        ["ladder", GBA, "--agents", f"random,{run}", "--out", str(out), "--no-video", *short],
        ["train", "ppo", GBA, "--run-dir", str(run), "--resume", "--total-steps", "64"],
    ]


def test_the_run_and_its_model_name_the_folder(shared: tuple[Path, Path, Path]) -> None:
    run, game, _ = shared
    named = {(folder, source.name) for folder, source in named_game_folders(run)}
    assert {(game, "config.yaml"), (game, "model.zip")} <= named
    assert named_game_folders(run / "model.zip") == [(game, run / "model.zip")]


@pytest.mark.parametrize(
    "index", range(6), ids=["eval", "zip", "play", "record", "ladder", "resume"]
)
def test_each_command_refuses_the_game_code_in_one_line(
    shared: tuple[Path, Path, Path], tmp_path: Path, index: int
) -> None:
    run, game, marker = shared
    args = _commands(run, tmp_path / "ladder")[index]
    line = one_line_error(args)
    assert f"names the game folder {game}, whose game.py is Python code" in line
    assert "--trust-game-folder" in line and f"--integration {game}" in line
    assert not marker.exists(), "game.py ran although the command was refused"
    assert not (tmp_path / "ladder").exists()


def test_bundled_and_named_folders_pass(shared: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run, game, _ = shared
    check_game_code(run, named=[game])
    check_game_code(run, trust=True)
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    folder = bundled_game_folder("BonkQuest")  # has a game.py, and is the package's own
    (bundled / "config.yaml").write_text(f"env_kwargs:\n  integration: {folder}\n")
    check_game_code(bundled)
    with pytest.raises(UntrustedGameCodeError):
        check_game_code(run, named=[tmp_path])


@pytest.mark.parametrize("how", ["--trust-game-folder", "--integration"])
def test_trusting_or_naming_the_folder_runs_its_game_py(
    shared: tuple[Path, Path, Path], how: str
) -> None:
    """In a fresh process (the folder's module is not imported yet), so the marker shows that
    `game.py` ran for this command."""
    run, game, marker = shared
    marker.unlink(missing_ok=True)
    flag = [how] if how == "--trust-game-folder" else [how, str(game)]
    args = ["eval", GBA, str(run), "--episodes", "1", "--max-steps", "5", *flag]
    code = "import sys; from metabonk_gym.cli.main import app; app(sys.argv[1:])"
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.read_text() == "ran"


def test_a_decision_log_naming_a_game_folder_with_code_is_refused(
    shared: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`metabonk distill LOG` loads the game folder a decision log names (for its adapter): a
    folder with a `game.py` the user did not name is refused in one line, nothing written."""
    game = tmp_path / "Foreign"
    shutil.copytree(shared[1], game)
    marker = tmp_path / "log-game-py-ran.txt"  # the shared folder's marker: other tests run it
    (game / "game.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    )
    log = tmp_path / "log"
    log.mkdir()
    meta = {"type": "meta", "game": "Foreign", "game_folder": str(game)}
    (log / "decisions.jsonl").write_text(json.dumps(meta) + "\n")
    out = tmp_path / "policy.pt"
    line = one_line_error(["distill", str(log), "--out", str(out)])
    assert "decisions.jsonl names the game folder" in line and "--trust-game-folder" in line
    assert not marker.exists() and not out.exists()
