"""The public GBA games bundled from the gbadev.org archive (HatWizard, MeteoRain, uCity), on
their real ROMs: each env resets reproducibly, renders and reads its variables; each folder's
`search.sh` re-finds every data.json address with the project's own commands; the licence
files a redistribution needs are there; a short PPO run trains, saves and evaluates on each;
another ROM is refused as for any integration.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

import metabonk_gym  # noqa: F401  (registers the ids)
from metabonk_gym.errors import RomHashMismatchError
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.gba.integration import Integration
from metabonk_gym.integrate import start_state_file

GAMES = ("HatWizard", "MeteoRain", "uCity")
runner = CliRunner()


def folder(game: str) -> Path:
    return bundled_game_folder(game)


@pytest.mark.parametrize("game", GAMES)
def test_the_folder_carries_what_the_licence_asks(game: str) -> None:
    here = folder(game)
    licence = (here / "LICENSE").read_text()
    authors = (here / "AUTHORS.md").read_text()
    assert len(licence) > 500  # the full text, not a pointer
    assert "https://github.com/" in authors and "unmodified" in authors
    assert GameData(here).module() is None  # data only: no game code in the training path
    rom = Integration.bundled(game).rom_path
    assert rom.stat().st_size > 1_000_000


@pytest.mark.parametrize("game", GAMES)
def test_env_resets_reproducibly_renders_and_reads_its_variables(make_env, game: str) -> None:
    env = make_env(f"MetaBonk/{game}-v0", render_mode="rgb_array")
    variables = set(json.loads((folder(game) / "data.json").read_text())["info"]) - {"keyinput"}
    runs = []
    for _ in range(2):
        obs, info = env.reset(seed=7)
        trail = [obs]
        for action in (1, 2, 3, 0, 4, 2):
            obs, _, _, _, info = env.step(action % env.action_space.n)
            trail.append(obs)
        runs.append((np.stack(trail), dict(info)))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert set(env.unwrapped.variables()) >= variables
    assert {"won", "lost", "reward_terms"} <= set(runs[0][1])
    frame = env.render()
    assert frame.shape == (160, 240, 3) and frame.std() > 0  # a picture, not a blank screen


@pytest.mark.parametrize("game", GAMES)
def test_default_start_is_past_the_title(game: str) -> None:
    here = folder(game)
    default = json.loads((here / "metadata.json").read_text())["default_state"]
    assert start_state_file(here) == start_state_file(here, default)
    assert start_state_file(here) is not None


@pytest.mark.slow
@pytest.mark.parametrize("game", GAMES)
def test_search_script_refinds_every_address(tmp_path: Path, game: str) -> None:
    here = folder(game)
    copy = tmp_path / game
    shutil.copytree(
        here, copy, ignore=shutil.ignore_patterns("*.state", "savestates", "tiles.json", "__*")
    )
    shipped = json.loads((here / "data.json").read_text())["info"]
    (copy / "data.json").write_text(json.dumps({"info": {"keyinput": shipped["keyinput"]}}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(copy / "search.sh"), str(copy)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    found = json.loads((copy / "data.json").read_text())["info"]
    assert found == shipped
    if (here / "tiles.json").is_file():  # the tile classes, named in the script, come back too
        tiles = json.loads((here / "tiles.json").read_text())["classes"]
        assert json.loads((copy / "tiles.json").read_text())["classes"] == tiles
    states = {p.name for p in here.glob("*.state")}
    assert states and states <= {p.name for p in copy.glob("*.state")}


def test_hat_wizard_level_one_played_through_is_won(make_env) -> None:
    # the input script search.sh keeps for level 1-1, played in the env: `won` fires
    env = make_env("MetaBonk/HatWizard-v0", action_space="multibinary", frameskip=1)
    env.reset(seed=0)
    assert env.unwrapped.read_variable("level") == 0
    from metabonk_gym.gba.buttons import BUTTONS
    from metabonk_gym.integrate import parse_script

    script = "RIGHT 90; RIGHT+B 1; RIGHT 8; RIGHT+A 1; RIGHT 25; RIGHT+A 1; RIGHT 400"
    won = terminated = False
    for mask, frames in parse_script(script):
        action = np.array([(mask >> i) & 1 for i in range(len(BUTTONS))], np.int8)
        for _ in range(frames):
            _, _, terminated, _, info = env.step(action)
            won = won or info["won"]
            if terminated:
                break
        if terminated:
            break
    assert won and terminated and info["level"] == 1


def test_seed_frames_make_seeds_different_games(make_env) -> None:
    # RAM, not savestate bytes: a core's state blob also holds bookkeeping of what ran before
    env = make_env("MetaBonk/HatWizard-v0")

    def ram_after_reset(seed: int) -> bytes:
        env.reset(seed=seed)
        return env.unwrapped.read_memory(0x03000000, 0x8000)  # IWRAM: timers, the stack

    assert len({ram_after_reset(seed) for seed in range(4)}) > 1
    assert ram_after_reset(1) == ram_after_reset(1)


@pytest.mark.parametrize("game", GAMES)
def test_another_rom_is_refused_in_one_line(tmp_path: Path, game: str) -> None:
    other = tmp_path / "other.gba"
    other.write_bytes(Integration.bundled("BonkQuest").rom_path.read_bytes())
    with pytest.raises(RomHashMismatchError, match="SHA-1"):
        gym.make(f"MetaBonk/{game}-v0", rom=other)
    result = runner.invoke(
        app, ["eval", f"MetaBonk/{game}-v0", "random", "--episodes", "1", "--rom", str(other)]
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "SHA-1" in lines[0], result.output


@pytest.mark.slow
@pytest.mark.parametrize("game", GAMES)
def test_short_ppo_trains_saves_and_evaluates(tmp_path: Path, game: str) -> None:
    run = tmp_path / "run"
    args = ["train", "ppo", f"MetaBonk/{game}-v0", "--run-dir", str(run)]
    args += [
        "--total-steps",
        "256",
        "--n-envs",
        "2",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=64",
    ]
    trained = runner.invoke(app, args)
    assert trained.exit_code == 0, trained.output
    assert list(run.rglob("*.zip"))
    out = tmp_path / "eval.json"
    evaluated = runner.invoke(
        app, ["eval", f"MetaBonk/{game}-v0", str(run), "--episodes", "2", "--out", str(out)]
    )
    assert evaluated.exit_code == 0, evaluated.output
    assert out.is_file()


def test_the_obvious_rule_is_an_agent_and_a_bad_one_is_one_line() -> None:
    from metabonk_gym.agents.evaluate import evaluate

    right = evaluate("MetaBonk/MeteoRain-v0", "repeat:2", episodes=2, seed=0)
    assert right["agent"] == "repeat:2" and right["mean_length"] > 0
    for bad in ("repeat:9", "repeat:x"):
        result = runner.invoke(app, ["eval", "MetaBonk/MeteoRain-v0", bad, "--episodes", "1"])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and "repeat" in lines[0], result.output


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"metric": "speed", "target": {"ratio": 2}}, "metric"),
        ({"metric": "won", "target": {"most": 2}}, "target"),
        ({"metric": "won", "target": {"ratio": 2}, "colour": 1}, "unknown keys"),
    ],
)
def test_a_bad_learning_spec_names_the_problem(spec: dict, message: str) -> None:
    from metabonk_gym.bench.teacherless import LearningSpec
    from metabonk_gym.errors import MetabonkError

    with pytest.raises(MetabonkError, match=message):
        LearningSpec.from_mapping(spec)


@pytest.mark.parametrize("game", GAMES)
def test_every_public_game_declares_its_figure(game: str) -> None:
    from metabonk_gym.bench.teacherless import load_spec

    data, spec = load_spec(f"MetaBonk/{game}-v0")
    assert data.name == game and spec.episodes == 20 and spec.rules
    states = Integration.bundled(game).state_names()
    assert spec.state in states


@pytest.mark.slow
def test_teacherless_bench_trains_scores_ranks_and_rescores(tmp_path: Path, monkeypatch) -> None:
    from metabonk_gym.bench import teacherless as bench

    data, spec = bench.load_spec("MetaBonk/MeteoRain-v0")
    small = bench.LearningSpec.from_mapping(
        {
            "metric": "length",
            "state": "play",
            "episodes": 2,
            "max_steps": 30,
            "target": {"ratio": 3},
            "rules": ["repeat:2"],
        }
    )
    monkeypatch.setattr(bench, "load_spec", lambda env_id: (data, small))
    args = ("MetaBonk/MeteoRain-v0", tmp_path)
    figures = bench.teacherless(*args, seeds=1, minutes=0.05, log=lambda line: None)
    assert set(figures["rules"]) == {"repeat:2"} and 0 < figures["median"] <= 30
    assert figures["seeds"][0]["env_steps"] > 0
    ladder = json.loads((tmp_path / "MeteoRain" / "ladder.json").read_text())
    assert len(json.dumps(ladder)) > 0 and "repeat:2" in json.dumps(ladder)
    again = bench.teacherless(*args, seeds=1, train=False, log=lambda line: None)
    assert again["seeds"][0]["env_steps"] == figures["seeds"][0]["env_steps"]  # not trained again
    assert again["median"] == figures["median"]  # the same seeds, the same episodes
    record = bench.figure_records(again)[0]
    assert record["id"] == "meteorain-teacherless" and record["met"] is again["met"]
