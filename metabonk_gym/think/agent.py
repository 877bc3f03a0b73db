"""`ThinkAgent`: System 2 (a strategist) + System 1 (`DirectiveFollower`), a playable agent.

What: `make_think_agent(env, model_path=...)` builds an agent that thinks when the `Director`
says so and presses buttons with the follower every step; no RL involved. `metabonk play ENV
--agent think --model M.gguf` reaches it through `metabonk_gym.agents.registry.make_agent`.
`model_path` picks the strategist: a `.gguf` file (in-process llama-cpp-python, with
`mmproj_path` for vision), a distilled `.pt` policy (`metabonk distill`), `"oracle"`, or a rule
baseline (`"first"`, `"random"`: the first or a random option, `metabonk_gym.think.baselines`);
a `base_url` selects an OpenAI-compatible server instead.
Why an agent and not only the wrapper: `metabonk play` and `metabonk eval` drive agents over an
env they create; the agent reads the game through `env.unwrapped` (RAM, screen), and thinking
between two steps pauses the game exactly as `PauseToThink(mode="pause")` does.

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0")
>>> agent = make_think_agent(env, model_path="oracle")
>>> obs, info = env.reset(seed=3)
>>> action = agent.act(obs, info)
>>> agent.directive.source, env.action_space.contains(action)
('oracle', True)
>>> agent.close(); env.close()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.think.baselines import RULE_STRATEGISTS
from metabonk_gym.think.calibrate import MAX_TIMEOUT_S, calibrated_timing, warm_up
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.director import Director
from metabonk_gym.think.engines import LlamaCppEngine
from metabonk_gym.think.factory import make_strategist
from metabonk_gym.think.follower import DirectiveFollower, make_follower
from metabonk_gym.think.games import GameAdapter, adapter_for, game_folder
from metabonk_gym.think.log import DecisionLog
from metabonk_gym.think.models import resolve_model
from metabonk_gym.think.prompts import PromptBuilder, prompt_profile
from metabonk_gym.think.strategist import ModelStrategist, Strategist
from metabonk_gym.think.view import GameView


def strategist_kind(model_path: str | Path | None, base_url: str | None, engine: str | None) -> str:
    """Which strategist the arguments ask for: `llama_cpp`, `openai`, `distilled`, `oracle`,
    `fallback` or a rule (`first`, `random`: `metabonk_gym.think.baselines`).

    >>> strategist_kind("m.gguf", None, None), strategist_kind(None, "http://127.0.0.1:8000", None)
    ('llama_cpp', 'openai')
    >>> strategist_kind("policy.pt", None, None), strategist_kind("oracle", None, None)
    ('distilled', 'oracle')
    >>> strategist_kind(None, None, None)  # the default model (SmolLM2-135M-Instruct)
    'llama_cpp'
    >>> strategist_kind("first", None, None), strategist_kind(None, None, "random")
    ('first', 'random')
    """
    if engine:
        return engine
    if base_url:
        return "openai"
    if model_path is None:  # the default model (`metabonk_gym.think.models`), in process
        return "llama_cpp"
    text = str(model_path)
    if text in ("oracle", "fallback", *RULE_STRATEGISTS):
        return text
    if text.endswith(".pt"):
        return "distilled"
    return "llama_cpp"


def share_plan(env: Any, plan: list[int]) -> int:
    """Give `plan` (the actions after the one about to be taken) to every action-conditioned
    predictor in `env`'s wrapper stack (a wrapper's `predictor` with `set_plan`, such as
    `TemporalStrip(predictor="world-model")`); returns how many took it."""
    taken, layer = 0, env
    while layer is not None:
        set_plan = getattr(getattr(layer, "predictor", None), "set_plan", None)
        if callable(set_plan):
            set_plan(list(plan))
            taken += 1
        layer = getattr(layer, "env", None)
    return taken


class ThinkAgent:
    """Strategist + follower over one env; see the module docstring.

    Args:
        env: the env it plays (any wrapper stack; the game is read through `env.unwrapped`).
        strategist: System 2, what answers with directives; `close()` closes it.
        adapter: the game's `GameAdapter`; default: the env's game folder's (`adapter_for`).
        follower: System 1, directive to action each step; default: the game's (`make_follower`).
        **director_kwargs: the `Director`'s options (`mode`, `timeout_s`, `think_every`, ...).
    """

    name = "think"

    def __init__(
        self,
        env: gym.Env,
        strategist: Strategist,
        adapter: GameAdapter | None = None,
        follower: DirectiveFollower | None = None,
        **director_kwargs: Any,
    ) -> None:
        self.env = env
        self.adapter = adapter or adapter_for(env)
        self.follower = follower or make_follower(env, self.adapter)
        self.director = Director(strategist, self.adapter, **director_kwargs)
        self._step = 0
        self._started = False

    @property
    def directive(self) -> Directive:
        """The directive in force."""
        return self.director.directive

    def reset(
        self, obs: Any = None, info: dict[str, Any] | None = None, seed: int | None = None
    ) -> None:
        """Start of an episode (`act` calls it on its first call if nobody did)."""
        self._begin(GameView.capture(self.env, info, 0, obs), seed)

    def _begin(self, view: GameView, seed: int | None = None) -> None:
        self._step = 0
        self.follower.reset(seed)
        self.director.reset(view)
        self._started = True

    def act(self, obs: Any, info: dict[str, Any] | None = None, reward: float | None = None) -> Any:
        """The action for `obs` (thinking first when it is time): a discrete action for the GBA
        games, a Box action for Megabonk; `reward` of the last step feeds the directive outcomes
        in the decision log."""
        if not self._started:
            view = GameView.capture(self.env, info, 0, obs)
            self._begin(view)
        else:
            self._step += 1
            view = GameView.capture(self.env, info, self._step, obs)
            self.director.update(view, reward)
        action = self.follower.act(view, self.director.directive)
        share_plan(self.env, self.follower.plan)
        return action

    __call__ = act

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        """stable-baselines3-style `predict` (single env) for evaluation loops."""
        if episode_start is not None and bool(np.asarray(episode_start).reshape(-1)[0]):
            self._started = False
        return np.asarray(self.act(observation)), state

    def info(self) -> dict[str, Any]:
        """`info["think"]`-style counters."""
        return {**self.director.info(), "directive": self.directive.to_dict()}

    def close(self) -> None:
        """End the episode's bookkeeping and release the strategist."""
        self.director.close()


