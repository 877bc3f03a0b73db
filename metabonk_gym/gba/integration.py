"""Integrations: a game's ROM plus its stable-retro-format description of RAM, reward and done.

A folder holds `data.json` (RAM variables), `scenario.json` (default reward and done),
`metadata.json` (default state), optionally `rom.gba` + `rom.sha`, `*.state` savestates (in the
folder or its `savestates/`), and this project's extension `metabonk.json` (discrete actions, info
variables, RAM arrays, named starts).

>>> quest = Integration.bundled("BonkQuest")
>>> quest.variables["hp"].type
'|u1'
>>> "room1" in quest.state_names()
True
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import (
    IntegrationError,
    RomHashMismatchError,
    RomNotFoundError,
    UnknownStateError,
    UnknownVariableError,
)
from metabonk_gym.gamedata import BUNDLED_GAMES, bundled_game_folder, games_root
from metabonk_gym.gba.buttons import BUTTONS, DEFAULT_DISCRETE
from metabonk_gym.gba.regions import check_region
from metabonk_gym.gba.state_vector import StateVectorSpec

_TYPE_RE = re.compile(r"^([<>=|])([uidn])([1248])$")


def games_dir() -> Path:
    """Folder of the bundled game folders (package data)."""
    return games_root()


def bundled_gba_games() -> list[str]:
    """The bundled games that are GBA integrations (a data.json in their folder).

    >>> bundled_gba_games()
    ['BonkQuest', 'BonkArena', 'HatWizard', 'MeteoRain', 'uCity']
    """
    return [game for game in BUNDLED_GAMES if (bundled_game_folder(game) / "data.json").is_file()]


#: A game folder's own savestate folder, searched after the folder itself (`*.state` files in
#: either are loaded by name: `state="hall"`).
SAVESTATES = "savestates"


def savestates_dir(game: str) -> Path:
    """Folder of a bundled game's savestates: the top-level `savestates/<game>/` (package data)."""
    return Path(str(resources.files("metabonk_gym.savestates"))) / game


@dataclass(frozen=True)
class Variable:
    """A scalar in RAM: a bus address and a stable-retro type such as `<u2` or `|i1`."""

    name: str
    address: int
    type: str

    @property
    def size(self) -> int:
        return int(self.type[2])


@dataclass(frozen=True)
class ArraySpec:
    """A typed array in RAM (e.g. a room's tile map), read in one go."""

    name: str
    address: int
    type: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count * int(self.type[2])


@dataclass(frozen=True)
class Start:
    """A named start defined by a host command (see gba/README.md), reproducible on any backend."""

    name: str
    command: str  # "new_game" or "warp"
    arg: int = 0


