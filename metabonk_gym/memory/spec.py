"""`WorldSpec`: what the memory reads from a game, as its folder's `quests.yaml` declares it.

What: the `world:` section names the area and world variables, the player's position and HP, the
RAM array of tile classes (the folder's `tile_classes`) and which classes are walkable, doors or
locked doors, the entities (tile classes on the map, or x/y/active arrays of moving things) and the
events (a variable's change). Why: the memory stays generic; a game is data in its own folder,
and a folder without a `world:` section still gets areas, the player and the quest log.

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> spec = WorldSpec.from_game(GameData(bundled_game_folder("BonkQuest")))
>>> spec.area, spec.tiles, spec.kind_of(spec.class_ids["door_locked"])
('room', 'room_tiles', 'locked')
>>> [e.kind for e in spec.events][:3]
['picked_up', 'picked_up', 'opened']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from metabonk_gym.gamedata import GameData
from metabonk_gym.memory.conditions import ConditionError, check_keys

#: The keys a `world:` mapping and its entries may hold (anything else is a typo, refused).
WORLD_KEYS = (
    "area", "world", "player", "hp", "tiles", "walkable", "doors", "locked", "entities", "events"
)  # fmt: skip
ENTITY_KEYS = ("kind", "name", "tile", "state", "x", "y", "active")
EVENT_KEYS = ("kind", "what", "variable", "change", "entity", "state", "note")

CHANGES = ("increased", "decreased", "changed")


@dataclass(frozen=True)
class EntityRule:
    """Entities of one kind: a tile class on the map, or x/y(/active) arrays (moving things)."""

    kind: str
    name: str
    tile: int | None = None
    state: str = ""
    x: str = ""
    y: str = ""
    active: str = ""


@dataclass(frozen=True)
class EventRule:
    """An event (`kind`, about `what`) when `variable` changes as `change` says; the nearest
    entity of kind `entity` in the area, if any, then gets `state`; `note` lists variables
    whose values the event keeps (what an NPC said)."""

    kind: str
    what: str
    variable: str
    change: str = "changed"
    entity: str = ""
    state: str = ""
    #: variables whose values the event records (`note`: "name=value ..."), e.g. what was said
    note: tuple[str, ...] = ()

    def fired(self, before: int, now: int) -> bool:
        """Whether the change from `before` to `now` is this event."""
        if self.change == "increased":
            return now > before
        if self.change == "decreased":
            return now < before
        return now != before


@dataclass(frozen=True)
class WorldSpec:
    """The parsed `world:` section (see the module docstring); `class_ids` maps tile class
    names to ids, `class_names` ids to names."""

    area: str = ""
    world: str = ""
    player: tuple[str, str] | None = None
    hp: str = ""
    tiles: str = ""
    class_ids: dict[str, int] = field(default_factory=dict)
    walkable: frozenset[int] = frozenset()
    doors: frozenset[int] = frozenset()
    locked: frozenset[int] = frozenset()
    entities: tuple[EntityRule, ...] = ()
    events: tuple[EventRule, ...] = ()

    @property
    def class_names(self) -> dict[int, str]:
        """Tile id -> class name (several ids may share a name)."""
        return {i: n for n, i in self.class_ids.items()}

    def kind_of(self, tile: int) -> str:
        """A tile id's kind for the graph: door, locked, walkable or wall.

        >>> WorldSpec(walkable=frozenset({0})).kind_of(0), WorldSpec().kind_of(3)
        ('walkable', 'wall')
        """
        if tile in self.locked:
            return "locked"
        if tile in self.doors:
            return "door"
        return "walkable" if tile in self.walkable else "wall"

    @classmethod
    def from_game(cls, game: GameData) -> WorldSpec:
        """The spec of a game folder (an empty one when its quests file has no `world:`)."""
        return cls.parse(game.quests().get("world") or {}, game.tile_classes(), str(game.folder))

    @classmethod
    def parse(
        cls, data: Mapping[str, Any], class_ids: Mapping[str, int], where: str = "quests"
    ) -> WorldSpec:
        """Read a `world:` mapping; `ConditionError` names the bad entry."""
        if not isinstance(data, Mapping):
            raise ConditionError(f"{where}: 'world' must be a mapping")
        check_keys(data, WORLD_KEYS, f"{where}: world")
        ids = dict(class_ids)

        def tile_set(key: str) -> frozenset[int]:
            names = data.get(key) or []
            unknown = [n for n in names if n not in ids]
            if unknown:
                raise ConditionError(
                    f"{where}: world.{key} names unknown tile classes {unknown}; known: "
                    f"{', '.join(sorted(ids))}"
                )
            return frozenset(ids[n] for n in names)

        entities = []
        for i, raw in enumerate(data.get("entities") or []):
            if not isinstance(raw, Mapping) or "kind" not in raw:
                raise ConditionError(f"{where}: world.entities[{i}] needs a 'kind'")
            check_keys(raw, ENTITY_KEYS, f"{where}: world.entities[{i}]")
            tile = raw.get("tile")
            if tile is not None and tile not in ids:
                raise ConditionError(f"{where}: world.entities[{i}]: unknown tile class {tile!r}")
            if tile is None and not (raw.get("x") and raw.get("y")):
                raise ConditionError(f"{where}: world.entities[{i}] needs 'tile' or 'x' and 'y'")
            entities.append(
                EntityRule(
                    kind=str(raw["kind"]),
                    name=str(raw.get("name", raw["kind"])),
                    tile=ids[tile] if tile is not None else None,
                    state=str(raw.get("state", "")),
                    x=str(raw.get("x", "")),
                    y=str(raw.get("y", "")),
                    active=str(raw.get("active", "")),
                )
            )
        events = []
        for i, raw in enumerate(data.get("events") or []):
            if not isinstance(raw, Mapping) or not {"kind", "variable"} <= set(raw):
                raise ConditionError(f"{where}: world.events[{i}] needs 'kind' and 'variable'")
            check_keys(raw, EVENT_KEYS, f"{where}: world.events[{i}]")
            change = str(raw.get("change", "changed"))
            if change not in CHANGES:
                raise ConditionError(
                    f"{where}: world.events[{i}]: change must be one of {', '.join(CHANGES)}"
                )
            events.append(
                EventRule(
                    kind=str(raw["kind"]),
                    what=str(raw.get("what", raw["variable"])),
                    variable=str(raw["variable"]),
                    change=change,
                    entity=str(raw.get("entity", "")),
                    state=str(raw.get("state", "")),
                    note=tuple(str(n) for n in raw.get("note") or ()),
                )
            )
        player = data.get("player")
        return cls(
            area=str(data.get("area", "")),
            world=str(data.get("world", "")),
            player=(str(player[0]), str(player[1])) if player else None,
            hp=str(data.get("hp", "")),
            tiles=str(data.get("tiles", "")),
            class_ids=ids,
            walkable=tile_set("walkable"),
            doors=tile_set("doors"),
            locked=tile_set("locked"),
            entities=tuple(entities),
            events=tuple(events),
        )
