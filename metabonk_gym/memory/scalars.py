"""TensorBoard scalars of the memory: `info["memory"]` of every env merged into `memory/*` tags.

What: `memory_scalars(infos)` takes the newest `info["memory"]` of each env (the `Memory`
wrapper's counters) and gives `memory/areas` (areas discovered, the mean over envs),
`memory/quests_done`, `memory/objectives_done`, `memory/entities`, `memory/events` (means) and
`memory/flush_errors` (the sum); `log_memory_scalars(writer, infos, step)` writes them with any
`add_scalar` writer (TensorBoard's `SummaryWriter`, or an SB3 logger adapter, as
`metabonk_gym.think.metrics.log_think_scalars` does for System 2). Why: the curves show whether
an agent keeps discovering and finishing quests.

>>> memory_scalars([{"memory": {"areas": 3, "quests_done": 1}}, {"memory": {"areas": 5}}])
{'memory/areas': 4.0, 'memory/quests_done': 0.5}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Counters averaged over envs; `SUMMED` are added up instead.
MEANS = ("areas", "quests_done", "objectives_done", "entities", "events")
SUMMED = ("flush_errors",)


def memory_scalars(infos: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The `memory/*` scalars of a batch of env infos (envs without `info["memory"]` are left
    out; {} when none has one)."""
    stats = [
        i["memory"]
        for i in infos
        if isinstance(i, Mapping) and isinstance(i.get("memory"), Mapping)
    ]
    if not stats:
        return {}
    out: dict[str, float] = {}
    for key in MEANS:
        values = [float(s.get(key, 0)) for s in stats]
        if any(key in s for s in stats):
            out[f"memory/{key}"] = sum(values) / len(stats)
    for key in SUMMED:
        if any(key in s for s in stats):
            out[f"memory/{key}"] = float(sum(s.get(key, 0) for s in stats))
    return out


def log_memory_scalars(
    writer: Any, infos: Iterable[Mapping[str, Any]], step: int
) -> dict[str, float]:
    """Write `memory_scalars(infos)` with `writer.add_scalar(tag, value, step)`; returns them."""
    scalars = memory_scalars(infos)
    for tag, value in scalars.items():
        writer.add_scalar(tag, value, step)
    return scalars
