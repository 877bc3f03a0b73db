"""One loader for config and data files: YAML, TOML and JSON, with errors that name the file.

Training configs, reward-spec files and a game folder's data (presets, defaults, milestones)
all read through `load_config_file`, so every file format behaves the same everywhere. YAML
goes through `parse_yaml`, which refuses aliases that expand a document past
`MAX_ALIAS_NODES` nodes: a 700-byte "billion laughs" file parses into a small graph of shared
lists, but anything that walks or copies it (a check, `json.dumps`) meets ~10^9 nodes.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.yaml"
>>> _ = path.write_text("a: 1\\nb: [2, 3]\\n")
>>> load_config_file(path)
{'a': 1, 'b': [2, 3]}
>>> load_optional(path.parent, "x")
{'a': 1, 'b': [2, 3]}
>>> load_optional(path.parent, "missing") is None
True
>>> parse_yaml("a: &x [1, 2]\\nb: *x\\n")
{'a': [1, 2], 'b': [1, 2]}
>>> levels = zip("abcdefgh", "bcdefghi")  # 9 ** 9 items from 9 short lines
>>> bomb = "a: &a [1,1,1,1,1,1,1,1,1]\\n" + "".join(
...     f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\\n" for p, c in levels
... )
>>> parse_yaml(bomb)
Traceback (most recent call last):
...
metabonk_gym.errors.ConfigFileError: YAML aliases expand this document past 100000 nodes (an alias bomb?); write the values out
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from metabonk_gym.errors import ConfigFileError as ConfigFileError  # re-exported

SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".toml", ".json")
#: Config files are small: refuse anything larger before parsing it.
MAX_BYTES = 8 * 1024 * 1024
#: Nodes YAML aliases may add to a document (each use of an alias counts its whole subtree).
MAX_ALIAS_NODES = 100_000


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
            data = parse_yaml(text)
        elif path.suffix == ".toml":
            data = _toml().loads(text)
        else:
            data = json.loads(text)
    except ConfigFileError as exc:
        raise ConfigFileError(f"{path}: {exc}") from None
    except Exception as exc:
        raise ConfigFileError(f"cannot parse {path}: {exc}") from exc
    return {} if data is None else data


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, refusing (`ConfigFileError`) a document whose aliases add more
    than `MAX_ALIAS_NODES` nodes or refer to themselves; the node graph is sized before any
    Python object is built."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) - _distinct_size(node) > MAX_ALIAS_NODES:
            raise ConfigFileError(
                f"YAML aliases expand this document past {MAX_ALIAS_NODES} nodes (an alias "
                "bomb?); write the values out"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _children(node: Any) -> list[Any]:
    """The child nodes of a YAML node (keys and values of a mapping)."""
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _distinct_size(root: Any) -> int:
    """Nodes in the graph, each counted once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(_children(node))
    return len(seen)


def _expanded_size(root: Any) -> int:
    """Nodes of the document as a tree (every alias expanded), capped just past the budget;
    `ConfigFileError` for an alias inside its own anchor (a recursive document)."""
    cap = MAX_ALIAS_NODES * 2 + 1
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            sizes[key] = min(cap, 1 + sum(sizes[id(c)] for c in _children(node)))
            continue
        if key in sizes:
            continue
        if key in open_:
            raise ConfigFileError("a YAML alias refers to itself (a recursive document)")
        open_.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_:
                raise ConfigFileError("a YAML alias refers to itself (a recursive document)")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


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
