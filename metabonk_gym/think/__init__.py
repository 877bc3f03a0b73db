"""System 2 for metabonk-gym: a (vision-)language model gives directives, System 1 follows them.

`PauseToThink` (`pause_to_think`; also `from metabonk_gym.wrappers import PauseToThink`) for
RL, `make_think_agent` for `metabonk play --agent think`; the parts: `directive` (schema,
lenient parse, strict checks), `games` (the game adapter; each game's own is in its folder's
`game.py`), `prompts`, `engines` (llama-cpp-python in-process, OpenAI-compatible HTTP),
`strategist` (+ `oracle`, `distill`, `factory`), `director` (when to think), `follower`
(System 1), `log`, `metrics`, `serve`, `testing` (tiny GGUFs). See docs/thinking.md.

>>> from metabonk_gym.think import DirectiveSpec
>>> DirectiveSpec(game="Demo", actions=("wait",)).fallback("timeout").action
'wait'
"""

from metabonk_gym.think.agent import ThinkAgent, make_think_agent
from metabonk_gym.think.directive import Directive, DirectiveError, DirectiveSpec, parse_directive
from metabonk_gym.think.follower import DirectiveFollower, make_follower
from metabonk_gym.think.metrics import ThinkStats, log_think_scalars, think_scalars

__all__ = [
    "Directive",
    "DirectiveError",
    "DirectiveFollower",
    "DirectiveSpec",
    "ThinkAgent",
    "ThinkStats",
    "log_think_scalars",
    "make_follower",
    "make_think_agent",
    "parse_directive",
    "think_scalars",
]
