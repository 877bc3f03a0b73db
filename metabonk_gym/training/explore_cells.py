"""Go-Explore cells: what makes two game states "the same place" for `metabonk explore`.

A game folder declares its cells in `cells.yaml` (any config-file format): RAM variables of its
`data.json`, each divided by a bucket size, and optionally the RAM variable that is the game's
score (Go-Explore keeps the best state per cell by score, then by the shortest trajectory):

    variables: {room: 1, player_x: 3, player_y: 3, keys: 1}
    score: score          # optional; without it the score is the env's summed reward
    repeat_prob: 0.75     # optional: how often a random action is held another step
    level: room           # optional: the cell variable that says how far into the game a cell is
    level_weight: 0.1     # optional: a cell's selection weight times this per level behind
    past_won: false       # optional: true where a win is a milestone the game goes on from
    prefer: hp            # optional: of two paths of one score, the higher value of this cell
                          # variable ranks first (the archive's best path, what robustify learns)
    favour: {keys: 2}     # optional: a cell's selection weight times 2 per bucket of keys it
                          # has more than another (e.g. the upgrades of a stronger build)

A game that declares none gets Go-Explore's domain-agnostic cells (Ecoffet et al. 2021): the
screen in grey, shrunk to 11 x 8 area means, in 8 grey levels (`ScreenCells`).

>>> cells = parse_cells({"variables": {"room": 1, "player_x": 3}}, ["room", "player_x"], "cells.yaml")
>>> cells.key([2, 17])
(2, 5)
>>> parse_cells({"variables": {"room": 0}}, ["room"], "cells.yaml")
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: cells.yaml: the bucket of 'room' must be an int >= 1, not 0
>>> ScreenCells().key(np.zeros((160, 240), np.uint8))[:3]
(0, 0, 0)
>>> parse_cells({"variables": {"room": 1}, "level": "keys"}, ["room", "keys"], "cells.yaml")
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: cells.yaml: level 'keys' must be one of the cell variables (room)
>>> parse_cells({"variables": {"room": 1, "hp": 2}, "prefer": "hp"}, ["room", "hp"], "c").prefer_column
1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.configfile import ConfigFileError, find_file, load_config_file
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.utils import did_you_mean

_GRIDS: dict[tuple[Any, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
#: The most variables a cell may combine (each is a column of the archive).
MAX_CELL_VARIABLES = 16
#: Go-Explore's weight per level behind the furthest one (Ecoffet et al. 2021, domain-knowledge
#: cells: 0.1).
DEFAULT_LEVEL_WEIGHT = 0.1
#: What a cells file and an archive's cells record (a file may also set `repeat_prob`).
_FILE_KEYS = ("variables", "score", "level", "level_weight", "past_won", "prefer", "favour")
#: The largest factor `favour` may give one bucket of a variable.
MAX_FAVOUR = 10.0


@dataclass(frozen=True)
class RamCells:
    """Cells from RAM variables: each value floor-divided by its bucket.

    Args:
        variables: (variable name, bucket size) pairs, in key order.
        score: the RAM variable that is the score (None: the env's summed reward).
        source: where the spec came from (for messages).
        repeat_prob: how often exploration repeats its last action in this game (None: the
            explorer's default); not part of what a cell is.
        level: the cell variable that measures how far into the game a cell is (Go-Explore's
            "level": a room, a stage, a slice of the clock), or None.
        level_weight: a cell's selection weight is multiplied by this once per level (the
            variable's value divided by its bucket) it lies behind the furthest level reached.
        past_won: explore on from won cells too (a game whose `won` is a milestone it goes on
            from, e.g. "the level went up since the start"); by default a won cell's state
            ends the game and is never chosen.
        prefer: a cell variable that ranks paths of equal score: the higher its value, the
            better (e.g. the HP a won path ends with); it says nothing about what a cell is.
        favour: (cell variable, factor) pairs: a cell's selection weight is multiplied by the
            factor once per bucket of the variable (a key's number) it holds; factors above 1
            favour cells with more of it (e.g. the upgrades of a stronger build).
    """

    variables: tuple[tuple[str, int], ...]
    score: str | None = None
    source: str = "cells"
    repeat_prob: float | None = None
    level: str | None = None
    level_weight: float = DEFAULT_LEVEL_WEIGHT
    past_won: bool = False
    prefer: str | None = None
    favour: tuple[tuple[str, float], ...] = ()

    @property
    def names(self) -> list[str]:
        """The variables a key reads, in order."""
        return [name for name, _ in self.variables]

    @property
    def width(self) -> int:
        """Numbers in one key."""
        return len(self.variables)

    @property
    def level_column(self) -> int | None:
        """The key's column of the level variable (None: no level)."""
        return None if self.level is None else self.names.index(self.level)

    @property
    def prefer_column(self) -> int | None:
        """The key's column of the preferred variable (None: no preference)."""
        return None if self.prefer is None else self.names.index(self.prefer)

    @property
    def favour_columns(self) -> tuple[tuple[int, float], ...]:
        """(key column, factor) of each favoured variable."""
        return tuple((self.names.index(name), factor) for name, factor in self.favour)

    def key(self, values: Sequence[int]) -> tuple[int, ...]:
        """The cell of the variables' current `values` (in `names` order)."""
        return tuple(int(v) // b for v, (_, b) in zip(values, self.variables))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what the archive records, and what `cells_from_dict` reads); the level
        only when there is one, so archives made before it existed still resume."""
        data: dict[str, Any] = {
            "kind": "ram",
            "variables": {name: bucket for name, bucket in self.variables},
            "score": self.score,
        }
        if self.level is not None:
            data["level"] = self.level
            data["level_weight"] = self.level_weight
        if self.past_won:
            data["past_won"] = True
        if self.prefer is not None:
            data["prefer"] = self.prefer
        if self.favour:
            data["favour"] = dict(self.favour)
        return data

    def describe(self) -> str:
        """One line for progress output."""
        parts = ", ".join(f"{n}/{b}" if b > 1 else n for n, b in self.variables)
        level = (
            f", level {self.level} (x{self.level_weight:g} a level behind)" if self.level else ""
        )
        favour = "".join(f", favour {n} x{f:g}" for n, f in self.favour)
        prefer = f", won paths by {self.prefer}" if self.prefer else ""
        return f"RAM cells ({parts}){level}{favour}{prefer} from {self.source}"


@dataclass(frozen=True)
class ScreenCells:
    """Go-Explore's cells from the screen: grey, `width` x `height` area means, `levels` levels.

    Args:
        width: columns of the shrunk screen.
        height: rows of the shrunk screen.
        levels: grey levels each mean is quantised to.
    """

    width: int = 11
    height: int = 8
    levels: int = 8

    @property
    def score(self) -> None:
        """Screen cells name no score variable: the score is the env's summed reward."""
        return None

    @property
    def prefer(self) -> None:
        """Screen cells have no variable to prefer."""
        return None

    @property
    def names(self) -> list[str]:
        """No RAM variables."""
        return []

    def key(self, frame: np.ndarray) -> tuple[int, ...]:
        """The cell of a frame (H x W grey, H x W x 1, or H x W x 3 RGB); a frame over 5
        pixels per cell a side is sampled every few pixels first (the means barely change, and
        a full GBA screen costs 6x more)."""
        frame = np.asarray(frame)
        stride = max(
            1, min(frame.shape[0] // (5 * self.height), frame.shape[1] // (5 * self.width))
        )
        small = frame[::stride, ::stride]
        unit = 1.0
        if small.ndim == 3 and small.shape[2] == 3:
            wide = small.astype(np.uint16)  # grey x 256 fits: the weights sum to 256
            small, unit = wide[..., 0] * 77 + wide[..., 1] * 150 + wide[..., 2] * 29, 1 / 256
        elif small.ndim == 3:
            small = small[..., 0]
        rows, cols, scale = self._grid(small.shape[0], small.shape[1])
        sums = np.add.reduceat(np.add.reduceat(small, rows, axis=0, dtype=np.uint32), cols, axis=1)
        return tuple((sums * (scale * unit)).astype(np.int64).ravel().tolist())  # ITU-R 601

    def _grid(self, height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Block starts and the factor from a block's sum to its grey level (cached by size)."""
        cache = _GRIDS.get((self, height, width))
        if cache is None:
            rows = np.linspace(0, height, self.height + 1).astype(np.intp)
            cols = np.linspace(0, width, self.width + 1).astype(np.intp)
            counts = np.outer(np.diff(rows), np.diff(cols)).astype(np.float64)
            cache = (rows[:-1], cols[:-1], self.levels / (256.0 * counts))
            _GRIDS[(self, height, width)] = cache
        return cache

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "screen", "width": self.width, "height": self.height, "levels": self.levels}

    def describe(self) -> str:
        return f"screen cells ({self.width}x{self.height}, {self.levels} grey levels)"


Cells = RamCells | ScreenCells


def _bucket(name: str, value: Any, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{source}: the bucket of {name!r} must be an int >= 1, not {value!r}")
    return value


def _unknown(name: str, known: Sequence[str], source: str, what: str) -> ConfigError:
    hint = did_you_mean(name, known)
    return ConfigError(
        f"{source}: {what} {name!r} is not a RAM variable of this game{hint}; valid: "
        f"{', '.join(sorted(known))}"
    )


def parse_cells(data: Any, known: Sequence[str], source: str) -> RamCells:
    """A checked `RamCells` from a cells file's data; `known` are the game's RAM variables."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source} must hold a mapping with 'variables' (and 'score')")
    extra = set(data) - {*_FILE_KEYS, "repeat_prob"}
    if extra:
        raise ConfigError(
            f"{source}: unknown keys {sorted(extra)}; a cells file has variables, score, "
            "repeat_prob, level, level_weight, past_won, prefer, favour"
        )
    past_won = data.get("past_won", False)
    if not isinstance(past_won, bool):
        raise ConfigError(f"{source}: past_won must be true or false, not {past_won!r}")
    repeat = data.get("repeat_prob")
    if repeat is not None and not _fraction(repeat, closed=False):
        raise ConfigError(f"{source}: repeat_prob must be a number in [0, 1), not {repeat!r}")
    variables = data.get("variables")
    if not isinstance(variables, Mapping) or not variables:
        raise ConfigError(
            f"{source}: 'variables' must map RAM variable names to bucket sizes, e.g. "
            "{room: 1, player_x: 3}"
        )
    if len(variables) > MAX_CELL_VARIABLES:
        raise ConfigError(f"{source}: at most {MAX_CELL_VARIABLES} variables, not {len(variables)}")
    pairs = []
    for name, bucket in variables.items():
        if str(name) not in known:
            raise _unknown(str(name), known, source, "variable")
        pairs.append((str(name), _bucket(str(name), bucket, source)))
    score = data.get("score")
    if score is not None:
        if not isinstance(score, str):
            raise ConfigError(f"{source}: 'score' must name a RAM variable, not {score!r}")
        if score not in known:
            raise _unknown(score, known, source, "score variable")
    names = [name for name, _ in pairs]
    level, level_weight = _level(data, names, source)
    prefer = data.get("prefer")
    if prefer is not None and (not isinstance(prefer, str) or prefer not in names):
        raise ConfigError(
            f"{source}: prefer {prefer!r} must be one of the cell variables ({', '.join(names)})"
        )
    repeat_prob = None if repeat is None else float(repeat)
    favour = _favour(data.get("favour"), names, source)
    return RamCells(
        tuple(pairs), score, source, repeat_prob, level, level_weight, past_won, prefer, favour
    )


def _favour(data: Any, names: list[str], source: str) -> tuple[tuple[str, float], ...]:
    """The checked `favour` of a cells file: cell variables to factors in (0, MAX_FAVOUR]."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: favour must map cell variables to factors, e.g. {{keys: 2}}")
    pairs = []
    for name, factor in data.items():
        if name not in names:
            raise ConfigError(
                f"{source}: favour {name!r} must be one of the cell variables ({', '.join(names)})"
            )
        number = isinstance(factor, (int, float)) and not isinstance(factor, bool)
        if not number or not 0 < factor <= MAX_FAVOUR:
            raise ConfigError(
                f"{source}: favour factor of {name!r} must be a number in (0, {MAX_FAVOUR:g}], "
                f"not {factor!r}"
            )
        pairs.append((str(name), float(factor)))
    return tuple(pairs)


def _fraction(value: Any, closed: bool) -> bool:
    """Whether `value` is a number in [0, 1) (`closed`: [0, 1])."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 <= value <= 1 if closed else 0 <= value < 1


def _level(data: Mapping[str, Any], names: list[str], source: str) -> tuple[str | None, float]:
    """The checked `level` and `level_weight` of a cells file's data."""
    level = data.get("level")
    weight = data.get("level_weight", DEFAULT_LEVEL_WEIGHT)
    if level is not None and (not isinstance(level, str) or level not in names):
        raise ConfigError(
            f"{source}: level {level!r} must be one of the cell variables ({', '.join(names)})"
        )
    if not _fraction(weight, closed=True):
        raise ConfigError(f"{source}: level_weight must be a number in [0, 1], not {weight!r}")
    if level is None and "level_weight" in data:
        raise ConfigError(f"{source}: level_weight without a level variable")
    return level, float(weight)


def load_cells(
    folder: str | Path | None, known: Sequence[str], path: str | Path | None = None
) -> Cells:
    """The cells of a game: the file `path` if given, else the game folder's `cells.*`, else
    screen cells. `known`: the game's RAM variables (empty for an env without RAM variables)."""
    if path is None and folder is not None:
        found = find_file(folder, "cells")
        path = found
    if path is None:
        return ScreenCells()
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"cells file not found: {path}")
    try:
        data = load_config_file(path)
    except ConfigFileError as exc:
        raise ConfigError(f"cells file: {exc}") from exc
    return parse_cells(data, known, str(path))


def cells_from_dict(data: Mapping[str, Any]) -> Cells:
    """The cells an archive recorded (`to_dict`), checked.

    >>> cells_from_dict(ScreenCells().to_dict())
    ScreenCells(width=11, height=8, levels=8)
    """
    kind = data.get("kind")
    if kind == "screen":
        sizes = [data.get(k) for k in ("width", "height", "levels")]
        if not all(isinstance(v, int) and 1 <= v <= 256 for v in sizes):
            raise ConfigError(
                f"screen cells need width, height, levels in 1..256, not {dict(data)}"
            )
        return ScreenCells(int(sizes[0]), int(sizes[1]), int(sizes[2]))  # type: ignore[arg-type]
    if kind == "ram":
        variables = data.get("variables")
        names = list(variables) if isinstance(variables, Mapping) else []
        score = data.get("score")
        known = names + ([score] if isinstance(score, str) else [])
        spec = {k: data[k] for k in _FILE_KEYS if k in data}
        return parse_cells(spec, known, "the archive's cells")
    raise ConfigError(f"unknown cell kind {kind!r} (ram or screen)")
