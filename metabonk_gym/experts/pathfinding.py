"""Shortest paths on a tile grid: A* with per-cell costs (enemies make cells expensive).

>>> import numpy as np
>>> free = np.ones((3, 4), bool); free[1, 1:3] = False
>>> astar(free, (0, 0), {(2, 3)})
[(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import numpy as np

Cell = tuple[int, int]  # (row, column)

#: (d_row, d_col) of UP, DOWN, LEFT, RIGHT
STEPS: dict[str, Cell] = {"UP": (-1, 0), "DOWN": (1, 0), "LEFT": (0, -1), "RIGHT": (0, 1)}


def neighbours(cell: Cell, shape: tuple[int, int]) -> Iterable[tuple[str, Cell]]:
    for name, (dr, dc) in STEPS.items():
        r, c = cell[0] + dr, cell[1] + dc
        if 0 <= r < shape[0] and 0 <= c < shape[1]:
            yield name, (r, c)


def astar(
    passable: np.ndarray,
    start: Cell,
    goals: set[Cell],
    cost: np.ndarray | None = None,
) -> list[Cell] | None:
    """Cheapest 4-connected path from `start` to any cell of `goals` over `passable` cells (goal
    cells may be impassable: a door to bump into). `cost[r, c]` is the price of entering a cell
    (default 1). Returns the cells from start to goal, or None."""
    if not goals:
        return None
    if start in goals:
        return [start]
    shape = (int(passable.shape[0]), int(passable.shape[1]))

    def h(cell: Cell) -> int:
        return min(abs(cell[0] - g[0]) + abs(cell[1] - g[1]) for g in goals)

    best: dict[Cell, float] = {start: 0.0}
    parent: dict[Cell, Cell] = {}
    frontier: list[tuple[float, float, Cell]] = [(h(start), 0.0, start)]
    while frontier:
        _, g, cell = heapq.heappop(frontier)
        if cell in goals:
            path = [cell]
            while path[-1] != start:
                path.append(parent[path[-1]])
            return path[::-1]
        if g > best.get(cell, float("inf")):
            continue
        for _, nxt in neighbours(cell, shape):
            if not passable[nxt] and nxt not in goals:
                continue
            step = 1.0 if cost is None else float(cost[nxt])
            ng = g + step
            if ng < best.get(nxt, float("inf")):
                best[nxt] = ng
                parent[nxt] = cell
                heapq.heappush(frontier, (ng + h(nxt), ng, nxt))
    return None


def direction(a: Cell, b: Cell) -> str:
    """The move from cell `a` to the adjacent cell `b`."""
    for name, (dr, dc) in STEPS.items():
        if (a[0] + dr, a[1] + dc) == b:
            return name
    raise ValueError(f"{a} and {b} are not adjacent")
