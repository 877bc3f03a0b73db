"""Bring your own ROM: a game folder, RAM search sessions, watches, suggestions, tile classes and
start states (the library under `metabonk integrate`, `metabonk ram`, `metabonk tiles`).

>>> from metabonk_gym.integrate import parse_filter
>>> str(parse_filter("delta", ["-1"]))
'delta -1'
"""

from __future__ import annotations

from metabonk_gym.errors import IntegrateError
from metabonk_gym.integrate.folder import (
    add_variable,
    new_game_folder,
    save_start,
    start_state,
    start_state_file,
)
from metabonk_gym.integrate.machine import Machine, region_spans
from metabonk_gym.integrate.rom import RomInfo, read_rom
from metabonk_gym.integrate.scan import apply_filter, parse_filter, view_type
from metabonk_gym.integrate.script import parse_script
from metabonk_gym.integrate.session import Candidate, RamSearch
from metabonk_gym.integrate.suggest import rank, run_probes
from metabonk_gym.integrate.tiles import TileCollector, collect_tiles, label_tiles
from metabonk_gym.integrate.watch import Watcher, folder_variables, parse_watch

__all__ = [
    "Candidate",
    "IntegrateError",
    "Machine",
    "RamSearch",
    "RomInfo",
    "TileCollector",
    "Watcher",
    "add_variable",
    "apply_filter",
    "collect_tiles",
    "folder_variables",
    "label_tiles",
    "new_game_folder",
    "parse_filter",
    "parse_script",
    "parse_watch",
    "rank",
    "read_rom",
    "region_spans",
    "run_probes",
    "save_start",
    "start_state",
    "start_state_file",
    "view_type",
]