@dataclass
class Integration:
    """Everything the env needs to know about one game."""

    name: str
    folder: Path
    rom_path: Path
    variables: dict[str, Variable]
    scenario: dict[str, Any]
    metadata: dict[str, Any]
    info_names: list[str]
    arrays: dict[str, ArraySpec] = field(default_factory=dict)
    discrete_actions: list[tuple[str, ...]] = field(default_factory=lambda: list(DEFAULT_DISCRETE))
    starts: dict[str, Start] = field(default_factory=dict)
    savestate_dirs: list[Path] = field(default_factory=list)
    extension: dict[str, Any] = field(default_factory=dict)
    #: What `obs_type="state"` shows (metabonk.json "state_vector"); None: not declared.
    state_vector: StateVectorSpec | None = None

    # ----------------------------------------------------------------- construction
    @classmethod
    def bundled(
        cls, game: str, rom: str | Path | None = None, check_hash: bool = True
    ) -> Integration:
        """The integration of a bundled GBA game (`metabonk_gym.gamedata.BUNDLED_GAMES` with a
        data.json); `rom` swaps in a rebuild."""
        gba_games = bundled_gba_games()
        if game not in gba_games:
            raise IntegrationError(
                f"unknown bundled game {game!r}; bundled GBA games: {', '.join(gba_games)}. "
                "For your own ROM use MetaBonk/GBA-v0 with rom= and integration=."
            )
        folder = bundled_game_folder(game)
        return cls.from_folder(
            folder, rom=rom, check_hash=check_hash, extra_savestate_dirs=[savestates_dir(game)]
        )

    @classmethod
    def from_folder(
        cls,
        folder: str | Path,
        rom: str | Path | None = None,
        check_hash: bool = True,
        extra_savestate_dirs: list[Path] | None = None,
    ) -> Integration:
        """Load a stable-retro-format integration folder; `rom` overrides `folder/rom.gba`."""
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise IntegrationError(
                f"integration folder {folder} does not exist. An integration is a folder with "
                "data.json, scenario.json and metadata.json (stable-retro's format); see "
                "docs/integrations.md"
            )
        data = _read_json(folder / "data.json", required=True)
        scenario = _read_json(folder / "scenario.json", required=False) or {}
        metadata = _read_json(folder / "metadata.json", required=False) or {}
        extension = _read_json(folder / "metabonk.json", required=False) or {}

        rom_path = Path(rom).expanduser() if rom is not None else folder / "rom.gba"
        if not rom_path.is_file():
            hint = (
                "pass rom=PATH to the .gba file you own"
                if rom is None
                else "check the path, or omit rom= to use the integration's rom.gba"
            )
            raise RomNotFoundError(f"ROM file not found: {rom_path} ({hint})")
        sha_file = folder / "rom.sha"
        if check_hash and sha_file.is_file():
            expected = (
                sha_file.read_text().split()[0].strip().lower()
                if sha_file.read_text().strip()
                else ""
            )
            actual = rom_sha1(rom_path)
            if expected and actual != expected and rom_path.stat().st_size <= MULTIBOOT_GUESS_LIMIT:
                # an integration made for the padded copy the env runs accepts the original too
                padded = hashlib.sha1(pad_rom(rom_path.read_bytes())).hexdigest()
                actual = padded if padded == expected else actual
            if expected and actual != expected:
                raise RomHashMismatchError(
                    f"ROM {rom_path} has SHA-1 {actual}, but the integration {folder} was made for "
                    f"{expected} (rom.sha). Use the ROM the integration was written for, or pass "
                    "check_hash=False if you know the RAM layout is the same."
                )

        assert data is not None  # required=True raised otherwise
        variables = _parse_variables(data, folder)
        info_names = list(extension.get("info") or variables)
        _check_seed_frames(extension.get("seed_frames", 0), folder)
        for name in info_names:
            if name not in variables:
                raise IntegrationError(
                    f"{folder / 'metabonk.json'}: info variable {name!r} is not in data.json"
                )
        arrays = _parse_arrays(extension, folder)
        actions = [tuple(a) for a in extension.get("discrete_actions", DEFAULT_DISCRETE)]
        if not actions or actions[0]:
            raise IntegrationError(f"{folder}: discrete_actions must start with the no-op []")
        for combo in actions:
            for button in combo:
                if button not in BUTTONS:
                    raise IntegrationError(
                        f"{folder}: unknown button {button!r} in discrete_actions"
                    )
        state_vector = _parse_state_vector(extension, variables, arrays, folder)
        starts = {
            name: Start(name, str(spec.get("cmd", "new_game")), int(spec.get("arg", 0)))
            for name, spec in (extension.get("starts") or {}).items()
        }
        return cls(
            name=str(extension.get("name") or folder.name.split("-")[0]),
            folder=folder,
            rom_path=rom_path,
            variables=variables,
            scenario=scenario,
            metadata=metadata,
            info_names=info_names,
            arrays=arrays,
            discrete_actions=actions,
            starts=starts,
            savestate_dirs=[*(extra_savestate_dirs or []), folder, folder / SAVESTATES],
            extension=extension,
            state_vector=state_vector,
        )

    # ----------------------------------------------------------------- queries
    @property
    def has_command_interface(self) -> bool:
        """True for games that follow gba/README.md (magic, frame, seed, cmd in RAM)."""
        return all(v in self.variables for v in ("magic", "frame", "seed", "cmd"))

    @property
    def default_state(self) -> str | None:
        return self.metadata.get("default_state")

    @property
    def won_variable(self) -> str | None:
        """The variable behind `info["won"]`: metabonk.json's `won`, a name or a condition."""
        return _condition_variable(self.extension.get("won"))

    @property
    def lost_variable(self) -> str | None:
        """The variable behind `info["lost"]` (as `won_variable`)."""
        return _condition_variable(self.extension.get("lost"))

    def contract_condition(self, key: str) -> dict[str, Any] | None:
        """metabonk.json's `won` or `lost` when it is a condition (`{"variable", "op",
        "reference"}`, reference an int or "start"), None when it names a variable (true when
        nonzero) or is absent."""
        value = self.extension.get(key)
        return value if isinstance(value, dict) else None

    def variable(self, name: str) -> Variable:
        try:
            return self.variables[name]
        except KeyError:
            raise UnknownVariableError(
                f"unknown variable {name!r} for {self.name}; defined in {self.folder / 'data.json'}: "
                f"{', '.join(sorted(self.variables))}"
            ) from None

    def array(self, name: str) -> ArraySpec:
        try:
            return self.arrays[name]
        except KeyError:
            raise UnknownVariableError(
                f"unknown RAM array {name!r} for {self.name}; defined in metabonk.json: "
                f"{', '.join(sorted(self.arrays)) or '(none)'}"
            ) from None

    def savestate_files(self) -> dict[str, Path]:
        """Savestate name -> file, the first folder winning."""
        found: dict[str, Path] = {}
        for folder in self.savestate_dirs:
            if folder.is_dir():
                for path in sorted(folder.glob("*.state")):
                    found.setdefault(path.stem, path)
        return found

    def state_names(self) -> list[str]:
        """Every name `state=` accepts: named starts, savestate files and start sets."""
        return sorted(set(self.starts) | set(self.savestate_files()) | set(self.start_sets()))

    def start_sets(self) -> dict[str, list[str]]:
        """metabonk.json's `start_sets`: a name -> starts, one picked per episode by the game
        seed (`state="any"`: each seed one of several starts, for games that play the same from
        one savestate whatever the seed)."""
        sets = self.extension.get("start_sets") or {}
        if not isinstance(sets, dict) or not all(
            isinstance(v, list) and v and all(isinstance(n, str) for n in v) for v in sets.values()
        ):
            raise IntegrationError(
                f"{self.folder / 'metabonk.json'}: start_sets must map names to lists of starts"
            )
        return {str(k): list(v) for k, v in sets.items()}

    def pick_start(self, name: str | Path, game_seed: int) -> str | Path:
        """`name` itself, or for a start set the member the game seed picks."""
        members = self.start_sets().get(str(name)) if isinstance(name, str) else None
        return members[game_seed % len(members)] if members else name

    def resolve_state(self, name: str | Path) -> Start | Path:
        """A named start (preferred: it honours the seed) or a savestate file for `name`.

        A path to a savestate file is accepted too: a `Path`, or a string ending in `.state`
        (any backend) or `.png` (a SkyEmu state image) or naming a folder.
        """
        members = self.start_sets().get(name) if isinstance(name, str) else None
        if members:  # a start set: every member must resolve; the first stands for it
            resolved = [self.resolve_state(member) for member in members]
            return resolved[0]
        if isinstance(name, Path) or str(name).endswith(STATE_FILE_SUFFIXES) or "/" in str(name):
            path = Path(name).expanduser()
            if not path.is_file():
                raise UnknownStateError(
                    f"savestate file not found: {path} (check the path; states are written with "
                    "env.unwrapped.save_state(path))"
                )
            return path
        if self.has_command_interface and name in self.starts:
            return self.starts[name]
        files = self.savestate_files()
        if name in files:
            return files[name]
        raise UnknownStateError(
            f"unknown state {name!r} for {self.name}; valid states: {', '.join(self.state_names()) or '(none)'}. "
            "Make a new one with env.unwrapped.save_state(path)."
        )

    def game_card(self) -> str | None:
        """The game's rules for a language model (`game_card.md`), if the integration has one."""
        path = self.folder / "game_card.md"
        return path.read_text() if path.is_file() else None

    def tiles(self) -> dict[str, Any] | None:
        """Semantic tile classes (`tiles.json`), if the integration has them."""
        return _read_json(self.folder / "tiles.json", required=False)


