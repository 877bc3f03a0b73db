"""What a shared run directory may make the project do: give data, never authority.

What: `check_run_options(source)` reads every config a run directory or model zip records (its
`config.yaml`, `best/`, `model.zip` and every checkpoint, as `gamecode.run_files` lists them)
and refuses, with one line naming the file, the key and the fix (`SharedRunError`), what the run
could otherwise make `eval`, `play`, `record`, `ladder` or `--resume` do with the user's rights:

- `env_kwargs` outside `RUN_ENV_KWARGS`, an allow-list of data options the env checks itself
  (preprocessing, the game and its start, reward, BonkLink's frame settings and timeouts): so a
  run names no program (`skyemu_binary`), URL or host (`skyemu_url`, `host`), ROM path or any key
  a later env may add; the user gives those with `--env-kwarg` (which replaces the run's
  `env_kwargs`), and the run's game folder has its own check (`gamecode`);
- a thinking wrapper that talks to a server (`engine: openai`, `base_url`): the user's
  `METABONK_API_KEY` / `OPENAI_API_KEY` would go to the run's URL;
- wrapper options that name files (`log_dir`, the memory wrapper's `path`, model and vocabulary
  files) outside the run's own folder (a relative path is taken from the working directory, as
  the wrapper takes it; symlinks are followed);
- numbers past `MAX_NUMBER` (or a key's own bound: `frame_size`, `past`, `max_sprites`, ...),
  strings, lists and nesting past their caps.

Options the user gives on the command line or in their own config are theirs: `given_env_kwargs`
(the user's `env_kwargs` replace the run's) and `given_wrappers` (a stack the user spells out is
checked against the run's by `wrapstack.check_wrappers_match`) skip those checks.

>>> import tempfile, pathlib
>>> run = pathlib.Path(tempfile.mkdtemp())
>>> _ = (run / "config.yaml").write_text("env_kwargs: {backend: skyemu, skyemu_binary: /bin/sh}\\n")
>>> check_run_options(run)
Traceback (most recent call last):
...
metabonk_gym.training.errors.SharedRunError: .../config.yaml sets env_kwargs.skyemu_binary; a shared run may set only data options (...), never a program, URL or path; refused: give it yourself with --env-kwarg skyemu_binary=VALUE (your --env-kwarg options replace the run's)
>>> check_run_options(run, given_env_kwargs={"backend": "skyemu", "skyemu_binary": "/bin/sh"})
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.training.errors import SharedRunError as SharedRunError  # re-exported
from metabonk_gym.training.gamecode import run_configs
from metabonk_gym.training.wrapstack import normalize_wrappers

#: The largest number any option read from a run may hold, unless its key has its own bound.
MAX_NUMBER = 1e9
#: Caps on the shape of a run's option values.
MAX_STRING = 4096
MAX_ITEMS = 4096
MAX_DEPTH = 8

#: `env_kwargs` a run may set (data the env checks), each with the largest number it may hold.
RUN_ENV_KWARGS: dict[str, float] = {
    "game": MAX_NUMBER,
    "integration": MAX_NUMBER,  # a game folder: its game.py has its own check (gamecode)
    "state": MAX_NUMBER,
    "reward": MAX_NUMBER,
    "frameskip": 1024,
    "obs_type": MAX_NUMBER,
    "downscale": 64,
    "action_space": MAX_NUMBER,
    "action_type": MAX_NUMBER,
    "sticky_action_prob": 1,
    "max_episode_steps": MAX_NUMBER,
    "backend": MAX_NUMBER,
    "check_hash": 1,
    "render_mode": MAX_NUMBER,
    "frame_size": 4096,
    "capture_size": 4096,
    "k_enemies": 256,
    "max_options": 64,
    "menu_submit": 1,
    "menu_clicks": 1 << 16,
    "frame_wait": 3600,
    "send_actions": 1,
    "connect_timeout": 3600,
    "packet_timeout": 3600,
    "reset_timeout": 3600,
}

#: Wrapper options that name files: a run may name them only inside its own folder.
PATH_OPTIONS: dict[str, tuple[str, ...]] = {
    "pause_to_think": ("log_dir", "model_path", "mmproj_path"),
    "memory": ("path",),
    "tile_tokens": ("vocabulary",),
    "temporal_strip": ("model",),
}
#: Mapping-valued wrapper options whose entries name files (`predictor_kwargs: {path: ...}`).
NESTED_PATH_OPTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("temporal_strip", "predictor_kwargs"): ("path",),
}
#: Wrapper options with a tighter bound than `MAX_NUMBER` (they size buffers or prompts).
WRAPPER_BOUNDS: dict[tuple[str, str], float] = {
    ("temporal_strip", "past"): 64,
    ("temporal_strip", "future"): 64,
    ("tile_tokens", "max_sprites"): 1024,
    ("tile_tokens", "vocabulary_size"): 1 << 16,
    ("tile_tokens", "buckets"): 1 << 16,
    ("tile_tokens", "cell"): 64,
    ("button_history", "n"): 1024,
    ("grid_overlay", "scale"): 16,
    ("grid_overlay", "every"): 1 << 16,
    ("pixel_cells", "cell"): 64,
    ("memory", "budget_tokens"): 1 << 16,
    ("memory", "flush_every"): 1 << 20,
    ("memory", "tile_every"): 1 << 16,
    ("pause_to_think", "max_tokens"): 1 << 15,
    ("pause_to_think", "timeout_s"): 600,
    ("pause_to_think", "max_timeout_s"): 600,
}
#: How the user makes a wrapper stack theirs.
YOUR_STACK = (
    "spell the wrapper stack out yourself (a --config file's wrappers:, or --set wrappers=...)"
)
#: The thinking wrapper's engine that sends requests (and the user's API key) to a server.
NETWORK_ENGINES: tuple[str, ...] = ("openai",)


def check_run_options(
    source: str | Path,
    *,
    given_env_kwargs: Mapping[str, Any] | None = None,
    given_wrappers: bool = False,
) -> None:
    """Refuse (`SharedRunError`) a run directory or model zip `source` whose config sets an
    option a shared run may not set; see the module docstring. `given_env_kwargs`: the user's
    own `env_kwargs` (they replace the run's top-level ones); `given_wrappers`: the user spelled
    out the wrapper stack (its options are theirs)."""
    folder = run_folder(source)
    for config, path in run_configs(source):
        if not isinstance(config, Mapping):
            continue
        for where, kwargs in _env_kwargs(config):
            if where == "env_kwargs" and given_env_kwargs:
                continue  # replaced by the user's
            _check_env_kwargs(kwargs, where, path, given_env_kwargs or {})
        if not given_wrappers:
            for where, specs in _wrapper_lists(config):
                _check_wrappers(specs, where, path, folder)


def run_folder(source: str | Path) -> Path:
    """The folder a run's files may write in: the run directory, or the run a model zip sits
    in (`RUN/model.zip`, `RUN/checkpoints/step_N.zip`, `RUN/checkpoints/step_N/model.zip`,
    `RUN/best/model.zip`), else the zip's own folder; symlinks resolved.

    >>> run_folder("/runs/a/checkpoints/step_000000100/model.zip").as_posix()
    '/runs/a'
    """
    path = Path(source).expanduser()
    if path.suffix != ".zip":
        return path.resolve()
    folder = path.parent
    if folder.name.startswith("step_") and folder.parent.name == "checkpoints":
        folder = folder.parent
    if folder.name in ("checkpoints", "best"):
        folder = folder.parent
    return folder.resolve()


def _env_kwargs(node: Any, where: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(dotted place, value) of every `env_kwargs` in a config (flat, per-env sections,
    curriculum stages, Dreamer's section); nesting bounded."""
    if depth > MAX_DEPTH or not isinstance(node, Mapping | list):
        return
    items = node.items() if isinstance(node, Mapping) else enumerate(node)
    for key, value in items:
        place = f"{where}.{key}" if where else str(key)
        if key == "env_kwargs":
            yield place, value
        else:
            yield from _env_kwargs(value, place, depth + 1)


def _wrapper_lists(node: Any, where: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(dotted place, value) of every `wrappers` list in a config."""
    if depth > MAX_DEPTH or not isinstance(node, Mapping):
        return
    for key, value in node.items():
        place = f"{where}.{key}" if where else str(key)
        if key == "wrappers":
            yield place, value
        elif isinstance(value, Mapping):
            yield from _wrapper_lists(value, place, depth + 1)


def _refuse(path: Path, what: str, fix: str) -> SharedRunError:
    return SharedRunError(f"{path} sets {what}; {fix}")


def _check_env_kwargs(kwargs: Any, where: str, path: Path, given: Mapping[str, Any]) -> None:
    """The run's `env_kwargs` at `where`: allow-listed keys with capped values, or keys the
    user gives too (`given`; theirs are used)."""
    if kwargs is None:
        return
    if not isinstance(kwargs, Mapping):
        raise _refuse(path, f"{where} to {_short(kwargs)}", "it must be a mapping")
    allowed = ", ".join(sorted(RUN_ENV_KWARGS))
    for key, value in kwargs.items():
        if key in given:
            continue
        if key not in RUN_ENV_KWARGS:
            raise _refuse(
                path,
                f"{where}.{_short(key)}",
                f"a shared run may set only data options ({allowed}), never a program, URL or "
                f"path; refused: give it yourself with --env-kwarg {_short(key)}=VALUE (your "
                "--env-kwarg options replace the run's)",
            )
        check_value(value, RUN_ENV_KWARGS[key], f"{where}.{key}", path)


def _check_wrappers(specs: Any, where: str, path: Path, folder: Path) -> None:
    if not isinstance(specs, list):
        return  # the config's own check says what a wrappers list must be
    if len(specs) > MAX_ITEMS:
        raise _refuse(path, f"{where} to {len(specs)} wrappers", f"at most {MAX_ITEMS}")
    # as the stack will be built: class-name aliases and `{name, options: {...}}` entries read
    # like the rest (an unknown name or option is the config's own one-line error)
    specs = normalize_wrappers(specs, f"{path} {where}")
    fix = (
        "a shared run may not name a server (your METABONK_API_KEY / OPENAI_API_KEY would go "
        f"to it); refused: {YOUR_STACK} if you trust the URL"
    )
    for spec in specs:
        name = str(spec["name"])
        for key, value in spec.items():
            place = f"{where}.{name}.{_short(key)}"
            if name == "pause_to_think" and key == "base_url" and value is not None:
                raise _refuse(path, f"{place} to {_short(value)}", fix)
            if name == "pause_to_think" and key == "engine" and value in NETWORK_ENGINES:
                raise _refuse(path, f"{place} to {value!r}", fix)
            if key in PATH_OPTIONS.get(name, ()) and isinstance(value, str | Path):
                _check_inside(Path(value), place, path, folder)
            for inner in NESTED_PATH_OPTIONS.get((name, str(key)), ()):
                named = value.get(inner) if isinstance(value, Mapping) else None
                if isinstance(named, str):
                    _check_inside(Path(named), f"{place}.{inner}", path, folder)
            bound = WRAPPER_BOUNDS.get((name, str(key)), MAX_NUMBER)
            check_value(value, bound, place, path)


def _check_inside(value: Path, place: str, path: Path, folder: Path) -> None:
    """A file a run names must be inside its folder (after symlinks)."""
    resolved = value.expanduser().resolve()
    if resolved == folder or folder in resolved.parents:
        return
    raise _refuse(
        path,
        f"{place} to {_short(str(value), PATH_LIMIT)}, outside the run's folder {folder}",
        "a shared run may write and read files only inside its own folder; refused: move the "
        f"file into the run's folder, or {YOUR_STACK}",
    )


def check_value(value: Any, bound: float, where: str, path: Path, depth: int = 0) -> None:
    """`SharedRunError` for a number past `bound` (or not finite), a string past `MAX_STRING`
    characters, a list or mapping past `MAX_ITEMS` items, or nesting past `MAX_DEPTH`.

    >>> check_value([90, 160], 4096, "env_kwargs.frame_size", Path("run/config.yaml"))
    >>> check_value({"a": [1e12]}, 4096, "env_kwargs.reward", Path("run/config.yaml"))
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.SharedRunError: run/config.yaml sets env_kwargs.reward to 1000000000000.0; a number there must be at most 4096
    """
    if depth > MAX_DEPTH:
        raise _refuse(path, where, f"its values nest more than {MAX_DEPTH} levels")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > bound:
            raise _refuse(
                path, f"{where} to {_short(value)}", f"a number there must be at most {bound:g}"
            )
    elif isinstance(value, str):
        if len(value) > MAX_STRING:
            raise _refuse(
                path, f"{where} to a {len(value)}-character text", f"at most {MAX_STRING}"
            )
    elif isinstance(value, list | Mapping):
        if len(value) > MAX_ITEMS:
            raise _refuse(path, f"{where} to {len(value)} items", f"at most {MAX_ITEMS}")
        items = value.values() if isinstance(value, Mapping) else value
        for item in items:
            check_value(item, bound, where, path, depth + 1)


#: A path in an error is shown whole up to this many characters (a user must see which file).
PATH_LIMIT = 400


def _short(value: Any, limit: int = 80) -> str:
    """`repr`-free text of a value, cut to `limit` characters (hostile values can be long)."""
    text = str(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