def make_think_agent(
    env: gym.Env,
    model_path: str | Path | None = None,
    mmproj_path: str | Path | None = None,
    base_url: str | None = None,
    model: str = "default",
    engine: str | None = None,
    chat_handler: str = "auto",
    timeout_s: float | None = None,
    mode: str = "pause",
    think_every: int = 0,
    log_dir: str | Path | None = None,
    vision: bool | None = None,
    game_card: str | None = None,
    profile: str = "auto",
    **kwargs: Any,
) -> ThinkAgent:
    """The think agent for `env` (see the module docstring for how the strategist is chosen).

    No `model_path` and no `base_url`: the default model, SmolLM2-135M-Instruct
    (`metabonk_gym.think.models`). `profile`: the prompt profile (`"full"`, `"compact"`,
    `"choice"`; `"auto"`: full for vision models, else choice where the game offers options,
    else compact, see `prompt_profile`). `timeout_s` None: for an in-process model, the
    deadline (and in async mode the cooldown) derived from a latency measured on this machine
    (`metabonk_gym.think.calibrate`, cached per model, game and machine), else 10 s.
    Extra keyword arguments go to the `Director` (`cooldown_steps`, `min_confidence`) or to the
    engine (`n_ctx`, `n_gpu_layers`, `api_key`, `response_format`, ...).
    """
    adapter = adapter_for(env)
    director_keys = {"cooldown_steps", "min_confidence", "history_len"}
    director_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in director_keys}
    kind = strategist_kind(model_path, base_url, engine)
    game_card = game_card if game_card is not None else _game_card(env, adapter)
    engine_kwargs: dict[str, Any] = dict(kwargs)
    if kind == "llama_cpp":
        engine_kwargs.update(
            model_path=resolve_model(model_path), mmproj_path=mmproj_path, chat_handler=chat_handler
        )
    elif kind == "openai":
        engine_kwargs.update(base_url=base_url, model=model, vision=bool(vision))
    elif kind == "distilled":
        engine_kwargs.update(model_path=model_path)
    profile = prompt_profile(profile, vision=mmproj_path is not None or bool(vision))
    builder = PromptBuilder.for_env(env, adapter, game_card, strip=mode == "async", profile=profile)
    strategist = make_strategist(
        adapter, kind, timeout_s=timeout_s or 10.0, builder=builder, **engine_kwargs
    )
    engine_ = getattr(strategist, "engine", None)
    in_process = isinstance(strategist, ModelStrategist) and isinstance(engine_, LlamaCppEngine)
    if timeout_s is not None and isinstance(engine_, LlamaCppEngine) and in_process:
        warm_up(engine_, builder)  # the system prompt once, outside the first call's deadline
    if timeout_s is None:
        timeout_s = 10.0
        if isinstance(strategist, ModelStrategist) and isinstance(engine_, LlamaCppEngine):
            timing, _, _ = calibrated_timing(engine_, builder, frameskip=_frameskip(env))
            timeout_s = strategist.timeout_s = timing.timeout_s
            # measured at this moment's load: let it grow if the machine gets busier
            director_kwargs.setdefault("max_timeout_s", max(MAX_TIMEOUT_S, timeout_s))
            if mode == "async":  # pause mode waits for each answer: events only
                director_kwargs.setdefault("cooldown_steps", timing.cooldown_steps)
    log = (
        DecisionLog(
            log_dir,
            game=adapter.spec.game,
            meta={
                "system_prompt": builder.system,
                "profile": builder.profile,
                "game_folder": game_folder(env),
                **strategist.describe(),
            },
        )
        if log_dir is not None
        else None
    )
    return ThinkAgent(
        env,
        strategist,
        adapter=adapter,
        mode=mode,
        timeout_s=timeout_s,
        think_every=think_every,
        log=log,
        **director_kwargs,
    )


def _frameskip(env: gym.Env) -> int:
    """Game frames per env step (the env's `frameskip`, else 1)."""
    skip = getattr(env.unwrapped, "frameskip", 1)
    return skip if isinstance(skip, int) and skip >= 1 else 1


def _game_card(env: gym.Env, adapter: GameAdapter) -> str | None:
    """The integration's `game_card.md`, else the adapter's card (Megabonk), else None."""
    integration = getattr(env.unwrapped, "integration", None)
    card = (
        integration.game_card()
        if integration is not None and hasattr(integration, "game_card")
        else None
    )
    return card if card is not None else adapter.game_card()
