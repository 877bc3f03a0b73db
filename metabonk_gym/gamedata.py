"""A game folder's data: reward presets, training defaults, milestones, tile classes, game card.

Every game, bundled (`metabonk_gym/games/<Game>/`) or a user's integration folder, is one folder
with the same files; `GameData` reads them from that one place, so a user's folder gets every
feature a bundled game has. It also loads the folder's optional `game.py` (the game's own code:
think adapter, scripted expert) by path, so generic code never imports a game by name.

>>> quest = GameData(bundled_game_folder("BonkQuest"))
>>> quest.name
'BonkQuest'
>>> quest.tile_classes()["wall"]
1
>>> quest.game_card() is not None
True
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Iterable
from functools import cached_property
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file, load_optional
from metabonk_gym.errors import IntegrationError, UntrustedGameCodeError

BUNDLED_GAMES: tuple[str, ...] = (
    "BonkQuest",
    "BonkArena",
    "Megabonk",
    "HatWizard",
    "MeteoRain",
    "uCity",
)
#: Sections of defaults.yaml that are not config keys.
DEFAULTS_SECTIONS: tuple[str, ...] = ("states", "policies")


def games_root() -> Path:
    """The folder holding the bundled game folders (package data)."""
    return Path(str(resources.files("metabonk_gym") / "games"))


def bundled_game_folder(name: str) -> Path:
    """The folder of a bundled game (`BonkQuest`, `BonkArena`, `Megabonk`)."""
    if name not in BUNDLED_GAMES:
        raise IntegrationError(
            f"unknown bundled game {name!r}; bundled games: {', '.join(BUNDLED_GAMES)}"
        )
    return games_root() / name


class GameData:
    """Read-only access to one game folder's data files (see the module docstring)."""

    def __init__(self, folder: str | Path) -> None:
        """Args:
        folder: the game's folder (a bundled game folder or a user's integration folder).
        """
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise IntegrationError(f"game folder {self.folder} does not exist")

    def __repr__(self) -> str:
        return f"GameData({str(self.folder)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GameData) and other.folder.resolve() == self.folder.resolve()

    def __hash__(self) -> int:
        return hash(self.folder.resolve())

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The folder's `metabonk.json` ({} when it has none)."""
        path = self.folder / "metabonk.json"
        if not path.is_file():
            return {}
        try:
            data = load_config_file(path)
        except ConfigFileError as exc:
            raise IntegrationError(f"{path} is not valid JSON: {exc}") from None
        return data if isinstance(data, dict) else {}

    @property
    def name(self) -> str:
        """The game's name (metabonk.json "name", else the folder's name)."""
        return str(self.manifest.get("name") or self.folder.name)

    def _load(self, stem: str, kind: type) -> Any:
        try:
            data = load_optional(self.folder, stem)
        except ConfigFileError as exc:
            raise IntegrationError(str(exc)) from exc
        if data is not None and not isinstance(data, kind):
            raise IntegrationError(
                f"{self.folder / stem}.* must hold a {kind.__name__}, not {type(data).__name__}"
            )
        return data

    def learning(self) -> dict[str, Any]:
        """The teacher-free learning figure's spec (learning.yaml; empty when the folder has
        none): its metric, start, episodes and target (`metabonk_gym.bench.teacherless`)."""
        return dict(self._load("learning", dict) or {})

    def presets(self) -> dict[str, Any]:
        """Reward presets (presets.yaml): preset name -> reward spec (term name -> term).

        >>> sorted(GameData(bundled_game_folder("BonkQuest")).presets())
        ['explore', 'room1']
        """
        data = dict(self._load("presets", dict) or {})
        for name, spec in data.items():
            if not isinstance(spec, dict):
                raise IntegrationError(
                    f"{self.folder}/presets.*: preset {name!r} must map term names to terms, "
                    f"not {type(spec).__name__}"
                )
        return data

    def defaults(self) -> dict[str, Any]:
        """Training defaults (defaults.yaml): config keys, plus the optional sections `states:`
        (start state -> keys for that start) and `policies:` (obs_type -> the policies it
        takes, the first suggested).

        >>> GameData(bundled_game_folder("BonkQuest")).defaults()["states"]["room1"]["reward"]
        'room1'
        """
        data = dict(self._load("defaults", dict) or {})
        for section in DEFAULTS_SECTIONS:
            part = data.get(section)
            if part is not None and not isinstance(part, dict):
                raise IntegrationError(
                    f"{self.folder}/defaults.*: {section!r} must be a mapping, not "
                    f"{type(part).__name__}"
                )
        for state, keys in (data.get("states") or {}).items():
            if not isinstance(keys, dict):
                raise IntegrationError(
                    f"{self.folder}/defaults.*: states.{state} must be a mapping of config keys"
                )
        return data

    def milestones(self) -> list[dict[str, Any]]:
        """Milestones (milestones.yaml): progress variables, `{variable, description}` each, the
        default (swarm mode's) first.

        >>> GameData(bundled_game_folder("BonkArena")).milestones()[0]["variable"]
        'level'
        """
        try:
            data = load_optional(self.folder, "milestones")
        except ConfigFileError as exc:
            raise IntegrationError(str(exc)) from exc
        if data is None:
            return []
        if isinstance(data, dict):
            data = data.get("milestones", [])
        if not isinstance(data, list):
            raise IntegrationError(f"{self.folder}/milestones.* must hold a list of milestones")
        for i, entry in enumerate(data):
            if not (isinstance(entry, dict) and isinstance(entry.get("variable"), str)):
                raise IntegrationError(
                    f"{self.folder}/milestones.*: entry {i} must be a mapping with a "
                    f"'variable' name, not {entry!r}"
                )
        return [dict(entry) for entry in data]

    def quests(self) -> dict[str, Any]:
        """The long-term memory's data (quests.yaml): `world`, `quests`, `todos` ({} if none).

        >>> sorted(GameData(bundled_game_folder("BonkQuest")).quests())
        ['quests', 'todos', 'world']
        """
        return dict(self._load("quests", dict) or {})

    def tile_classes(self) -> dict[str, int]:
        """Semantic tile class name -> id (metabonk.json "tile_classes": {"id": "name"})."""
        raw = self.manifest.get("tile_classes") or {}
        return {str(name): int(i) for i, name in raw.items()}

    def game_card(self) -> str | None:
        """The game's rules for the language model (game_card.md), or None."""
        path = self.folder / "game_card.md"
        return path.read_text() if path.is_file() else None

    def module(self) -> ModuleType | None:
        """The folder's `game.py`, imported by path (cached per folder); None when absent."""
        path = self.folder / "game.py"
        if not path.is_file():
            return None
        if (
            self.folder / "__init__.py"
        ).is_file() and self.folder.resolve().parent == games_root().resolve():
            # A bundled game is a package: import it by name, so that an `import` elsewhere and
            # this call share one module object (isinstance checks on its classes hold).
            return importlib.import_module(f"metabonk_gym.games.{self.folder.name}.game")
        key = f"metabonk_gym._game_folders.{_module_key(self.folder)}"
        if key in sys.modules:
            return sys.modules[key]
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None:
            raise IntegrationError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: name its file and line, in one line
            del sys.modules[key]
            raise IntegrationError(f"{path} failed on import: {_where_in(exc, path)}") from exc
        return module


