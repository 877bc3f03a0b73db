"""Strategists: whatever produces directives (a VLM through an engine, the oracle, a distilled net).

What: `Strategist.request(view, history, trigger)` returns a `Future[ThinkResult]` that always
resolves to a directive, never to an exception: failures become the game's fallback directive with
the reason (`timeout`, `engine: ...`, `invalid: ...`). `ModelStrategist` builds the prompt, runs
the engine in one worker thread and parses the answer; `deadline_result` bounds how long a caller
waits.
Why futures: the same strategist serves `mode="pause"` (wait up to `timeout_s`) and `mode="async"`
(poll every step while the game runs on), and a stuck model can never stall the env loop.

>>> from metabonk_gym.think.games import adapter_for_name
>>> spec = adapter_for_name("BonkQuest").spec
>>> r = ThinkResult.fallback(spec, "timeout", "no answer within 0.5 s", latency_s=0.5)
>>> r.directive.source, r.category
('fallback', 'timeout')
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from metabonk_gym.think.directive import Directive, DirectiveError, DirectiveSpec, parse_answer
from metabonk_gym.think.engines import (
    Completion,
    Engine,
    EngineError,
    ThinkRequest,
    ThinkTimeout,
)
from metabonk_gym.think.prompts import HistoryItem, PromptBuilder
from metabonk_gym.think.view import GameView

#: Fallback categories counted in `info["think"]["fallback_reasons"]`.
FALLBACK_CATEGORIES = ("timeout", "engine", "invalid")


@dataclass
class ThinkResult:
    """The outcome of one call: the directive (maybe a fallback), the raw text, timings, tokens."""

    directive: Directive
    latency_s: float
    raw: str | None = None
    error: str | None = None
    category: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    request: ThinkRequest | None = field(default=None, repr=False)
    #: prompt tokens taken from the engine's KV cache (the constant prefix), None: not known
    cached_tokens: int | None = None

    @classmethod
    def fallback(
        cls, spec: DirectiveSpec, category: str, message: str, latency_s: float, **kwargs: Any
    ) -> ThinkResult:
        """A result carrying the safe directive; `category` is one of FALLBACK_CATEGORIES."""
        return cls(
            spec.fallback(f"{category}: {message}"),
            latency_s,
            error=message,
            category=category,
            **kwargs,
        )


class Strategist(ABC):
    """Produces directives. Subclasses: `ModelStrategist`, `OracleStrategist`, `DistilledStrategist`."""

    name = "strategist"
    vision = False

    @abstractmethod
    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        """Start thinking about `view`; the future resolves to a `ThinkResult`, never raises."""

    def cancel(self) -> None:
        """Abandon the request being worked on (its caller dropped it), never waiting, so the
        next one starts at once; its future then resolves to a fallback."""
        return None  # by default answers come at once: nothing runs long enough to cancel

    def close(self) -> None:
        """Release models, threads, connections."""
        return None  # nothing to release by default

    def describe(self) -> dict[str, Any]:
        """What to log about this strategist."""
        return {"strategist": self.name}


def done_future(result: ThinkResult) -> cf.Future[ThinkResult]:
    """A future that is already resolved (for strategists that answer at once)."""
    future: cf.Future[ThinkResult] = cf.Future()
    future.set_result(result)
    return future


class ModelStrategist(Strategist):
    """A language model behind an `Engine`, with the prompt from a `PromptBuilder`.

    Args:
        engine: the model runner (llama.cpp in process, a server); `close()` closes it.
        builder: makes each request's prompt; its adapter checks and parses the answers.
        timeout_s: seconds an answer may take (> 0); a later one becomes a `timeout` fallback.
    """

    name = "model"

    def __init__(self, engine: Engine, builder: PromptBuilder, timeout_s: float = 10.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, not {timeout_s}")
        self.engine = engine
        self.builder = builder
        self.spec = builder.adapter.spec
        self.timeout_s = float(timeout_s)
        self.vision = engine.vision
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="metabonk-think")
        self._cancels = 0  # `cancel()` calls so far: a request submitted before one is dropped

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        start = time.monotonic()
        deadline = start + self.timeout_s
        try:
            req = self.builder.build(view, history, trigger, self.vision, note)
        except Exception as exc:  # a prompt bug must not stop the game
            return done_future(
                ThinkResult.fallback(
                    self.spec, "invalid", f"prompt: {type(exc).__name__}: {exc}", 0.0
                )
            )
        return self._pool.submit(self._answer, req, start, deadline, view, self._cancels)

    def _answer(
        self,
        req: ThinkRequest,
        start: float,
        deadline: float,
        view: GameView | None = None,
        cancels: int = 0,
    ) -> ThinkResult:
        completion: Completion | None = None
        try:
            # Cancelled before the engine got it. (A `cancel()` that falls wholly between this
            # check and the engine's first line is missed: that request ends at its deadline.)
            if self._cancels != cancels:
                raise EngineError("cancelled before it was sent")
            completion = self.engine.complete(req, deadline)
            directive = parse_answer(completion.text, self.spec, req.choices)
            if view is not None:  # what the state rules out (an option the menu lacks)
                self.builder.adapter.check(directive, view)
        except ThinkTimeout as exc:
            return ThinkResult.fallback(
                self.spec, "timeout", str(exc), time.monotonic() - start, request=req
            )
        except EngineError as exc:
            return ThinkResult.fallback(
                self.spec, "engine", str(exc), time.monotonic() - start, request=req
            )
        except DirectiveError as exc:
            assert completion is not None
            return ThinkResult.fallback(
                self.spec,
                "invalid",
                str(exc),
                time.monotonic() - start,
                raw=completion.text,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                request=req,
            )
        except Exception as exc:  # anything else is an engine bug: still never raise
            return ThinkResult.fallback(
                self.spec,
                "engine",
                f"{type(exc).__name__}: {exc}",
                time.monotonic() - start,
                request=req,
            )
        latency = time.monotonic() - start
        if latency > self.timeout_s:
            return ThinkResult.fallback(
                self.spec,
                "timeout",
                f"answered after {latency:.2f} s > {self.timeout_s} s",
                latency,
                raw=completion.text,
                request=req,
            )
        return ThinkResult(
            directive,
            latency,
            raw=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            request=req,
            cached_tokens=completion.cached_tokens,
        )

    def cancel(self) -> None:
        """Cancel the request in the worker through the engine (see `Engine.cancel`)."""
        self._cancels += 1
        self.engine.cancel()

    def close(self) -> None:
        # Never waits for a request in flight: the engine cancels it.
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.engine.close()

    def describe(self) -> dict[str, Any]:
        return {"strategist": self.name, "timeout_s": self.timeout_s, **self.engine.describe()}


def deadline_result(
    future: cf.Future[ThinkResult], spec: DirectiveSpec, started: float, timeout_s: float
) -> ThinkResult:
    """Wait for `future` until `started + timeout_s` (monotonic), then give up with a fallback."""
    try:
        return future.result(timeout=max(0.0, started + timeout_s - time.monotonic()))
    except cf.TimeoutError:
        future.cancel()
        return ThinkResult.fallback(
            spec, "timeout", f"no answer within {timeout_s} s", time.monotonic() - started
        )
    except Exception as exc:  # a strategist broke its contract; still no exception in the env loop
        return ThinkResult.fallback(
            spec, "engine", f"{type(exc).__name__}: {exc}", time.monotonic() - started
        )
