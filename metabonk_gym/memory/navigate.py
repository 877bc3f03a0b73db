"""Routes over what the memory remembers: areas linked by the doors walked through, A* inside one.

What: `area_route` finds the shortest chain of remembered doors between two areas (breadth first
over `CONNECTS`); `waypoint` turns a remembered place that is off screen (another area) into the
tile to walk to now: the door of the current area that starts the route, or the place itself
when it is here; `remembered_path` is A* (`metabonk_gym.experts.pathfinding`) over an area's
remembered walkable tiles. Why: the prompt can say how to reach what is out of sight, and a
screen-limited strategist can head for a remembered chest two rooms back.

>>> links = {("w:1", "w:2"): (29, 10), ("w:2", "w:1"): (0, 10), ("w:2", "w:3"): (29, 5)}
>>> area_route(links, "w:1", "w:3")
['w:1', 'w:2', 'w:3']
>>> import numpy as np
>>> remembered_path(np.ones((3, 4), bool), (0, 0), (3, 2))[-1]
(3, 2)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np

from metabonk_gym.experts.pathfinding import astar

Links = Mapping[tuple[str, str], tuple[int, int]]


def area_route(links: Links, start: str, goal: str) -> list[str] | None:
    """The areas from `start` to `goal` through remembered doors (None: no remembered way)."""
    if start == goal:
        return [start]
    parent: dict[str, str] = {start: start}
    queue = deque([start])
    while queue:
        area = queue.popleft()
        for a, b in links:
            if a == area and b not in parent:
                parent[b] = area
                if b == goal:
                    route = [b]
                    while route[-1] != start:
                        route.append(parent[route[-1]])
                    return route[::-1]
                queue.append(b)
    return None


def remembered_path(
    walkable: np.ndarray, start: tuple[int, int], goal: tuple[int, int]
) -> list[tuple[int, int]] | None:
    """A* in (x, y) cells over remembered walkable cells (`walkable[y, x]`); the goal may be a
    door or another blocked cell. None when no remembered way leads there."""
    path = astar(walkable, (start[1], start[0]), {(goal[1], goal[0])})
    return None if path is None else [(c, r) for r, c in path]


def waypoint(
    links: Links, area: str, goal_area: str, goal: tuple[int, int]
) -> tuple[tuple[int, int], int] | None:
    """Where to walk now, in the current `area`, to reach `goal` in `goal_area`, and how many
    doors lie on the way; None when the memory knows no route.

    >>> waypoint({("w:1", "w:2"): (29, 10)}, "w:1", "w:2", (4, 4))
    ((29, 10), 1)
    """
    route = area_route(links, area, goal_area)
    if route is None:
        return None
    if len(route) == 1:
        return goal, 0
    return tuple(links[(route[0], route[1])]), len(route) - 1  # type: ignore[return-value]
