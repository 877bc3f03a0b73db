"""`make_strategist`: a strategist by name (`oracle`, `first`, `random`, `distilled`, an engine
name) or object.

Why its own module: the strategists (`ModelStrategist`, `OracleStrategist`,
`DistilledStrategist`) each build on `metabonk_gym.think.strategist`; choosing among them here
keeps that base free of imports of its subclasses (no import cycle).

>>> from metabonk_gym.think.games import adapter_for_name
>>> make_strategist(adapter_for_name("BonkQuest"), "oracle").name
'oracle'
>>> make_strategist(adapter_for_name("BonkQuest"), "random", seed=2).describe()
{'strategist': 'random', 'seed': 2}
"""

from __future__ import annotations

from typing import Any

from metabonk_gym.think.baselines import RULE_STRATEGISTS, make_rule_strategist
from metabonk_gym.think.distill import DistilledStrategist
from metabonk_gym.think.engines import Engine, make_engine
from metabonk_gym.think.games import GameAdapter
from metabonk_gym.think.oracle import FallbackStrategist, OracleStrategist
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.strategist import ModelStrategist, Strategist


def make_strategist(
    adapter: GameAdapter,
    engine: str | Engine | Strategist,
    game_card: str | None = None,
    timeout_s: float = 10.0,
    max_tokens: int = 256,
    env: Any = None,
    builder: PromptBuilder | None = None,
    **engine_kwargs: Any,
) -> Strategist:
    """A strategist from a name (`llama_cpp`, `openai`, `oracle`, `fallback`, `first`,
    `random`, `distilled`), an `Engine` or a ready `Strategist`. `engine_kwargs` go to the engine
    (model_path=, ...); `seed=` seeds `random`."""
    if isinstance(engine, Strategist):
        return engine
    if engine == "oracle":
        return OracleStrategist(adapter, builder)
    if isinstance(engine, str) and engine in RULE_STRATEGISTS:
        return make_rule_strategist(engine, adapter, builder, int(engine_kwargs.get("seed") or 0))
    if engine == "fallback":
        return FallbackStrategist(adapter)
    if engine == "distilled":
        return DistilledStrategist(engine_kwargs["model_path"], adapter)
    if isinstance(engine, str):
        engine = make_engine(engine, **engine_kwargs)
    builder = builder or PromptBuilder(adapter, game_card, max_tokens=max_tokens)
    return ModelStrategist(engine, builder, timeout_s)
