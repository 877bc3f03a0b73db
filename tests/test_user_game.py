"""A user's game is a folder: its presets, defaults and milestones drive the CLI with no change to
the package; and the walkthrough in docs/new-game.md runs as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from metabonk_gym.cli.main import app
from metabonk_gym.wrappers.text_map import TextMap
from typer.testing import CliRunner

from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.integrate import RamSearch
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.errors import ConfigError

GBA = "MetaBonk/GBA-v0"
DOC = Path(__file__).resolve().parents[1] / "docs" / "new-game.md"
runner = CliRunner()

#: Every step pays -0.25, so an episode's return is exactly -0.25 x its length.
PRESETS = {"steps": {"steps": {"type": "time_penalty", "weight": 0.25}}}
DEFAULTS = {
    "state": "room2",
    "reward": "steps",
    "gamma": 0.9,
    "downscale": 8,
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "frame_stack": 2,
    "features_dim": 32,
    "total_steps": 128,
    "video_every": 0,
    "checkpoint_every": 0,
    "max_episode_steps": 40,
    "states": {"room2": {"max_episode_steps": 24}},
}


def invoke(*args: str) -> object:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result


def make_game(folder: Path, milestone: str = "player_x") -> Path:
    """A copy of BonkQuest's ROM and integration under another name, with its own data files."""
    source = bundled_game_folder("BonkQuest")
    folder.mkdir(parents=True)
    for name in ("data.json", "scenario.json", "metadata.json", "tiles.json"):
        shutil.copy(source / name, folder / name)
    legend = yaml.safe_load((source / "text_map.yaml").read_text())
    legend["title"] = ["rooms_visited", "chests"]
    (folder / "text_map.yaml").write_text(yaml.safe_dump(legend))
    shutil.copy(source / "rom.gba", folder / "rom.gba")
    extension = json.loads((source / "metabonk.json").read_text())
    extension["name"] = "MyQuest"
    (folder / "metabonk.json").write_text(json.dumps(extension))
    (folder / "presets.yaml").write_text(yaml.safe_dump(PRESETS))
    (folder / "defaults.toml").write_text(_toml(DEFAULTS))  # any config format works
    (folder / "milestones.yaml").write_text(yaml.safe_dump([{"variable": milestone}]))
    (folder / "game_card.md").write_text("# MyQuest\nFind the key, leave the room.\n")
    return folder


