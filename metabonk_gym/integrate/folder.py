"""A game folder from a ROM, and the files the search fills in: data.json variables, start states.

`new_game_folder(rom, folder)` writes what `MetaBonk/GBA-v0` needs to run the ROM at once: a copy
of the ROM, `rom.sha`, a minimal `data.json` (the KEYINPUT register, which every GBA game has),
`scenario.json`, `metadata.json` and `metabonk.json` named from the cartridge header.
`add_variable` writes one checked variable into `data.json`; `save_start` plays an input script
from power-on and saves a named, checksummed start state.

>>> import tempfile
>>> from metabonk_gym.gamedata import bundled_game_folder
>>> tmp = tempfile.TemporaryDirectory()
>>> folder = new_game_folder(bundled_game_folder("BonkQuest") / "rom.gba", Path(tmp.name) / "Mine")
>>> sorted(p.name for p in folder.iterdir())[:3], json.loads((folder / "metabonk.json").read_text())["name"]
(['data.json', 'metabonk.json', 'metadata.json'], 'Bonkquest')
>>> add_variable(folder, "lives", 0x02000010, "u8")["lives"]
{'address': 33554448, 'type': '|u1'}
>>> tmp.cleanup()
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from metabonk_gym.errors import IntegrateError
from metabonk_gym.gamedata import is_bundled_folder
from metabonk_gym.gba.backends import read_state_file, write_state_file
from metabonk_gym.gba.integration import SAVESTATES, savestates_dir
from metabonk_gym.integrate.machine import Machine, check_ram_address
from metabonk_gym.integrate.rom import read_rom
from metabonk_gym.integrate.scan import view_type
from metabonk_gym.integrate.script import parse_script
from metabonk_gym.utils import atomic_write_text

#: KEYINPUT (0x04000130): the buttons held, active low; the one variable every GBA game has.
KEYINPUT = {"address": 0x04000130, "type": "<u2"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Variable names the env contract (`metabonk_gym.contract.CONTRACT_INFO`) reads as how an
#: episode ended, and what a value that is not 0 then means.
RESULT_NAMES: dict[str, str] = {
    "won": "the episode counts as won (eval and ladder win rates, the sparse reward's +1)",
    "lost": "the episode counts as lost (the sparse reward's -1)",
}


def _write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise IntegrateError(
            f"{path} is missing: is {path.parent} a game folder (metabonk integrate new)?"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IntegrateError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise IntegrateError(f"{path} must hold a JSON object")
    return value


def new_game_folder(rom: str | Path, folder: str | Path, name: str | None = None) -> Path:
    """Write a game folder for `rom` at `folder` (which must not hold a game yet)."""
    info = read_rom(rom)
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise IntegrateError(f"{folder} already exists and is not empty: choose a new folder")
    game = name or info.folder_name
    if not _NAME.match(game):
        raise IntegrateError(f"game name {game!r}: use letters, digits and _")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(info.path, folder / "rom.gba")
    atomic_write_text(folder / "rom.sha", info.sha1 + "\n")
    _write_json(folder / "data.json", {"info": {"keyinput": KEYINPUT}})
    _write_json(folder / "scenario.json", {"reward": {"variables": {}}, "done": {"variables": {}}})
    _write_json(
        folder / "metadata.json",
        {
            "description": f"{info.title or info.path.stem} ({info.code}), made by metabonk integrate new"
        },
    )
    _write_json(
        folder / "metabonk.json",
        {"name": game, "rom_title": info.title, "rom_code": info.code},
    )
    return folder


def add_variable(
    folder: str | Path, name: str, address: int, type_: str, contract: bool = False
) -> dict[str, Any]:
    """Add (or replace) variable `name` in `folder/data.json`, checked; returns data.json's info.
    A name the env contract reads as an episode's result (`RESULT_NAMES`) needs `contract`."""
    folder = Path(folder)
    if not _NAME.match(name):
        raise IntegrateError(f"variable name {name!r}: use letters, digits and _ (e.g. player_x)")
    if name in RESULT_NAMES and not contract:
        raise IntegrateError(
            f"variable name {name!r} is what the env reports as info[{name!r}]: {RESULT_NAMES[name]} "
            f"from the first step it is not 0. Pass --contract if this address holds exactly "
            f"that (0 until then), or choose another name (e.g. {name}_flag)"
        )
    type_ = view_type(type_)
    check_ram_address(address, type_)
    data = _read_json(folder / "data.json")
    info = data.setdefault("info", {})
    if not isinstance(info, dict):
        raise IntegrateError(f"{folder / 'data.json'}: 'info' must be an object")
    info[name] = {"address": address, "type": type_}
    extension_path = folder / "metabonk.json"
    extension = _read_json(extension_path) if extension_path.is_file() else None
    _write_json(folder / "data.json", data)
    if (
        extension is not None
        and isinstance(extension.get("info"), list)
        and name not in extension["info"]
    ):
        extension["info"].append(name)
        _write_json(extension_path, extension)
    return info


