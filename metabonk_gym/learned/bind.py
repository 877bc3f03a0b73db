"""Binding `learned` reward terms to an env's screen and their reward model.

Reward terms see game variables, not the screen; `bind_learned_terms(env)` gives each
`{"type": "learned", "model": PATH}` term of the env's reward the env's full-size frame
(`render()`) and the model's score. torch is imported only when the reward has such a term, so
`make_env` can call it for every env.

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0")
>>> bind_learned_terms(env)
0
>>> env.close()
"""

from __future__ import annotations

from typing import Any

from metabonk_gym.registration import env_traits
from metabonk_gym.rewards.terms import Learned


def bind_learned_terms(env: Any) -> int:
    """Bind every `learned` term of `env`'s reward; returns how many there were. A model made
    for another game is refused (`ModelFileError`)."""
    base = env.unwrapped
    fn = getattr(base, "reward_fn", None)
    terms = [t for t in getattr(fn, "terms", {}).values() if isinstance(t, Learned)]
    if not terms:
        return 0
    from metabonk_gym.learned.scorer import RewardModel

    game = env_traits(base.spec.id).game if base.spec is not None else None
    for term in terms:
        model = RewardModel(term.model)
        if game is not None:
            model.check_game(game, "the env")
        term.bind(base.render, model.score)
    return len(terms)
