"""`obs_type="state"`: a game's RAM as a small float vector an MLP policy learns from quickly.

ALE offers its 128 bytes of RAM as an observation; GBA RAM is far too large for that, so an
integration declares in `metabonk.json` ("state_vector") which variables to scale and which RAM
entity arrays (enemies, pick-ups) to list as the nearest k relative to the player, the same
shape of state Megabonk's env gives (docs/integrations.md). Frames from pixels cost a CNN hours
of CPU to learn what this vector says directly.

>>> spec = StateVectorSpec.parse({
...     "origin": ["x", "y"],
...     "variables": [{"name": "x", "offset": 100, "scale": 100}, {"name": "mode", "one_hot": 2}],
...     "entities": [{"name": "foes", "x": "fx", "y": "fy", "present": "alive", "nearest": 2,
...                   "scale": 10}],
... })
>>> spec.size, spec.labels()[:4]
(9, ['x', 'mode=0', 'mode=1', 'foes[0].dx'])
>>> arrays = {"fx": np.array([130, 95, 0]), "fy": np.array([50, 50, 0]),
...           "alive": np.array([1, 1, 0])}
>>> spec.compute({"x": 100, "y": 50, "mode": 1}, arrays).tolist()
[0.0, 0.0, 1.0, -0.5, 0.0, 1.0, 3.0, 0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_CLIP = 10.0


@dataclass(frozen=True)
class ScalarFeature:
    """One variable: `(value - offset) / scale` (scale: a number or another variable's name), or a
    one-hot of `one_hot` values."""

    name: str
    offset: float = 0.0
    scale: float | str = 1.0
    one_hot: int = 0

    @property
    def size(self) -> int:
        return self.one_hot or 1


@dataclass(frozen=True)
class EntityExtra:
    """A per-entity array shown in each slot: `value / scale`, or 1.0 where `value == equals`."""

    array: str
    scale: float = 1.0
    equals: int | None = None


@dataclass(frozen=True)
class EntityList:
    """RAM arrays of entities (x, y, present): the `nearest` present ones, nearest first, each as
    (dx / scale, dy / scale, 1, extras...) relative to the origin; absent slots are zeros."""

    name: str
    x: str
    y: str
    present: str
    nearest: int
    scale: float = 1.0
    extras: tuple[EntityExtra, ...] = ()

    @property
    def slot_size(self) -> int:
        return 3 + len(self.extras)


@dataclass(frozen=True)
class StateVectorSpec:
    """A parsed `state_vector` section of `metabonk.json`."""

    origin: tuple[str, str] | None
    scalars: tuple[ScalarFeature, ...]
    entities: tuple[EntityList, ...]
    clip: float = DEFAULT_CLIP

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> StateVectorSpec:
        """Build from JSON data; a malformed section raises `ValueError` naming the field."""
        if not isinstance(data, Mapping):
            raise ValueError("state_vector must be an object")
        unknown = set(data) - {"origin", "variables", "entities", "clip"}
        if unknown:
            raise ValueError(f"state_vector: unknown keys {sorted(unknown)}")
        origin = data.get("origin")
        if origin is not None and (not isinstance(origin, list) or len(origin) != 2):
            raise ValueError("state_vector.origin must be [x_variable, y_variable]")
        try:
            scalars = tuple(
                ScalarFeature(
                    name=str(v["name"]),
                    offset=float(v.get("offset", 0.0)),
                    scale=v["scale"]
                    if isinstance(v.get("scale"), str)
                    else float(v.get("scale", 1)),
                    one_hot=int(v.get("one_hot", 0)),
                )
                for v in data.get("variables", [])
            )
            entities = tuple(
                EntityList(
                    name=str(e["name"]),
                    x=str(e["x"]),
                    y=str(e["y"]),
                    present=str(e["present"]),
                    nearest=int(e["nearest"]),
                    scale=float(e.get("scale", 1.0)),
                    extras=tuple(
                        EntityExtra(
                            array=str(x["array"]),
                            scale=float(x.get("scale", 1.0)),
                            equals=None if x.get("equals") is None else int(x["equals"]),
                        )
                        for x in e.get("extras", [])
                    ),
                )
                for e in data.get("entities", [])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"state_vector: malformed entry ({exc!r})") from exc
        if any(s.scale == 0 for s in scalars) or any(e.scale == 0 for e in entities):
            raise ValueError("state_vector: a scale of 0")
        if any(e.nearest < 1 for e in entities) or any(s.one_hot < 0 for s in scalars):
            raise ValueError("state_vector: nearest must be >= 1 and one_hot >= 0")
        if entities and origin is None:
            raise ValueError("state_vector: entities need an origin (the player's x and y)")
        spec = cls(
            origin=None if origin is None else (str(origin[0]), str(origin[1])),
            scalars=scalars,
            entities=entities,
            clip=float(data.get("clip", DEFAULT_CLIP)),
        )
        if spec.size == 0:
            raise ValueError("state_vector declares no variables and no entities")
        return spec

    @property
    def size(self) -> int:
        return sum(s.size for s in self.scalars) + sum(
            e.nearest * e.slot_size for e in self.entities
        )

    def variable_names(self) -> set[str]:
        """RAM variables (data.json) the vector reads."""
        names = {s.name for s in self.scalars}
        names |= {s.scale for s in self.scalars if isinstance(s.scale, str)}
        if self.origin is not None:
            names |= set(self.origin)
        return names

    def array_names(self) -> set[str]:
        """RAM arrays (metabonk.json "arrays") the vector reads."""
        return {
            name
            for e in self.entities
            for name in (e.x, e.y, e.present, *(x.array for x in e.extras))
        }

    def labels(self) -> list[str]:
        """A name per vector entry, for plots and debugging."""
        out: list[str] = []
        for s in self.scalars:
            out += [f"{s.name}={k}" for k in range(s.one_hot)] if s.one_hot else [s.name]
        for e in self.entities:
            for k in range(e.nearest):
                slot = [f"{e.name}[{k}].{f}" for f in ("dx", "dy", "present")]
                out += slot + [f"{e.name}[{k}].{x.array}" for x in e.extras]
        return out

    def compute(self, variables: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        """The vector for the current RAM: `variables` by name, `arrays` by name (1-D each)."""
        out = np.zeros(self.size, dtype=np.float32)
        i = 0
        for s in self.scalars:
            value = float(variables[s.name])
            if s.one_hot:
                index = int(value)
                if 0 <= index < s.one_hot:
                    out[i + index] = 1.0
                i += s.one_hot
                continue
            # a variable as the scale (hp / max_hp) is at least 1, so a zeroed RAM never divides by 0
            scale = max(float(variables[s.scale]), 1.0) if isinstance(s.scale, str) else s.scale
            out[i] = (value - s.offset) / scale
            i += 1
        if self.entities:
            assert self.origin is not None
            ox, oy = float(variables[self.origin[0]]), float(variables[self.origin[1]])
        for e in self.entities:
            present = np.flatnonzero(np.asarray(arrays[e.present]) != 0)
            dx = np.asarray(arrays[e.x], dtype=np.float64)[present] - ox
            dy = np.asarray(arrays[e.y], dtype=np.float64)[present] - oy
            order = np.argsort(np.hypot(dx, dy), kind="stable")[: e.nearest]
            slots = np.zeros((e.nearest, e.slot_size), dtype=np.float64)
            slots[: len(order), 0] = dx[order] / e.scale
            slots[: len(order), 1] = dy[order] / e.scale
            slots[: len(order), 2] = 1.0
            for j, extra in enumerate(e.extras):
                values = np.asarray(arrays[extra.array], dtype=np.float64)[present][order]
                slots[: len(order), 3 + j] = (
                    (values == extra.equals) if extra.equals is not None else values / extra.scale
                )
            out[i : i + slots.size] = slots.ravel()
            i += slots.size
        np.clip(out, -self.clip, self.clip, out=out)
        return out