#: The most idle frames `seed_frames` may ask for after a savestate start (a minute at 60 fps).
MAX_SEED_FRAMES = 3600


def _check_seed_frames(value: Any, folder: Path) -> None:
    """metabonk.json's `seed_frames` must be an int in 0..MAX_SEED_FRAMES."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED_FRAMES:
        raise IntegrationError(
            f"{folder / 'metabonk.json'}: seed_frames must be an int from 0 to {MAX_SEED_FRAMES} "
            f"(idle frames after a savestate start, chosen by the seed), not {value!r}"
        )


def _condition_variable(value: Any) -> str | None:
    """The variable a `won`/`lost` entry reads: the name itself, or a condition's `variable`."""
    if isinstance(value, dict):
        name = value.get("variable")
        if not isinstance(name, str):
            raise IntegrationError(
                f"metabonk.json: a won/lost condition needs a 'variable' name, got {value!r}"
            )
        return name
    return value if isinstance(value, str) else None


#: File names `state=` takes as paths (stable-retro states; SkyEmu state images).
STATE_FILE_SUFFIXES = (".state", ".png")

#: mGBA 0.7 may take a ROM of at most this size that refers to EWRAM for a multiboot image.
MULTIBOOT_GUESS_LIMIT = 256 * 1024


def padded_rom(path: Path, data: bytes | None = None) -> bytes | None:
    """For a ROM small enough for mGBA 0.7 to mistake for a multiboot image, its bytes padded with
    0xFF to 512 KiB (the core then runs a temp copy, deleted once loaded; the original is never
    touched; a warning says so); None for any other ROM.

    >>> padded_rom(Integration.bundled("BonkQuest").rom_path) is None
    True
    """
    import warnings

    size = len(data) if data is not None else path.stat().st_size
    if size > MULTIBOOT_GUESS_LIMIT:
        return None
    data = data if data is not None else path.read_bytes()
    warnings.warn(
        f"{path} is {size} bytes: mGBA 0.7 could take it for a multiboot image and show a white "
        "screen, so the env runs a copy padded with 0xFF to 512 KiB",
        stacklevel=4,
    )
    return pad_rom(data)


