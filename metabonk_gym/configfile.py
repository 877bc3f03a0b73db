"""One loader for config and data files: YAML, TOML and JSON, with errors that name the file.

Training configs, reward-spec files and a game folder's data (presets, defaults, milestones)
all read through `load_config_file`, so every file format behaves the same everywhere.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.yaml"
>>> _ = path.write_text("a: 1\\nb: [2, 3]\\n")
>>> load_config_file(path)
{'a': 1, 'b': [2, 3]}
>>> load_optional(path.parent, "x")
{'a': 1, 'b': [2, 3]}
>>> load_optional(path.parent, "missing") is None
True
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from metabonk_gym.errors import MetabonkError

SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".toml", ".json")
#: Config files are small: refuse anything larger before parsing it.
MAX_BYTES = 8 * 1024 * 1024


class ConfigFileError(MetabonkError, ValueError):
    """A config or data file that is missing, too large, of an unknown format or unparsable."""


def load_config_file(path: str | Path) -> Any:
    """The parsed content of a .yaml/.yml/.toml/.json file (an empty file gives `{}`)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigFileError(f"file not found: {path}")
    if path.suffix not in SUFFIXES:
        raise ConfigFileError(f"{path} must end in {', '.join(SUFFIXES)}")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ConfigFileError(f"{path} is {size} bytes; config files are at most {MAX_BYTES}")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            data = _toml().loads(text)
        else:
            data = json.loads(text)
    except ConfigFileError:
        raise
    except Exception as exc:
        raise ConfigFileError(f"cannot parse {path}: {exc}") from exc
    return {} if data is None else data


def _toml() -> Any:
    """The TOML parser: the standard library's (Python 3.11+), else the `tomli` package."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ConfigFileError(
        "reading .toml files needs Python 3.11 or the tomli package (pip install tomli); "
        "or use .yaml / .json"
    )


def find_file(folder: str | Path, stem: str) -> Path | None:
    """`folder/stem.yaml` (or .yml/.toml/.json), whichever exists first; None if none does."""
    for suffix in SUFFIXES:
        candidate = Path(folder) / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def load_optional(folder: str | Path, stem: str) -> Any:
    """The parsed `folder/stem.{yaml,yml,toml,json}`, or None when the folder has none."""
    path = find_file(folder, stem)
    return None if path is None else load_config_file(path)
