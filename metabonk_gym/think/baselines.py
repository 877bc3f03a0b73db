"""Rule strategists, the baselines beside every thinking figure: `first` answers the first of
the game's numbered options, `random` a uniformly random one (seeded).

What: both read the options the choice prompt would number (`GameAdapter.options`, in the
game's order: BonkQuest lists the nearest thing first) and answer at once, with the option's
number as the raw answer, so their decision logs look like a model's. A game that offers no
options gets its fallback directive (`invalid: ...`).
Why: a model picking among options is worth something only where it beats these rules; on a
quest whose nearest option is right, "always 1" wins without a model (docs/thinking.md).

>>> from metabonk_gym.think.games import adapter_for_name
>>> adapter = adapter_for_name("BonkQuest")
>>> make_rule_strategist("first", adapter).name, make_rule_strategist("random", adapter).name
('first', 'random')
>>> RandomOptionStrategist(adapter, seed=3).pick(5) == RandomOptionStrategist(adapter, seed=3).pick(5)
True
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.engines import Completion, Engine, EngineError, ThinkRequest
from metabonk_gym.think.games import GameAdapter
from metabonk_gym.think.prompts import HistoryItem, PromptBuilder
from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
from metabonk_gym.think.view import GameView

#: The rule strategists by name (`think:first`, `--model random`, ...).
RULE_STRATEGISTS: tuple[str, ...] = ("first", "random")


class OptionStrategist(Strategist):
    """Answers one of the game's options by a rule (`pick`); see the module docstring.

    Args:
        adapter: the game's adapter, whose `options` are picked from.
        builder: given, each result carries the prompt a model would have been sent (the
            decision log then holds (prompt, answer) pairs); None: no prompt is built.
    """

    name = "options"

    def __init__(self, adapter: GameAdapter, builder: PromptBuilder | None = None) -> None:
        self.adapter = adapter
        self.builder = builder

    def pick(self, n: int) -> int:
        """The 0-based index of the option to answer among `n` (>= 1)."""
        raise NotImplementedError

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        start = time.perf_counter()
        request = None
        if self.builder is not None and self.adapter.offers_options:
            try:
                request = self.builder.build(view, history, trigger, vision=False, note=note)
            except ValueError:  # no options offered here: answered as the fallback below
                request = None
        options: Sequence[Directive] = (
            request.choices if request is not None and request.choices else self.options(view)
        )
        if not options:
            spec = self.adapter.spec
            return done_future(
                ThinkResult.fallback(
                    spec, "invalid", f"{spec.game} offers no options to pick from", 0.0
                )
            )
        index = self.pick(len(options))
        return done_future(
            ThinkResult(
                options[index],
                time.perf_counter() - start,
                raw=str(index + 1),
                request=request,
            )
        )

    def options(self, view: GameView) -> list[Directive]:
        """The game's options here (none for a game that offers none)."""
        return list(self.adapter.options(view)) if self.adapter.offers_options else []

    def describe(self) -> dict[str, Any]:
        return {"strategist": self.name}


class FirstOptionStrategist(OptionStrategist):
    """Always the first option ("always answer 1").

    Args:
        adapter: the game's adapter.
        builder: see `OptionStrategist`.
    """

    name = "first"

    def pick(self, n: int) -> int:
        return 0


class RandomOptionStrategist(OptionStrategist):
    """A uniformly random option, from its own seeded generator.

    Args:
        adapter: the game's adapter.
        builder: see `OptionStrategist`.
        seed: the generator's seed (the same seed, the same answers to the same questions).
    """

    name = "random"

    def __init__(
        self, adapter: GameAdapter, builder: PromptBuilder | None = None, seed: int = 0
    ) -> None:
        super().__init__(adapter, builder)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)

    def pick(self, n: int) -> int:
        return int(self.rng.integers(n))

    def describe(self) -> dict[str, Any]:
        return {"strategist": self.name, "seed": self.seed}


def make_rule_strategist(
    name: str, adapter: GameAdapter, builder: PromptBuilder | None = None, seed: int = 0
) -> OptionStrategist:
    """The rule strategist `name` (one of `RULE_STRATEGISTS`); `seed` seeds `random`."""
    if name == "first":
        return FirstOptionStrategist(adapter, builder)
    if name == "random":
        return RandomOptionStrategist(adapter, builder, seed=seed)
    raise ValueError(f"unknown rule strategist {name!r}; use one of {', '.join(RULE_STRATEGISTS)}")


class RuleEngine(Engine):
    """A rule strategist as an engine: answers a choice request (`ThinkRequest.choices`) with
    the number of the option its rule picks, so a benchmark that asks an engine the model's
    questions (`metabonk bench think-model --model first`) measures the rule the same way.

    Args:
        rule: the rule strategist whose `pick` answers.
    """

    def __init__(self, rule: OptionStrategist) -> None:
        self.rule = rule
        self.name = rule.name

    def complete(self, request: ThinkRequest, deadline: float) -> Completion:
        if not request.choices:
            raise EngineError(f"the {self.name!r} rule answers only the choice profile's options")
        return Completion(str(self.rule.pick(len(request.choices)) + 1), 0, 1, 0)

    def describe(self) -> dict[str, Any]:
        return {"engine": "rule", **self.rule.describe()}
