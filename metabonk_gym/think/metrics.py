"""Counters of System 2 (`info["think"]`) and the TensorBoard scalars made from them.

What: `ThinkStats` counts calls, fallbacks by reason, latencies (seconds, and frames in async
mode), how directives ended and requests dropped unanswered (async mode, at a reset);
`as_info()` is what `info["think"]` holds. `think_scalars(...)` turns it (or that info dict)
into `think/*` scalars, and `log_think_scalars(writer, ..., step)` writes them with any writer
that has `add_scalar` (torch's `SummaryWriter`) or to a log dir;
`merge_think_infos` combines the `info["think"]` of several envs. In SB3 training,
`metabonk_gym.training.callbacks.ThinkScalarsCallback` does both from the step's `infos`.
Why a helper the training code calls: PPO loops log at their own cadence; they pass
`info["think"]` from any env and get the same curves (calls, fallbacks, latency p50/p95,
fallback rate, directive success rate) as `metabonk play`.

>>> s = ThinkStats()
>>> s.record_call(0.2, None); s.record_call(1.0, "timeout"); s.record_end("done")
>>> info = s.as_info()
>>> info["calls"], info["fallbacks"], info["fallback_reasons"], info["success_rate"]
(2, 1, {'timeout': 1}, 1.0)
>>> sorted(think_scalars(info))  # doctest: +NORMALIZE_WHITESPACE
['think/calls', 'think/directive_success_rate', 'think/dropped', 'think/fallback_rate',
 'think/fallbacks', 'think/fallbacks_timeout', 'think/latency_p50_s', 'think/latency_p95_s']
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


class ThinkStats:
    """Running counters; latencies keep the last `window` calls for the percentiles."""

    def __init__(self, window: int = 1000) -> None:
        self.calls = 0
        self.fallbacks = 0
        self.reasons: Counter[str] = Counter()
        self.latencies: deque[float] = deque(maxlen=window)
        self.latency_frames: deque[int] = deque(maxlen=window)
        self.last_latency_s: float | None = None
        self.last_error: str | None = None
        self.ended: Counter[str] = Counter()
        self.dropped = 0

    def record_call(self, latency_s: float, category: str | None, error: str | None = None) -> None:
        """One answered (or failed) call; `category` is None for a valid directive."""
        self.calls += 1
        self.latencies.append(float(latency_s))
        self.last_latency_s = float(latency_s)
        if category is not None:
            self.fallbacks += 1
            self.reasons[category] += 1
            self.last_error = error or category

    def record_latency_frames(self, frames: int) -> None:
        """Async mode: how many frames the game ran while the model thought."""
        self.latency_frames.append(int(frames))

    def record_dropped(self) -> None:
        """Async mode: a request still unanswered when its episode ended (it is cancelled)."""
        self.dropped += 1

    def record_end(self, status: str) -> None:
        """A model directive ended: `done`, `expired`, `interrupted` or `episode_end`."""
        self.ended[status] += 1

    def percentile(self, q: float) -> float | None:
        """Latency percentile in seconds over the window (None before the first call)."""
        return float(np.percentile(list(self.latencies), q)) if self.latencies else None

    def as_info(self) -> dict[str, Any]:
        """The dict in `info["think"]`."""
        ended = sum(self.ended.values())
        return {
            "calls": self.calls,
            "fallbacks": self.fallbacks,
            "fallback_reasons": dict(self.reasons),
            "last_latency_s": self.last_latency_s,
            "last_error": self.last_error,
            "latency_p50_s": self.percentile(50),
            "latency_p95_s": self.percentile(95),
            "latency_frames_p50": float(np.median(list(self.latency_frames)))
            if self.latency_frames
            else None,
            "directives_ended": ended,
            "directives_done": self.ended["done"],
            "success_rate": self.ended["done"] / ended if ended else None,
            "dropped": self.dropped,
        }


def think_scalars(source: ThinkStats | dict[str, Any]) -> dict[str, float]:
    """`think/*` scalars from a `ThinkStats` or an `info["think"]` dict (missing values skipped)."""
    info = source.as_info() if isinstance(source, ThinkStats) else source
    calls = int(info.get("calls") or 0)
    out: dict[str, float] = {"think/calls": float(calls)}
    if calls:
        out["think/fallbacks"] = float(info.get("fallbacks") or 0)
        out["think/fallback_rate"] = float(info.get("fallbacks") or 0) / calls
        for reason, count in sorted((info.get("fallback_reasons") or {}).items()):
            out[f"think/fallbacks_{reason}"] = float(count)
    for key, name in (
        ("latency_p50_s", "think/latency_p50_s"),
        ("latency_p95_s", "think/latency_p95_s"),
        ("success_rate", "think/directive_success_rate"),
        ("latency_frames_p50", "think/latency_frames_p50"),
        ("dropped", "think/dropped"),
    ):
        if info.get(key) is not None:
            out[name] = float(info[key])
    return out


def merge_think_infos(infos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One `info["think"]`-style dict for several envs (a vector env): calls, fallbacks (by
    reason), ended directives and dropped requests add up; the success rate is recomputed from
    the sums; latency percentiles are the mean of the envs' own (each env keeps its own window).

    >>> a, b = ThinkStats(), ThinkStats()
    >>> a.record_call(0.2, None); b.record_call(0.4, "timeout"); b.record_end("done")
    >>> m = merge_think_infos([a.as_info(), b.as_info()])
    >>> m["calls"], m["fallbacks"], m["fallback_reasons"], m["success_rate"]
    (2, 1, {'timeout': 1}, 1.0)
    >>> round(m["latency_p50_s"], 3)
    0.3
    """
    reasons: Counter[str] = Counter()
    calls = fallbacks = ended = done = dropped = 0
    latencies: dict[str, list[float]] = {
        "latency_p50_s": [],
        "latency_p95_s": [],
        "latency_frames_p50": [],
        "last_latency_s": [],
    }
    for info in infos:
        calls += int(info.get("calls") or 0)
        fallbacks += int(info.get("fallbacks") or 0)
        ended += int(info.get("directives_ended") or 0)
        done += int(info.get("directives_done") or 0)
        dropped += int(info.get("dropped") or 0)
        reasons.update({str(k): int(v) for k, v in (info.get("fallback_reasons") or {}).items()})
        for key, values in latencies.items():
            if info.get(key) is not None:
                values.append(float(info[key]))
    out: dict[str, Any] = {
        "calls": calls,
        "fallbacks": fallbacks,
        "fallback_reasons": dict(reasons),
        "directives_ended": ended,
        "directives_done": done,
        "success_rate": done / ended if ended else None,
        "dropped": dropped,
    }
    for key, values in latencies.items():
        out[key] = float(np.mean(values)) if values else None
    return out


def log_think_scalars(
    writer: Any, source: ThinkStats | dict[str, Any], step: int
) -> dict[str, float]:
    """Write `think_scalars(source)` at `step`; `writer` has `add_scalar` or is a log-dir path
    (a `SummaryWriter` is opened, written and closed). Returns the scalars."""
    scalars = think_scalars(source)
    if isinstance(writer, (str, Path)):
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(str(writer)) as owned:
            for tag, value in scalars.items():
                owned.add_scalar(tag, value, step)
        return scalars
    for tag, value in scalars.items():
        writer.add_scalar(tag, value, step)
    return scalars
