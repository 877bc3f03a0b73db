"""Latency calibration: how long the in-process model takes here, and the think timing it implies.

What: `measure_latency(engine, builder)` asks the model a few questions shaped like the game's
real ones (the prompt profile's worked examples as the per-call text, after the constant system
prompt) and returns the cold and warm latencies; `think_timing(latency, frameskip)` derives the
deadline and the cooldown from them; `calibrated_timing(...)` does both once per model file,
game, profile, thread count and CPU count and caches the result in
`${XDG_CACHE_HOME:-~/.cache}/metabonk/think-latency.json`, so later runs start at once;
`calibrate_model(env, model)` does it for a GGUF on an env's game (`metabonk think calibrate`, and
a trainer that serves the model to its envs, `metabonk_gym.training.thinkserver`, which also
fills each server slot's prompt cache with `warm_up_slots`).
Why: a fixed 10 s deadline is far too long for a 135M model answering in under a second and far
too short for a 3B one on a CPU; deriving it from a measurement on this machine gives a CPU user
answers inside the deadline without tuning (docs/thinking.md, "Timing").

The rules (`think_timing`): the deadline is 3x the warm p50 or 1.5x the warm p95, whichever is
longer, rounded up to 0.5 s, at least 1 s and at most 60 s. In async mode (the game runs on
while the model thinks) the cooldown between two non-urgent calls is the p50 in game steps (60
frames a second over the env's frameskip), at least 4 steps, so the strategist is not asked
more often, in game time, than it answers in real time; in pause mode the game waits for each
answer, so the cooldown stays the `Director`'s 4 steps and thinking happens on events only.

>>> t = think_timing(Latency(cold_s=4.0, p50_s=0.8, p95_s=1.1, calls=5), frameskip=4)
>>> t.timeout_s, t.cooldown_steps
(2.5, 12)
>>> think_timing(Latency(cold_s=40.0, p50_s=30.0, p95_s=45.0, calls=5), frameskip=4).timeout_s
60.0
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import statistics
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from metabonk_gym.think.engines import Engine, EngineError, LlamaCppEngine, ThinkRequest
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.llama_server import cache_root
from metabonk_gym.think.models import resolve_model
from metabonk_gym.think.prompts import PromptBuilder, choice_schema, prompt_profile
from metabonk_gym.utils import atomic_write_bytes

#: The calibration cache's file name under `cache_root()`.
CACHE_NAME = "think-latency.json"
#: Questions asked after the cold one.
CALLS = 5
#: Game frames per second (GBA, Megabonk's tick rate in the stand-in).
FPS = 60
#: The longest deadline the rule gives, and how far a calibrated deadline may grow under load
#: (`Director`'s `max_timeout_s`).
MAX_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Latency:
    """Measured seconds per answer: the first (cold: the system prompt evaluated) and the
    warm p50 / p95 over `calls` answers that reuse it from the KV cache."""

    cold_s: float
    p50_s: float
    p95_s: float
    calls: int
    load_avg_1m: float = 0.0


@dataclass(frozen=True)
class ThinkTiming:
    """The deadline of an answer and the steps between two non-urgent think calls."""

    timeout_s: float
    cooldown_steps: int


def think_timing(latency: Latency, frameskip: int = 4) -> ThinkTiming:
    """The deadline and cooldown for a model of `latency` (see the module docstring)."""
    timeout = max(1.0, 3.0 * latency.p50_s, 1.5 * latency.p95_s)
    timeout = min(MAX_TIMEOUT_S, math.ceil(timeout * 2) / 2)
    cooldown = max(4, math.ceil(latency.p50_s * FPS / max(1, frameskip)))
    return ThinkTiming(timeout_s=timeout, cooldown_steps=cooldown)


def _requests(builder: PromptBuilder) -> list[ThinkRequest]:
    """Per-call texts shaped like the game's: the profile's worked examples (else one line)."""
    out = []
    for example in builder.examples or [{"user": "What now?", "answer": {}}]:
        user = str(example["user"]).strip()
        if builder.profile == "choice":
            n = sum(line[:1].isdigit() for line in user.splitlines()) or 1
            schema = choice_schema(n)
        else:
            schema = builder.schema
        out.append(ThinkRequest(builder.system, user, schema, max_tokens=builder.max_tokens))
    return out


def measure_latency(
    engine: LlamaCppEngine, builder: PromptBuilder, calls: int = CALLS, deadline_s: float = 300.0
) -> Latency:
    """Ask `engine` one cold and `calls` warm questions shaped like `builder`'s (its worked
    examples in turn); an answer that fails still counts its time. Leaves the system prompt in
    the engine's KV cache, so the game's first call is warm."""
    requests = _requests(builder)
    seconds = []
    for i in range(calls + 1):
        start = time.monotonic()
        # a timeout or a broken answer: its time is what the game would wait
        with contextlib.suppress(EngineError):
            engine.complete(requests[i % len(requests)], start + deadline_s)
        seconds.append(time.monotonic() - start)
    warm = sorted(seconds[1:])
    p95 = warm[min(len(warm) - 1, math.ceil(0.95 * len(warm)) - 1)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return Latency(seconds[0], statistics.median(warm), p95, calls, round(load, 1))


def warm_up(engine: LlamaCppEngine, builder: PromptBuilder, deadline_s: float = 300.0) -> float:
    """Evaluate the constant system prompt once, outside any think deadline (one question
    shaped like the game's), so that the first call of a game reuses it from the KV cache
    instead of spending its deadline on it; returns the seconds it took."""
    start = time.monotonic()
    with contextlib.suppress(EngineError):
        engine.complete(_requests(builder)[0], start + deadline_s)
    return time.monotonic() - start


def warm_up_slots(
    engine: Engine, builder: PromptBuilder, slots: int, deadline_s: float = 300.0
) -> float:
    """`warm_up` for a server of `slots` parallel slots (`OpenAIEngine` on llama-server): asks
    `slots` questions at once, so that each slot evaluates the system prompt into its KV cache
    outside any think deadline; returns the seconds it took."""
    start = time.monotonic()
    request = _requests(builder)[0]

    def ask(_: int) -> None:
        with contextlib.suppress(EngineError):
            engine.complete(request, start + deadline_s)

    with ThreadPoolExecutor(max_workers=max(1, slots)) as pool:
        list(pool.map(ask, range(max(1, slots))))
    return time.monotonic() - start


def cache_key(engine: LlamaCppEngine, builder: PromptBuilder) -> str:
    """What a calibration depends on: the model file (path, size, time), the game, the
    profile and its system prompt, llama.cpp's threads and the machine's CPUs."""
    path = Path(engine.model_path).resolve()
    stat = path.stat()
    threads = int(getattr(engine.llm, "n_threads", 0) or 0)
    return "|".join(
        str(part)
        for part in (
            path,
            stat.st_size,
            stat.st_mtime_ns,
            builder.adapter.spec.game,
            builder.profile,
            hashlib.sha1(builder.system.encode()).hexdigest()[:12],
            threads,
            os.cpu_count(),
        )
    )


#: The largest seconds a cached latency may state (a model slower than this is not usable).
MAX_CACHED_S = 3600.0


def cached_latency(entry: Any, where: str | os.PathLike[str] = CACHE_NAME) -> Latency | None:
    """The `Latency` a cache entry states, or None (then it is measured again) when it is of
    another version or states what no measurement gives: a negative, infinite or absurd time,
    p50 above p95, a call count that is not a small whole number. An impossible entry is said
    in a warning: someone edited the file, and a deadline from it would be wrong.

    >>> cached_latency({"cold_s": 2.0, "p50_s": 0.5, "p95_s": 0.7, "calls": 5})
    Latency(cold_s=2.0, p50_s=0.5, p95_s=0.7, calls=5, load_avg_1m=0.0)
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     cached_latency({"cold_s": 2.0, "p50_s": -1.0, "p95_s": 0.7, "calls": 5})
    >>> str(caught[0].message)
    'think-latency.json: a cached latency states p50_s -1.0, which no measurement gives; measuring again'
    """
    if not isinstance(entry, dict):
        return None
    try:
        latency = Latency(**entry)
    except TypeError:
        return None  # an entry of another version: measure again
    problem = None
    for name in ("cold_s", "p50_s", "p95_s", "load_avg_1m"):
        value = getattr(latency, name)
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if number is None or not math.isfinite(number) or not 0 <= number <= MAX_CACHED_S:
            problem = f"{name} {value!r}"
            break
    calls = latency.calls
    whole = isinstance(calls, int) and not isinstance(calls, bool)
    if problem is None and not (whole and 1 <= calls <= 1000):
        problem = f"calls {calls!r}"
    elif problem is None and latency.p50_s > latency.p95_s:
        problem = f"p50_s {latency.p50_s!r} above p95_s {latency.p95_s!r}"
    if problem is not None:
        warnings.warn(
            f"{where}: a cached latency states {problem}, which no measurement gives; "
            "measuring again",
            stacklevel=3,
        )
        return None
    return latency


def calibrated_timing(
    engine: LlamaCppEngine,
    builder: PromptBuilder,
    frameskip: int = 4,
    cache_home: str | os.PathLike[str] | None = None,
    refresh: bool = False,
) -> tuple[ThinkTiming, Latency, bool]:
    """The think timing for `engine` + `builder` on this machine: from the cache when it has
    this model, game, profile and machine (unless `refresh`), else measured and cached; either
    way the system prompt is left in the engine's KV cache (`warm_up`).
    Returns (timing, latency, whether it came from the cache)."""
    path = cache_root(cache_home) / CACHE_NAME
    key = cache_key(engine, builder)
    cache: dict[str, Any] = {}
    if path.is_file():
        try:
            cache = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cache = {}  # a broken cache is measured again and rewritten
    entry = cache.get(key) if isinstance(cache, dict) else None
    latency_or_none = cached_latency(entry, path) if entry is not None and not refresh else None
    if latency_or_none is not None:
        warm_up(engine, builder)
        return think_timing(latency_or_none, frameskip), latency_or_none, True
    latency = measure_latency(engine, builder)
    cache = cache if isinstance(cache, dict) else {}
    cache[key] = asdict(latency)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(cache, indent=1) + "\n").encode())
    return think_timing(latency, frameskip), latency, False


@dataclass(frozen=True)
class Calibration:
    """What `calibrate_model` found: the timing, the latency it comes from, whether it was
    read from the cache, and the prompts timed (`builder`: its system prompt is the game's)."""

    timing: ThinkTiming
    latency: Latency
    cached: bool
    builder: PromptBuilder

    @property
    def profile(self) -> str:
        """The prompt profile timed."""
        return self.builder.profile


def calibrate_model(
    env: Any,
    model_path: str | Path | None = None,
    frameskip: int | None = None,
    refresh: bool = False,
    cache_home: str | os.PathLike[str] | None = None,
) -> Calibration:
    """`calibrated_timing` of the GGUF `model_path` (None: the default model) loaded in this
    process on `env`'s game, with its text prompt profile (`"auto"` without vision);
    `frameskip` defaults to the env's. The model is closed afterwards."""
    adapter = adapter_for(env)
    builder = PromptBuilder.for_env(env, adapter, None, profile=prompt_profile("auto", False))
    skip = frameskip if frameskip is not None else int(getattr(env.unwrapped, "frameskip", 1))
    engine = LlamaCppEngine(resolve_model(model_path), n_ctx=4096)
    try:
        timing, latency, cached = calibrated_timing(
            engine, builder, skip, cache_home=cache_home, refresh=refresh
        )
    finally:
        engine.close()
    return Calibration(timing, latency, cached, builder)
