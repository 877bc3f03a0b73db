"""One map of a game's world: where each area lies, read from the game folder's `world_map.yaml`.

Why: a game that names its area and x/y variables (data in its folder, never a branch on its
name) gets every env's position and a heat map of visits on a single map. An area without a
`layout` entry goes on a grid of `columns` areas per row, by its number. A game whose x/y count
pixels says how many make one map cell (`cell`).

>>> spec = MapSpec(area="room", x="px", y="py", width=30, height=20, columns=2)
>>> spec.place({"room": 3, "px": 4, "py": 5})
(34, 25)
>>> spec.place({"px": 1}) is None
True
>>> MapSpec(x="px", y="py", width=30, height=20, cell=8).place({"px": 120, "py": 80})
(15, 10)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_optional
from metabonk_gym.errors import IntegrationError

MAP_FILE = "world_map"


@dataclass(frozen=True)
class MapSpec:
    """Which info variables place an env on the world map, and the size of one area.

    Args:
        area: the info variable numbering the area (room, level); None: one area.
        x, y: the info variables of the player's cell inside an area.
        width, height: cells of one area.
        columns: areas per map row (areas without a `layout` entry).
        layout: area number -> [column, row] on the map.
        name: what one area is called (shown on the page).
        cell: units of x/y per map cell (8: x/y are pixels, a cell is an 8x8 tile).
    """

    x: str
    y: str
    width: int
    height: int
    area: str | None = None
    columns: int = 4
    layout: dict[int, list[int]] = field(default_factory=dict)
    name: str = "area"
    cell: int = 1

    def origin(self, area: int) -> tuple[int, int]:
        """The map cell of an area's top-left corner."""
        col, row = self.layout.get(area, [area % self.columns, area // self.columns])
        return col * self.width, row * self.height

    def place(self, info: dict[str, Any]) -> tuple[int, int] | None:
        """The map cell of an env from its info variables, None when they are missing."""
        try:
            x, y = int(info[self.x]) // self.cell, int(info[self.y]) // self.cell
            area = int(info[self.area]) if self.area else 0
        except (KeyError, TypeError, ValueError):
            return None
        if not (0 <= x < self.width and 0 <= y < self.height) or area < 0:
            return None
        ox, oy = self.origin(area)
        return ox + x, oy + y

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_map_spec(folder: str | Path | None) -> MapSpec | None:
    """The game folder's map spec (`world_map.yaml`), None when it has none.

    >>> from metabonk_gym.gamedata import bundled_game_folder
    >>> load_map_spec(bundled_game_folder("BonkQuest")).area
    'room'
    >>> load_map_spec(None) is None
    True
    """
    if not folder or not Path(folder).is_dir():
        return None
    try:
        data = load_optional(Path(folder), MAP_FILE)
    except ConfigFileError as exc:
        raise IntegrationError(str(exc)) from exc
    if data is None:
        return None
    if not isinstance(data, dict) or not {"x", "y", "width", "height"} <= set(data):
        raise IntegrationError(
            f"{folder}/{MAP_FILE}.yaml needs x, y, width and height (and optionally area, "
            "columns, layout, name, cell)"
        )
    layout = {int(k): [int(v[0]), int(v[1])] for k, v in (data.get("layout") or {}).items()}
    return MapSpec(
        x=str(data["x"]),
        y=str(data["y"]),
        width=int(data["width"]),
        height=int(data["height"]),
        area=str(data["area"]) if data.get("area") else None,
        columns=max(1, int(data.get("columns", 4))),
        layout=layout,
        name=str(data.get("name", "area")),
        cell=max(1, int(data.get("cell", 1))),
    )