def start_state_file(folder: str | Path, name: str | None = None) -> Path | None:
    """The savestate file of the folder's start `name` (default: metadata.json's `default_state`),
    looked up where the env looks (a bundled game's `savestates/<Game>/`, the folder, its
    `savestates/`); None when no name is given and the folder has no default start (power-on).

    The RAM tools start here so that a search, a watch or a probe sees the game past its title,
    as the env does, rather than the power-on logo.
    """
    folder = Path(folder)
    if name is None:
        meta_path = folder / "metadata.json"
        name = _read_json(meta_path).get("default_state") if meta_path.is_file() else None
        if not name:
            return None
    if not isinstance(name, str) or not _NAME.match(name):
        raise IntegrateError(f"start state name {name!r}: use letters, digits and _")
    places = [folder, folder / SAVESTATES]
    if is_bundled_folder(folder):
        places.insert(0, savestates_dir(folder.resolve().name))
    for place in places:
        if (place / f"{name}.state").is_file():
            return place / f"{name}.state"
    raise IntegrateError(
        f"no start state {name!r} in {folder} (looked for {name}.state in "
        f"{', '.join(str(p) for p in places)}): make one with metabonk integrate state {folder} "
        f"{name} --inputs SCRIPT, or pass --power-on"
    )


def start_state(
    folder: str | Path, name: str | None = None, power_on: bool = False
) -> tuple[bytes | None, str]:
    """The emulator state the RAM tools begin from and a label for it: the folder's start `name`
    (default: its default start), or power-on when `power_on` or the folder has no default."""
    if power_on:
        if name is not None:
            raise IntegrateError("give a start state name or --power-on, not both")
        return None, "power-on"
    path = start_state_file(folder, name)
    if path is None:
        return None, "power-on"
    try:
        return read_state_file(path), f"start {path.stem}"
    except (OSError, ValueError) as exc:
        raise IntegrateError(f"cannot load start state {path}: {exc}") from None


def save_start(
    folder: str | Path,
    name: str,
    inputs: str,
    make_default: bool = False,
    start: str | None = None,
    pokes: dict[str, int] | None = None,
    force: bool = False,
) -> Path:
    """Play `inputs` on the folder's ROM from power-on (or from its start state `start`, with
    data.json variables set to `pokes` first: a level select for games without one) and save
    `folder/NAME.state` (checksummed, atomically); `make_default` also makes it metadata.json's
    default state."""
    folder = Path(folder)
    if not _NAME.match(name):
        raise IntegrateError(f"state name {name!r}: use letters, digits and _")
    if (folder / f"{name}.state").exists() and not force:
        raise IntegrateError(
            f"{folder / name}.state exists: pass --force to replace that start state, or choose "
            "another name"
        )
    steps = parse_script(inputs)
    read_rom(folder / "rom.gba")
    from_file = start_state_file(folder, start) if start is not None else None
    state = read_state_file(from_file) if from_file is not None else None
    variables = _read_json(folder / "data.json").get("info", {}) if pokes else {}
    for variable in pokes or {}:
        if variable not in variables:
            raise IntegrateError(
                f"--poke {variable}: no such variable in {folder / 'data.json'} "
                f"(variables: {', '.join(sorted(variables)) or 'none'})"
            )
    with Machine.open(folder / "rom.gba", state=state) as machine:
        for variable, value in (pokes or {}).items():
            spec = variables[variable]
            machine.core.write(int(spec["address"]), str(spec["type"]), int(value))
        machine.run(steps)
        state_bytes = machine.save_state()
    path = folder / f"{name}.state"
    write_state_file(path, state_bytes)
    if make_default:
        metadata = _read_json(folder / "metadata.json")
        metadata["default_state"] = name
        _write_json(folder / "metadata.json", metadata)
    return path
