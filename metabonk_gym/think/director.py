"""`Director`: when to think, which directive is in force, and how each one ended.

What: called once per env step with a `GameView`, it decides whether to ask the strategist (start,
every `think_every` steps, the directive done or expired, a new room or menu, an HP drop, low
confidence; with a cooldown), waits for the answer (`mode="pause"`, never longer than `timeout_s`)
or polls it while the game runs on (`mode="async"`, the delay recorded in frames; a request
still unanswered at a reset is dropped, cancelled and counted), keeps `ThinkStats`, the history
shown to the model, and the decision log with outcomes.
Why separate from the wrapper: `PauseToThink` (a gymnasium wrapper for RL) and `ThinkAgent`
(a playable agent for `metabonk play`) share exactly this logic.

>>> from metabonk_gym.think.games import adapter_for_name
>>> from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
>>> import numpy as np
>>> adapter = adapter_for_name("BonkQuest")
>>> class Always(Strategist):
...     def request(self, view, history, trigger, note=None):
...         return done_future(ThinkResult(adapter.spec.fallback("demo"), 0.0))
>>> director = Director(Always(), adapter)
>>> view = GameView("BonkQuest", 0, np.zeros((160, 240, 3), np.uint8), {}, {"hp": 5})
>>> director.reset(view).action, director.stats.calls
('wait', 1)
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import GameAdapter
from metabonk_gym.think.log import DecisionLog
from metabonk_gym.think.metrics import ThinkStats
from metabonk_gym.think.prompts import HistoryItem
from metabonk_gym.think.strategist import Strategist, ThinkResult, deadline_result
from metabonk_gym.think.view import GameView

logger = logging.getLogger("metabonk_gym.think")
MODES = ("pause", "async")
#: Triggers that ignore the cooldown.
URGENT = ("start", "new_room", "menu", "dialogue")
#: Calls the adaptive deadline looks back on (`Director`'s `max_timeout_s`).
DEADLINE_WINDOW = 4


@dataclass
class _Active:
    """The directive in force and the bookkeeping for its outcome."""

    call_id: int
    directive: Directive
    start: GameView
    reward: float = 0.0
    frames: int = 0


class Director:
    """See the module docstring.

    Args:
        strategist: what answers (its `request` returns a future `ThinkResult`).
        adapter: the game's `GameAdapter`: events, when a directive is done, the fallback.
        mode: "pause": each answer is awaited before the step returns; "async": the game runs
            on the old directive until the answer arrives (its delay counted in frames).
        timeout_s: seconds an answer may take (> 0); later, the fallback directive is used.
        think_every: also think every this many steps; 0 (default): only on triggers.
        cooldown_steps: steps after a call before a non-urgent trigger (done, expired, periodic,
            low confidence, ...) may call again; "start", new room, menu and dialogue ignore it.
        min_confidence: a model's directive below this confidence (0..1) is reconsidered.
        log: the `DecisionLog` that records each call and its outcome; None: no log.
        history_len: how many past directives, with their outcomes, the strategist is shown.
        max_timeout_s: let the deadline grow up to this: when half of the last
            `DEADLINE_WINDOW` calls ran out of time, it is raised 1.5x (and the strategist's
            with it). A deadline calibrated on an idle machine is short once training loads
            it; None (default): the deadline stays `timeout_s`.
    """

    def __init__(
        self,
        strategist: Strategist,
        adapter: GameAdapter,
        mode: str = "pause",
        timeout_s: float = 10.0,
        think_every: int = 0,
        cooldown_steps: int = 4,
        min_confidence: float = 0.25,
        log: DecisionLog | None = None,
        history_len: int = 8,
        max_timeout_s: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'pause' or 'async', not {mode!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, not {timeout_s}")
        self.strategist = strategist
        self.adapter = adapter
        self.mode = mode
        self.timeout_s = float(timeout_s)
        if max_timeout_s is not None and max_timeout_s < timeout_s:
            raise ValueError(
                f"max_timeout_s must be >= timeout_s ({timeout_s}), not {max_timeout_s}"
            )
        self.max_timeout_s = max_timeout_s
        self._timed_out: deque[bool] = deque(maxlen=DEADLINE_WINDOW)
        self.think_every = int(think_every)
        self.cooldown_steps = int(cooldown_steps)
        self.min_confidence = float(min_confidence)
        self.log = log
        self.history_len = history_len
        self.stats = ThinkStats()
        self.history: list[HistoryItem] = []
        self.episode = -1
        self._call_id = 0
        self._active: _Active | None = None
        self._prev: GameView | None = None
        self._last_think_step = -(10**9)
        #: async: (future, started, view asked about, trigger, step asked, status for the old one)
        self._pending: tuple[cf.Future[ThinkResult], float, GameView, str, int, str] | None = None

    # ------------------------------------------------------------------ public
    @property
    def directive(self) -> Directive:
        """The directive in force (the fallback before the first answer)."""
        if self._active is None:
            return self.adapter.spec.fallback("no directive yet")
        return self._active.directive

    def frames_left(self) -> int:
        """Frames until the directive in force expires."""
        if self._active is None:
            return 0
        return max(0, self._active.directive.duration_frames - self._active.frames)

    def reset(self, view: GameView) -> Directive:
        """A new episode: end the old directive, think about the first view."""
        self._finish("episode_end", self._prev)
        self._drop_pending()
        self.episode += 1
        self.history.clear()
        self._active = None
        self._prev = None
        self._last_think_step = -(10**9)
        return self.update(view, 0.0)

    def update(self, view: GameView, reward: float | None = None) -> Directive:
        """Account for the step that led to `view`, think if it is time; the directive in force."""
        if self._active is not None:
            self._active.frames += view.frameskip
            self._active.reward += float(reward or 0.0)
        self._poll(view)
        trigger = self._trigger(view)
        self._prev = view
        if trigger is None:
            return self.directive
        self._think(view, trigger, self._end_status(view))
        return self.directive

    def info(self) -> dict[str, Any]:
        """`info["think"]`: counters, last latency and error, pending state, frames left."""
        out = self.stats.as_info()
        out["pending"] = self._pending is not None
        out["frames_left"] = self.frames_left()
        out["mode"] = self.mode
        return out

    def close(self, view: GameView | None = None) -> None:
        """End the directive in force and stop the strategist."""
        self._finish("episode_end", view or self._prev)
        self._drop_pending()
        self.strategist.close()

    # ------------------------------------------------------------------ internals
    def _end_status(self, view: GameView) -> str:
        """How the directive in force ends if replaced now: done, expired or interrupted."""
        active = self._active
        if active is None:
            return "interrupted"
        if self.adapter.status(active.directive, active.start, view) == "done":
            return "done"
        if active.frames >= active.directive.duration_frames:
            return "expired"
        return "interrupted"

    def _trigger(self, view: GameView) -> str | None:
        if self._pending is not None:
            return None  # async: one request at a time; the game runs on the old directive
        if self._active is None:
            return "start"
        since = view.step - self._last_think_step
        events = self.adapter.events(self._prev, view)
        urgent = [e for e in events if e in URGENT]
        if urgent:
            return urgent[0]
        if since < self.cooldown_steps:
            return None
        if self.adapter.status(self._active.directive, self._active.start, view) == "done":
            return "done"
        if self._active.frames >= self._active.directive.duration_frames:
            return "expired"
        if events:
            return events[0]
        if self.think_every and since >= self.think_every:
            return "periodic"
        if (
            self._active.directive.confidence < self.min_confidence
            and self._active.directive.source != "fallback"
        ):
            return "low_confidence"
        return None

    def _think(self, view: GameView, trigger: str, status: str) -> None:
        """Ask the strategist; the directive in force ends (with `status`) when the answer is
        installed: at once in pause mode, when it arrives in async mode."""
        self._last_think_step = view.step
        started = time.monotonic()
        note = None
        if self.mode == "async":
            frames = self.stats.as_info()["latency_frames_p50"]
            note = (
                "The game keeps running while you think"
                + (f" (about {int(frames)} frames last time)" if frames else "")
                + "; plan for where things will be when your answer arrives."
            )
        future = self.strategist.request(view, self.history[-self.history_len :], trigger, note)
        if self.mode == "pause" or future.done():
            result = deadline_result(future, self.adapter.spec, started, self.timeout_s)
            self._finish(status, view)
            self._install(result, view, trigger, latency_frames=0)
        else:
            self._pending = (future, started, view, trigger, view.step, status)
            if self._active is None:  # nothing to run on yet: the safe directive meanwhile
                self._active = _Active(
                    -1, self.adapter.spec.fallback("waiting for the first answer"), view
                )

    def _poll(self, view: GameView) -> None:
        if self._pending is None:
            return
        future, started, asked, trigger, step, status = self._pending
        if not future.done() and time.monotonic() - started < self.timeout_s:
            return
        self._pending = None
        result = deadline_result(future, self.adapter.spec, started, self.timeout_s)
        frames = (view.step - step) * view.frameskip
        self.stats.record_latency_frames(frames)
        self._finish(status, view)
        self._install(result, asked, trigger, latency_frames=frames, now=view)

    def _adapt_deadline(self, timed_out: bool) -> None:
        """Raise the deadline 1.5x (up to `max_timeout_s`) once half of the last
        `DEADLINE_WINDOW` calls timed out; the window starts over after a raise."""
        if self.max_timeout_s is None:
            return
        self._timed_out.append(timed_out)
        if len(self._timed_out) < DEADLINE_WINDOW or 2 * sum(self._timed_out) < DEADLINE_WINDOW:
            return
        raised = min(self.max_timeout_s, self.timeout_s * 1.5)
        late = sum(self._timed_out)
        self._timed_out.clear()
        if raised <= self.timeout_s:
            return
        logger.warning(
            "think: %d of the last %d calls ran out of time: deadline %.1f s -> %.1f s",
            late,
            DEADLINE_WINDOW,
            self.timeout_s,
            raised,
        )
        self.timeout_s = raised
        if hasattr(self.strategist, "timeout_s"):  # a model's own cut-off moves with it
            self.strategist.timeout_s = raised

    def _install(
        self,
        result: ThinkResult,
        asked: GameView,
        trigger: str,
        latency_frames: int,
        now: GameView | None = None,
    ) -> None:
        self._call_id += 1
        self.stats.record_call(result.latency_s, result.category, result.error)
        self._adapt_deadline(result.category == "timeout")
        if result.category is not None:
            logger.warning("think fallback (%s): %s", result.category, result.error)
        if self.log is not None:
            self.log.record_call(
                self._call_id,
                asked,
                trigger,
                self.mode,
                result,
                episode=self.episode,
                state=self.adapter.state(asked),
                latency_frames=latency_frames,
            )
        self._active = _Active(self._call_id, result.directive, now or asked)
        self.history.append(HistoryItem(result.directive))

    def _finish(self, status: str, view: GameView | None) -> None:
        active = self._active
        if active is None or active.call_id < 0:
            return
        self._active = None
        hp_lost = (
            max(0, self.adapter.hp(active.start) - self.adapter.hp(view)) if view is not None else 0
        )
        outcome = {
            "status": status,
            "frames": active.frames,
            "reward": round(active.reward, 4),
            "hp_lost": hp_lost,
        }
        if active.directive.source != "fallback":
            self.stats.record_end(status)
        if self.history and self.history[-1].directive is active.directive:
            self.history[-1].outcome = outcome
        if self.log is not None:
            self.log.record_outcome(active.call_id, outcome)

    def _drop_pending(self) -> None:
        """Forget the request in flight; one already running is cancelled in the strategist, so
        its single worker is free for the next request instead of busy until the deadline."""
        if self._pending is None:
            return
        future = self._pending[0]
        self._pending = None
        self.stats.record_dropped()
        if not future.cancel() and not future.done():  # running: only the strategist can stop it
            self.strategist.cancel()
