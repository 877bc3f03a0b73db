"""Game code named by a shared file: a run directory or model zip whose game folder has a `game.py`.

A run's `config.yaml` (and the training config inside its model zip and every checkpoint) records
`env_kwargs.integration`, the game folder it trained on. Resuming, evaluating, playing or ranking
the run makes that env, and a game folder's `game.py` is Python code that runs with your rights.
Run directories get shared, so `check_game_code` refuses a folder that only such a file names:
one that is not a bundled game, has a `game.py`, and that the user neither named (`named`, the
command line's `--integration`) nor trusted (`trust=True`, `--trust-game-folder`).

>>> import tempfile, pathlib
>>> run = pathlib.Path(tempfile.mkdtemp())
>>> game = run / "game"
>>> game.mkdir()
>>> _ = (game / "game.py").write_text("print('hi')")
>>> _ = (run / "config.yaml").write_text(f"env_kwargs:\\n  integration: {game}\\n")
>>> check_game_code(run)
Traceback (most recent call last):
...
metabonk_gym.errors.UntrustedGameCodeError: .../config.yaml names the game folder .../game, whose game.py is Python code that would run with your rights; refused: pass --trust-game-folder if you trust whoever made it, or name the folder yourself with --integration .../game
>>> check_game_code(run, named=[game]), check_game_code(run, trust=True)
(None, None)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.gamedata import check_folder_code
from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.training.errors import CheckpointError

#: Files of a run directory (or `tune pbt`'s `best/`) that record the run's env arguments.
RUN_FILES: tuple[str, ...] = ("config.yaml", "best/config.yaml", "model.zip", "best/model.zip")


def _integrations(node: Any, depth: int = 0) -> Iterator[str]:
    """Every `integration` value inside an `env_kwargs` mapping, anywhere in a config (flat,
    per-env sections, curriculum stages); nesting is bounded."""
    if depth > 32:
        return
    if isinstance(node, dict):
        kwargs = node.get("env_kwargs")
        if isinstance(kwargs, dict) and isinstance(kwargs.get("integration"), str | Path):
            yield str(kwargs["integration"])
        for value in node.values():
            yield from _integrations(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _integrations(value, depth + 1)


def _config_of(path: Path) -> Any:
    """The config a run file records (None when it cannot be read: its own loader says why);
    read once per version of the file (a command's checks each read every checkpoint)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read_config(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _read_config(path: Path, mtime_ns: int, size: int) -> Any:
    try:
        if path.suffix == ".zip":
            return read_model_metadata(path).get("config")
        return load_config_file(path)
    except (ConfigFileError, CheckpointError, OSError):
        return None


def run_files(source: str | Path) -> list[Path]:
    """The files of a run directory (or the model zip itself) that record its config: what
    any command that takes the run may read (`RUN_FILES` and every checkpoint, SB3's
    `checkpoints/step_N.zip` and RLlib's `checkpoints/step_N/model.zip`), so a directory
    holding only `run.json` and a checkpoint is checked like a whole run."""
    source = Path(source).expanduser()
    if source.is_file():
        return [source]
    files = [source / name for name in RUN_FILES]
    files += [path for _, path in RunDir(source).all_checkpoints()]
    return [path for path in files if path.is_file()]


def run_configs(source: str | Path) -> Iterator[tuple[Any, Path]]:
    """(config, file) for every file of `run_files(source)` whose config can be read."""
    for path in run_files(source):
        config = _config_of(path)
        if config is not None:
            yield config, path


def named_game_folders(source: str | Path) -> list[tuple[Path, Path]]:
    """(game folder, the file naming it) for every game folder a run directory or model zip
    records (`env_kwargs.integration`; a relative path is taken from here, as the env takes it)."""
    found: list[tuple[Path, Path]] = []
    for config, path in run_configs(source):
        for folder in _integrations(config):
            found.append((Path(folder).expanduser(), path))
    return found


def check_game_code(
    source: str | Path, *, trust: bool = False, named: Iterable[str | Path | None] = ()
) -> None:
    """Refuse (`UntrustedGameCodeError`) a run directory or model zip that names a game folder
    with a `game.py` that is neither bundled, nor in `named`, nor trusted (`trust=True`)."""
    named = list(named)
    for folder, named_by in named_game_folders(source):
        check_folder_code(folder, named_by, named=named, trust=trust)
