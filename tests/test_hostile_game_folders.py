"""Hostile game folders (issue 26, item 5): addresses outside the GBA's memory and oversized
arrays are refused when the env is made (not at the first step that reads them), malformed JSON of
any depth or encoding, a `tiles.json` of another structure, a `game.py` that raises (named by file
and line) and a `quests.yaml` with unknown keys are each one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from metabonk_gym.cli.main import app
from metabonk_gym.wrappers.semantic import SemanticClasses
from typer.testing import CliRunner

from metabonk_gym.errors import IntegrationError
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.gba.integration import Integration
from metabonk_gym.memory.conditions import ConditionError
from metabonk_gym.memory.quests import QuestLog
from metabonk_gym.memory.spec import WorldSpec

GBA = "MetaBonk/GBA-v0"
runner = CliRunner()


def _game(folder: Path) -> Path:
    """A copy of BonkQuest's folder (ROM, integration, quests) under another name."""
    source = bundled_game_folder("BonkQuest")
    folder.mkdir()
    for name in (
        "data.json", "scenario.json", "metadata.json", "tiles.json", "metabonk.json",
        "rom.gba", "quests.yaml",
    ):  # fmt: skip
        shutil.copy(source / name, folder / name)
    return folder


def _edit_json(path: Path, change: dict) -> None:
    data = json.loads(path.read_text())
    data.update(change)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("address", "message"),
    [
        (
            "0xFFFFFFF0",
            "'hp': cannot read 1 bytes at 0xFFFFFFF0: outside the GBA regions 0x02000000-",
        ),
        (-5, "'hp': address -5 is negative; fix its address or size"),
    ],
)
def test_an_address_outside_memory_is_refused_at_make(
    tmp_path: Path, address: object, message: str
) -> None:
    game = _game(tmp_path / "MyQuest")
    data = json.loads((game / "data.json").read_text())
    data["info"]["hp"]["address"] = address
    (game / "data.json").write_text(json.dumps(data))
    with pytest.raises(IntegrationError) as caught:
        Integration.from_folder(game)
    assert str(caught.value).startswith(f"{game / 'data.json'}: {message}")


def test_the_cli_says_it_in_one_line_before_any_step(tmp_path: Path) -> None:
    game = _game(tmp_path / "MyQuest")
    data = json.loads((game / "data.json").read_text())
    data["info"]["hp"]["address"] = "0xFFFFFFF0"
    (game / "data.json").write_text(json.dumps(data))
    result = runner.invoke(
        app, ["eval", GBA, "random", "--integration", str(game), "--episodes", "1"]
    )
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {game / 'data.json'}: 'hp': cannot read 1 bytes at ")


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([1e8], "shape must be a list of whole numbers in 1..262144, not [100000000.0]"),
        ([200000, 2], "cannot read 400000 bytes at 0x"),
        ("big", "shape must be a list of whole numbers in 1..262144, not 'big'"),
    ],
)
def test_an_array_larger_than_memory_is_refused_at_make(
    tmp_path: Path, shape: object, message: str
) -> None:
    game = _game(tmp_path / "MyQuest")
    extension = json.loads((game / "metabonk.json").read_text())
    name = next(iter(extension["arrays"]))
    extension["arrays"][name]["shape"] = shape
    (game / "metabonk.json").write_text(json.dumps(extension))
    with pytest.raises(IntegrationError) as caught:
        Integration.from_folder(game)
    assert str(caught.value).startswith(f"{game / 'metabonk.json'}: ")
    assert message in str(caught.value)


@pytest.mark.parametrize("name", ["data.json", "metabonk.json"])
@pytest.mark.parametrize(
    "content", [b"[" * 100_000 + b"]" * 100_000, b'{"name": "\xff\xfe"}'], ids=["deep", "utf8"]
)
def test_deep_or_non_utf8_json_is_one_line(tmp_path: Path, name: str, content: bytes) -> None:
    game = _game(tmp_path / "MyQuest")
    (game / name).write_bytes(content)
    with pytest.raises(IntegrationError, match=rf"{name} is not valid JSON: cannot parse "):
        Integration.from_folder(game)
    if name == "metabonk.json":
        with pytest.raises(IntegrationError, match="metabonk.json is not valid JSON"):
            _ = GameData(game).manifest


@pytest.mark.parametrize(
    "tiles",
    [{"classes": [1, 2]}, {"classes": {"x": "wall"}}, {"charblock": "first"}],
)
def test_tiles_json_of_another_structure(tiles: dict) -> None:
    with pytest.raises(IntegrationError) as caught:
        SemanticClasses.from_tiles_json(tiles)
    assert str(caught.value).startswith("tiles.json: ")
    assert str(caught.value).endswith(
        'it needs "classes" (and "sprites") mapping tile numbers to class names, e.g. '
        '{"classes": {"3": "wall"}}, and a whole-number "charblock"'
    )


def test_a_game_py_that_raises_names_its_file_and_line(tmp_path: Path) -> None:
    game = _game(tmp_path / "MyQuest")
    (game / "game.py").write_text('"""A broken game module."""\n\nX = 1\nraise KeyError("boom")\n')
    with pytest.raises(IntegrationError) as caught:
        GameData(game).module()
    assert str(caught.value) == f"{game / 'game.py'} failed on import: line 4: KeyError: 'boom'"
    (game / "game.py").write_text("def broken(:\n")
    with pytest.raises(IntegrationError, match=r"game.py failed on import: line 1: SyntaxError"):
        GameData(game).module()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"qeusts": []}, "quests.yaml: unknown key 'qeusts' (did you mean 'quests'?)"),
        (
            {"quests": [{"id": "q", "titel": "x"}]},
            "quests[0]: unknown key 'titel' (did you mean 'title'?)",
        ),
        (
            {"todos": [{"id": "t", "text": "x", "when": "always", "priorty": 2}]},
            "todos[0]: unknown key 'priorty' (did you mean 'priority'?)",
        ),
    ],
)
def test_quests_yaml_with_unknown_keys(tmp_path: Path, change: dict, message: str) -> None:
    game = _game(tmp_path / "MyQuest")
    data = yaml.safe_load((game / "quests.yaml").read_text())
    data.update(change)
    (game / "quests.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConditionError) as caught:
        QuestLog.from_game(GameData(game))
    assert f"{game}: {message}" in str(caught.value)


def test_a_world_entry_with_an_unknown_key(tmp_path: Path) -> None:
    game = _game(tmp_path / "MyQuest")
    data = yaml.safe_load((game / "quests.yaml").read_text())
    data["world"]["entites"] = []
    (game / "quests.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConditionError, match=r"world: unknown key 'entites' \(did you mean"):
        WorldSpec.from_game(GameData(game))