def _where_in(exc: BaseException, path: Path) -> str:
    """`exc` as "line N: Type: message", N the deepest line of `path` in its traceback.

    >>> try:
    ...     exec(compile("x = 1\\n1 / 0", "game.py", "exec"))
    ... except ZeroDivisionError as exc:
    ...     _where_in(exc, Path("game.py"))
    'line 2: ZeroDivisionError: division by zero'
    """
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == str(path) or Path(frame.filename).resolve() == path.resolve():
            line = frame.lineno
    text = " ".join(str(exc).split()) or type(exc).__name__
    where = f"line {line}: " if line is not None else ""
    return f"{where}{type(exc).__name__}: {text}"


def _module_key(folder: Path) -> str:
    """A module-name-safe key unique to a folder's resolved path."""
    import hashlib

    resolved = str(folder.resolve())
    safe = "".join(c if c.isalnum() else "_" for c in folder.name)
    return f"{safe}_{hashlib.sha1(resolved.encode()).hexdigest()[:10]}"


def is_bundled_folder(folder: str | Path) -> bool:
    """Whether `folder` is one of the game folders this package ships."""
    root = games_root().resolve()
    resolved = Path(folder).expanduser().resolve()
    return any(resolved == (root / name).resolve() for name in BUNDLED_GAMES)


def check_folder_code(
    folder: str | Path,
    named_by: str | Path,
    *,
    named: Iterable[str | Path | None] = (),
    trust: bool = False,
    how_to_name: str = "--integration",
) -> None:
    """Refuse (`UntrustedGameCodeError`) a game folder that a shared file (`named_by`) names when
    it has a `game.py` (Python code) and is neither bundled, nor in `named` (the user named it),
    nor trusted: loading that folder would run whoever made the file's code.

    >>> check_folder_code(bundled_game_folder("BonkQuest"), "run/config.yaml")  # bundled: fine
    """
    folder = Path(folder).expanduser()
    if trust or not (folder / "game.py").is_file() or is_bundled_folder(folder):
        return
    mine = {Path(n).expanduser().resolve() for n in named if n is not None}
    if folder.resolve() in mine:
        return
    raise UntrustedGameCodeError(
        f"{named_by} names the game folder {folder}, whose game.py is Python code that would "
        "run with your rights; refused: pass --trust-game-folder if you trust whoever made "
        f"it, or name the folder yourself with {how_to_name} {folder}"
    )