def pad_rom(data: bytes) -> bytes:
    """`data` padded with 0xFF to 512 KiB (what the env runs for a ROM of 256 KiB or less).

    >>> len(pad_rom(b"rom")), pad_rom(b"rom")[-1]
    (524288, 255)
    """
    return data + b"\xff" * max(0, 2 * MULTIBOOT_GUESS_LIMIT - len(data))


def rom_sha1(path: Path) -> str:
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()


def _parse_state_vector(
    extension: dict[str, Any],
    variables: dict[str, Variable],
    arrays: dict[str, ArraySpec],
    folder: Path,
) -> StateVectorSpec | None:
    """metabonk.json's optional "state_vector", with every name checked against the RAM map."""
    if "state_vector" not in extension:
        return None
    where = folder / "metabonk.json"
    try:
        spec = StateVectorSpec.parse(extension["state_vector"])
    except ValueError as exc:
        raise IntegrationError(f"{where}: {exc}") from exc
    missing = sorted(spec.variable_names() - set(variables))
    if missing:
        raise IntegrationError(f"{where}: state_vector reads {missing}, not variables of data.json")
    missing = sorted(spec.array_names() - set(arrays))
    if missing:
        raise IntegrationError(
            f"{where}: state_vector reads {missing}, not arrays of metabonk.json"
        )
    for entity in spec.entities:
        lengths = {arrays[n].shape for n in (entity.x, entity.y, entity.present)}
        lengths |= {arrays[x.array].shape for x in entity.extras}
        if len(lengths) != 1 or len(next(iter(lengths))) != 1:
            raise IntegrationError(
                f"{where}: state_vector entity {entity.name!r} needs 1-D arrays of one length"
            )
    return spec


