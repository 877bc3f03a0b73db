"""The oracle strategist: reads the state (secrets included) and gives perfect advice, instantly.

What: `OracleStrategist` asks the game's adapter (`GameAdapter.advise`, filled in by the game's
`game.py`) for the best directive from this state: for a quest, the next step of the shortest
playthrough; for a survivor game, the best upgrade, fleeing when hurt or crowded. A game with no
oracle gets its safe fallback directive.
Why: `metabonk bench think` measures what perfect thinking is worth with the game's follower
(the ceiling a VLM could reach), and tests run the whole think loop without a model.

>>> from metabonk_gym.think.games import adapter_for_name
>>> OracleStrategist(adapter_for_name("BonkQuest")).name
'oracle'
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Sequence

from metabonk_gym.think.directive import Directive, pick_of
from metabonk_gym.think.games import GameAdapter
from metabonk_gym.think.prompts import HistoryItem, PromptBuilder
from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
from metabonk_gym.think.view import GameView


class OracleStrategist(Strategist):
    """Perfect advice from the state (`adapter.advise`); answers in microseconds.

    Args:
        adapter: the game's adapter, whose `advise` gives the directive.
        builder: given, each result carries the prompt a model would have been sent (so the
            decision log of an oracle run holds (prompt, directive) pairs for
            `metabonk think finetune`); None: no prompt is built.
    """

    name = "oracle"

    def __init__(self, adapter: GameAdapter, builder: PromptBuilder | None = None) -> None:
        self.adapter = adapter
        self.builder = builder

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        start = time.perf_counter()
        directive = self.adapter.advise(view)
        if directive is None:
            directive = self.adapter.spec.fallback("the oracle does not know this game")
        request = (
            self.builder.build(view, history, trigger, vision=False, note=note)
            if self.builder is not None
            else None
        )
        raw = None  # with the choice profile: the answer a model should give, the option's number
        if request is not None and request.choices:
            pick = pick_of(directive, request.choices)
            raw = str(pick) if pick is not None else None
        return done_future(
            ThinkResult(directive, time.perf_counter() - start, raw=raw, request=request)
        )


class FallbackStrategist(Strategist):
    """No thinking: every call answers the game's safe fallback directive at once, so System 1
    plays alone with its fallbacks (`--model fallback`; the floor `metabonk bench think-play`
    compares models with).

    Args:
        adapter: the game's adapter, whose `spec.fallback` is every answer.
    """

    name = "fallback"

    def __init__(self, adapter: GameAdapter) -> None:
        self.adapter = adapter

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        return done_future(ThinkResult(self.adapter.spec.fallback("no strategist"), 0.0))


def oracle_directive(
    goal: str, action: str, target: dict[str, int] | None, frames: int = 1200
) -> Directive:
    """A directive from the oracle (confidence 1, `source="oracle"`).

    >>> oracle_directive("take the key", "collect", {"x": 3, "y": 4}).source
    'oracle'
    """
    return Directive(goal, "read from RAM", action, target, frames, 1.0, source="oracle")