def _toml(data: dict) -> str:
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for state, keys in data["states"].items():
        lines.append(f"[states.{state}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def test_train_eval_and_curriculum_use_the_folders_data(tmp_path: Path) -> None:
    game = make_game(tmp_path / "MyQuest")
    data = GameData(game)
    assert data.name == "MyQuest" and data.defaults()["states"]["room2"]["max_episode_steps"] == 24
    assert data.game_card() is not None and data.milestones() == [{"variable": "player_x"}]
    listed = invoke("list", "--integration", str(game))
    assert listed.exit_code == 0 and "MyQuest" in listed.output and "steps" in listed.output

    run = tmp_path / "run"
    out = invoke("train", "ppo", GBA, "--integration", str(game), "--run-dir", str(run), "--json")
    assert out.exit_code == 0, out.output
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert (config["state"], config["reward"], config["gamma"]) == ("room2", "steps", 0.9)
    assert config["max_episode_steps"] == 24, "the defaults' section for the start state applies"
    assert config["env_kwargs"] == {"integration": str(game.resolve())}
    assert json.loads((run / "run.json").read_text())["num_timesteps"] == 128

    report_path = tmp_path / "eval.json"
    out = invoke("eval", GBA, str(run / "model.zip"), "--episodes", "2", "--out", str(report_path))
    assert out.exit_code == 0, out.output
    report = json.loads(report_path.read_text())
    assert (report["state"], report["reward"]) == ("room2", "steps")
    for episode in report["episodes"]:  # the folder's preset, nothing else, paid these returns
        assert episode["length"] <= 24
        assert episode["return"] == pytest.approx(-0.25 * episode["length"])

    swarm = tmp_path / "swarm"
    out = invoke(
        "curriculum",
        GBA,
        "--integration",
        str(game),
        "--swarm",
        "--run-dir",
        str(swarm),
        "--set",
        "state=room1",
        "--json",
    )  # in room 1, a random walk soon beats its first player_x
    assert out.exit_code == 0, out.output
    state = json.loads((swarm / "run.json").read_text())
    assert state["milestones"], out.output
    names = [Path(m["state"]).name for m in state["milestones"]]
    assert all(name.startswith("player_x_") for name in names), names  # milestones.yaml's first


def test_bad_folder_data_is_a_one_line_error(tmp_path: Path) -> None:
    game = make_game(tmp_path / "MyQuest")
    (game / "defaults.toml").write_text("gama = 0.9\n")
    with pytest.raises(ConfigError, match="did you mean 'gamma'.*MyQuest/defaults.toml"):
        resolve_config(GBA, overrides={"env_kwargs": {"integration": str(game)}})
    (game / "defaults.toml").unlink()
    (game / "presets.yaml").write_text("steps: [1, 2\n")
    run = tmp_path / "r"
    out = invoke("train", "ppo", GBA, "--integration", str(game), "--run-dir", str(run))
    assert out.exit_code == 2 and "presets.yaml" in out.output and not run.exists()
    (game / "presets.yaml").write_text(yaml.safe_dump(PRESETS))
    out = invoke(
        "train",
        "ppo",
        GBA,
        "--integration",
        str(game),
        "--reward",
        "explore",
        "--run-dir",
        str(run),
    )  # BonkQuest's presets are not MyQuest's
    assert out.exit_code == 2 and "unknown reward 'explore' for MyQuest" in out.output
    assert "steps" in out.output and not run.exists()
    out = invoke("train", "config", GBA, "--integration", str(tmp_path / "nowhere"))
    assert out.exit_code == 2 and "is not a folder" in out.output
    (game / "milestones.yaml").unlink()
    swarm = tmp_path / "swarm"
    out = invoke("curriculum", GBA, "--integration", str(game), "--swarm", "--run-dir", str(swarm))
    assert out.exit_code == 2 and "declares no milestones" in out.output and not swarm.exists()


def doc_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block of a markdown text."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


@pytest.mark.toolchain
@pytest.mark.net
def test_new_game_walkthrough_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """Runs docs/new-game.md in an empty folder: python blocks in order, yaml/markdown blocks whose
    first line names a file are written there, json snippets must parse, and every `metabonk`
    line of a bash block must succeed ($VARS expanded). The ROM is BonkQuest relaid (the doc
    builds it), so the RAM search must find each variable where that build put it."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "new_game_doc"}
    ran = {"python": 0, "metabonk": 0, "files": 0}
    for language, body in doc_blocks(DOC.read_text()):
        first = body.splitlines()[0] if body else ""
        target = re.match(r"^(?:#|<!--)\s*([\w./-]+\.(?:yaml|md|py))\s*(?:-->)?$", first)
        if language in ("yaml", "markdown", "python") and target:
            path = tmp_path / target[1]
            path.write_text(body)
            if language == "yaml":
                assert yaml.safe_load(body) is not None, target[1]
            ran["files"] += 1
        elif language == "json":
            json.loads(body)
        elif language == "python":
            exec(compile(body, str(DOC), "exec"), namespace)  # noqa: S102
            ran["python"] += 1
        elif language == "bash":
            for line in body.splitlines():
                if line.startswith("metabonk "):
                    words = shlex.split(os.path.expandvars(line))[1:]
                    out = runner.invoke(app, words, catch_exceptions=False)
                    assert out.exit_code == 0, f"{line}\n{out.output}"
                    ran["metabonk"] += 1
    assert ran["python"] >= 3 and ran["metabonk"] >= 5 and ran["files"] >= 5, ran
    layout = json.loads((tmp_path / "relaid" / "bonkquest" / "layout.json").read_text())
    found = json.loads((tmp_path / "MyQuest" / "data.json").read_text())["info"]
    for name in ("hp", "keys", "room", "player_x", "player_y"):  # where the relaid build put them
        assert found[name]["address"] == layout[name]["address"], name
    tiles = json.loads((tmp_path / "MyQuest" / "tiles.json").read_text())
    assert tiles["classes"]["3"] == "wall" and tiles["walkable"] == {
        **tiles["walkable"],
        "floor": True,
        "wall": False,
    }
    assert (tmp_path / "tiles.png").read_bytes().startswith(b"\x89PNG")
    assert "<svg" in (tmp_path / "watch.svg").read_text()
    skyemu = json.loads((tmp_path / "skyemu-search" / "session.json").read_text())
    assert skyemu["backend"] == "skyemu" and len(skyemu["steps"]) == 2
    left = RamSearch.load(tmp_path / "MyQuest", tmp_path / "skyemu-search").candidates(limit=None)
    assert found["player_x"]["address"] in {c.address for c in left}  # walked right, then left
    report = json.loads((tmp_path / "runs" / "myquest" / "eval.json").read_text())
    assert report["reward"] == "keys" and report["state"] == "hall"
    assert (tmp_path / "runs" / "myquest-plan" / "run.json").is_file()


def test_wrappers_read_the_folders_data(tmp_path: Path) -> None:
    game = make_game(tmp_path / "MyQuest")
    env = TextMap(gym.make(GBA, integration=str(game), state="room1"))
    try:
        _, info = env.reset(seed=0)
        title = info["text_map"].splitlines()[0]  # the folder's text_map.yaml names the title
        assert title == f"MyQuest: rooms_visited={info['rooms_visited']} chests={info['chests']}"
        assert env.unwrapped.game_data.name == "MyQuest"
        assert env.unwrapped.game_data.presets() == PRESETS
    finally:
        env.close()