def _read_json(path: Path, required: bool) -> dict[str, Any] | None:
    if not path.is_file():
        if required:
            raise IntegrationError(f"integration file missing: {path}")
        return None
    try:  # one loader: size cap, nesting and encoding errors as one line
        value = load_config_file(path)
    except ConfigFileError as exc:
        raise IntegrationError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise IntegrationError(f"{path} must hold a JSON object")
    return value


def _check_type(type_: str, folder: Path) -> str:
    if not _TYPE_RE.match(type_):
        raise IntegrationError(
            f"{folder}: unsupported variable type {type_!r}; use stable-retro types such as "
            "'|u1', '<u2', '<i4', '>u4'"
        )
    return type_


def _parse_variables(data: dict[str, Any], folder: Path) -> dict[str, Variable]:
    info = data.get("info")
    if not isinstance(info, dict) or not info:
        raise IntegrationError(f"{folder / 'data.json'} needs an 'info' object of variables")
    out: dict[str, Variable] = {}
    for name, spec in info.items():
        try:
            address = spec["address"]
            type_ = spec["type"]
        except (KeyError, TypeError) as exc:
            raise IntegrationError(
                f"{folder / 'data.json'}: variable {name!r} needs address and type"
            ) from exc
        out[name] = Variable(name, _check_address(address, name, folder / "data.json"),
                             _check_type(type_, folder))  # fmt: skip
        _check_in_memory(name, out[name].address, out[name].size, folder / "data.json")
    return out


def _check_in_memory(name: str, address: int, nbytes: int, where: Path) -> None:
    """Refuse a variable or array outside the GBA's memory when the env is made, not at the
    first step that reads it."""
    try:
        if address < 0:
            raise ValueError(f"address {address} is negative")
        check_region(address, nbytes)
    except ValueError as exc:
        raise IntegrationError(f"{where}: {name!r}: {exc}; fix its address or size") from None


def _parse_arrays(extension: dict[str, Any], folder: Path) -> dict[str, ArraySpec]:
    """metabonk.json's "arrays": each a typed block of RAM with a shape of whole numbers."""
    where = folder / "metabonk.json"
    specs = extension.get("arrays") or {}
    if not isinstance(specs, dict):
        raise IntegrationError(f"{where}: arrays must be an object of name -> array")
    out: dict[str, ArraySpec] = {}
    for name, spec in specs.items():
        try:
            address, type_, shape = spec["address"], spec["type"], spec["shape"]
        except (KeyError, TypeError):
            raise IntegrationError(
                f"{where}: array {name!r} needs address, type and shape"
            ) from None
        if (
            not isinstance(shape, list)
            or not shape
            or not all(type(d) is int and 1 <= d <= 0x40000 for d in shape)
        ):
            raise IntegrationError(
                f"{where}: array {name!r} shape must be a list of whole numbers in 1..262144, "
                f"not {shape!r}"
            )
        array = ArraySpec(
            name, _check_address(address, name, where), _check_type(type_, folder), tuple(shape)
        )
        _check_in_memory(name, array.address, array.nbytes, where)
        out[name] = array
    return out


def _check_address(address: Any, name: str, where: Path) -> int:
    """A bus address from JSON: an integer (decimal in JSON, or a "0x..." string).

    >>> _check_address("0x02000000", "hp", Path("data.json")) == 0x02000000
    True
    """
    if isinstance(address, str):
        try:
            return int(address, 0)
        except ValueError:
            pass
    elif isinstance(address, int) and not isinstance(address, bool):
        return address
    raise IntegrationError(
        f"{where}: variable {name!r} has address {address!r}, which is not a number; give "
        "the bus address as an integer (e.g. 33554432 for 0x02000000)"
    )
