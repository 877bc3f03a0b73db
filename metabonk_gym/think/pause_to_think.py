"""`PauseToThink`: ask a strategist (a VLM, the oracle, a distilled net) for directives as you play.

What: at the right moments (start, every `think_every` steps, the directive done or expired, a
new room or menu, an HP drop, low confidence; with a cooldown) the wrapper asks System 2 for a
directive and keeps it in force until it completes or expires. `mode="pause"` holds the game
while the model thinks (free for emulators: the emulator simply is not stepped; with BonkLink the
live game keeps running, so prefer fast models there), never longer than `timeout_s`;
`mode="async"` keeps stepping on the last directive while the request runs in a worker thread and
records the delay in frames. `info["directive"]` is the directive in force, `info["think"]` the
counters (`calls`, `fallbacks`, `last_latency_s`, `last_error`, latency percentiles, success
rate). With `directive_in_obs=True` the observation becomes a Dict with the directive as numbers
(`"directive"`: action one-hot, has-tile, target dx/dy relative to the player, menu option, time
left, confidence) so a PPO policy can learn to follow it; the original observation is `"pixels"`
(or keeps its keys when it already is a Dict).
Many envs, one model: `engine="openai", base_url=...` in every env (in one process or in
`make_vec` workers) with `metabonk serve-vlm` (llama.cpp's `llama-server`, which batches the
requests over its slots) and `mode="async"`: each env keeps stepping while its request is served.
Why a wrapper: RL code trains on it unchanged; `metabonk play --agent think` uses the same
`Director` inside `ThinkAgent`.
Thinking inside training: `follow_weight` adds a `follow` reward term, the progress (in path steps
of the game's directive follower, at most one a step) toward the target of the directive in force,
times the weight; `advice_fade=[START, END]` fades the adviser out over training env steps (a
trainer calls `set_train_step`): from START to END each episode is advised with a probability
falling from 1 to 0 (the thinker is asked in advised episodes only, so it thinks less and less
often), and the follow weight falls with it. Unadvised episodes see an all-zero directive; an env
that is never told the step (eval of a finished run) plays alone, as the final policy does.

>>> import gymnasium as gym, metabonk_gym
>>> env = PauseToThink(gym.make("MetaBonk/BonkQuest-v0"), engine="oracle")
>>> obs, info = env.reset(seed=0)
>>> sorted(obs), info["directive"]["action"], info["think"]["calls"]
(['directive', 'pixels'], 'collect', 1)
>>> env.close()
>>> advice_scale([100, 300], 200), advice_scale([100, 300], None), advice_scale(None, None)
(0.5, 0.0, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.director import Director
from metabonk_gym.think.factory import make_strategist
from metabonk_gym.think.follower import make_follower
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.log import DecisionLog
from metabonk_gym.think.models import resolve_model
from metabonk_gym.think.prompts import PromptBuilder, prompt_profile
from metabonk_gym.think.strategist import Strategist
from metabonk_gym.think.view import GameView
from metabonk_gym.wrappers.registry import config_wrapper

#: Engine arguments kept out of `env.spec` (it is serialised and logged).
SECRET_KWARGS = frozenset({"api_key"})


def advice_scale(fade: Sequence[int] | None, step: int | None) -> float:
    """How much advice at training env step `step`: 1 before `fade[0]`, falling linearly to 0
    at `fade[1]`; 1 without a fade; 0 with a fade when no step is known (after training)."""
    if fade is None:
        return 1.0
    if step is None:
        return 0.0
    start, end = int(fade[0]), int(fade[1])
    if step <= start:
        return 1.0
    if step >= end:
        return 0.0
    return 1.0 - (step - start) / (end - start)


#: The default server of `engine="openai"`.
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class EngineOptions:
    """Which model answers and how it is asked (the first half of `PauseToThink`'s options).

    Args:
        engine: the language model: `"llama_cpp"` (in-process GGUF), `"openai"` (an
            OpenAI-compatible server at `base_url`, e.g. `metabonk serve-vlm`), or `"oracle"`,
            `"distilled"`, a `Strategist`.
        model_path: the GGUF (llama_cpp; None: the default model, SmolLM2-135M-Instruct, see
            `metabonk_gym.think.models`) or the distilled policy (distilled).
        mmproj_path: the vision projector GGUF (llama_cpp).
        base_url: the server's URL (openai; default `DEFAULT_BASE_URL`).
        model: the model name sent to the server (openai).
        chat_handler: the vision family (llama_cpp; "auto" detects it).
        vision: send the frame to the server (openai).
        max_tokens: the longest answer.
        game_card: replaces the integration's `game_card.md` in the system prompt.
        profile: the prompt profile: "full", "compact" (small models), or "auto" (full for
            vision models, else compact; `metabonk_gym.think.prompts.prompt_profile`).
        extra: go to the engine (`n_ctx`, `n_gpu_layers`, `api_key`, `response_format`,
            `temperature`, ...); `api_key` is left out of `env.spec` (better: set
            METABONK_API_KEY or OPENAI_API_KEY).

    >>> EngineOptions("openai", model="smol").strategist_kwargs()["base_url"]
    'http://127.0.0.1:8000/v1'
    """

    engine: str | Strategist = "llama_cpp"
    model_path: str | Path | None = None
    mmproj_path: str | Path | None = None
    base_url: str | None = None
    model: str = "default"
    chat_handler: str = "auto"
    vision: bool | None = None
    max_tokens: int = 256
    game_card: str | None = None
    profile: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)

    def strategist_kwargs(self) -> dict[str, Any]:
        """What `make_strategist` gets for this engine beside the adapter, the deadline and the
        prompt builder."""
        kwargs: dict[str, Any] = dict(self.extra)
        if self.engine == "llama_cpp":
            kwargs.update(
                model_path=resolve_model(self.model_path),
                mmproj_path=self.mmproj_path,
                chat_handler=self.chat_handler,
            )
        elif self.engine == "openai":
            base_url = self.base_url or DEFAULT_BASE_URL
            kwargs.update(base_url=base_url, model=self.model, vision=bool(self.vision))
        elif self.engine == "distilled":
            kwargs.update(model_path=self.model_path)
        return kwargs

    def sees(self) -> bool:
        """Whether the model sees the frame (a vision projector or `vision=True`)."""
        return self.mmproj_path is not None or bool(self.vision)


@dataclass(frozen=True)
class DirectorOptions:
    """When the wrapper asks and how long it waits (the second half of `PauseToThink`'s options,
    those of `metabonk_gym.think.director.Director`).

    Args:
        mode: "pause" (the env waits for the answer) or "async" (it steps on meanwhile).
        timeout_s: the longest wait for one directive (then the safe fallback).
        max_timeout_s: let that deadline grow 1.5x at a time up to this while half of the
            recent calls run out of time (`Director`); None: it stays `timeout_s`.
        think_every: think every N steps as well (0: only on events).
        cooldown_steps: steps between two non-urgent calls.
        min_confidence: ask again (after the cooldown) below this confidence.
        log_dir: write the decision log there.
        log_frames: store each call's frame as PNG in the log.

    >>> DirectorOptions(mode="async").timeout_s
    10.0
    """

    mode: str = "pause"
    timeout_s: float = 10.0
    max_timeout_s: float | None = None
    think_every: int = 0
    cooldown_steps: int = 4
    min_confidence: float = 0.25
    log_dir: str | Path | None = None
    log_frames: bool = True


#: The keyword form's names, in the order `env.spec` records them: every field of the two option
#: classes (but `extra`, whose items are keywords of their own) and the wrapper's own options.
KEYWORDS: tuple[str, ...] = (
    "engine",
    "model_path",
    "mmproj_path",
    "base_url",
    "model",
    "chat_handler",
    "vision",
    "timeout_s",
    "max_timeout_s",
    "mode",
    "think_every",
    "cooldown_steps",
    "min_confidence",
    "directive_in_obs",
    "log_dir",
    "log_frames",
    "max_tokens",
    "game_card",
    "profile",
    "follow_weight",
    "advice_fade",
    "seed",
)
_ENGINE_FIELDS = frozenset(f.name for f in fields(EngineOptions)) - {"extra"}
_DIRECTOR_FIELDS = frozenset(f.name for f in fields(DirectorOptions))


def split_options(
    engine: str | Strategist | EngineOptions,
    director: DirectorOptions | None,
    keywords: dict[str, Any],
) -> tuple[EngineOptions, DirectorOptions]:
    """The two option objects from `PauseToThink`'s arguments: `keywords` (the keyword form)
    replace the fields they name, any other keyword goes to the engine (`extra`).

    >>> e, d = split_options("oracle", None, {"timeout_s": 2.0, "n_ctx": 512})
    >>> e.engine, e.extra, d.timeout_s
    ('oracle', {'n_ctx': 512}, 2.0)
    """
    options = engine if isinstance(engine, EngineOptions) else EngineOptions(engine)
    own = {k: v for k, v in keywords.items() if k in _ENGINE_FIELDS}
    extra = {k: v for k, v in keywords.items() if k not in _ENGINE_FIELDS | _DIRECTOR_FIELDS}
    options = replace(options, **own, extra={**options.extra, **extra})
    asking = replace(
        director or DirectorOptions(),
        **{k: v for k, v in keywords.items() if k in _DIRECTOR_FIELDS},
    )
    return options, asking


def _spec_kwargs(engine: EngineOptions, director: DirectorOptions, **own: Any) -> dict[str, Any]:
    """The keyword form of the options, as `env.spec` records them (it rebuilds the same
    wrapper; never secrets: the spec is serialised and logged, and the engine reads the key
    from METABONK_API_KEY / OPENAI_API_KEY)."""
    flat: dict[str, Any] = {
        **{f: getattr(engine, f) for f in _ENGINE_FIELDS},
        **{f: getattr(director, f) for f in _DIRECTOR_FIELDS},
        **own,
    }
    name = engine.engine
    flat["engine"] = name if isinstance(name, str) else type(name).__name__
    for key in ("model_path", "mmproj_path", "log_dir"):
        flat[key] = str(flat[key]) if flat[key] else None
    if flat["advice_fade"] is not None:
        flat["advice_fade"] = list(flat["advice_fade"])
    extra = {k: v for k, v in engine.extra.items() if k not in SECRET_KWARGS}
    return {**{k: flat[k] for k in KEYWORDS}, **extra}


def _check_advice(follow_weight: float, advice_fade: Sequence[int] | None) -> None:
    if follow_weight < 0:
        raise ValueError(f"follow_weight must be >= 0, not {follow_weight}")
    if advice_fade is not None and (
        len(advice_fade) != 2 or not 0 <= int(advice_fade[0]) < int(advice_fade[1])
    ):
        raise ValueError(
            f"advice_fade must be [START, END] with 0 <= START < END, not {advice_fade}"
        )


@config_wrapper()
class PauseToThink(gym.Wrapper[Any, Any, Any, Any], RecordConstructorArgs):
    """See the module docstring.

    The options come as two objects, `EngineOptions` (which model) and `DirectorOptions`
    (when to ask), or in the keyword form, each field by its name (`engine="openai",
    base_url=..., mode="async"`); keywords replace the objects' fields.

    Args:
        env: the env to think about (a game with a think adapter, or any GBA env).
        engine: an `EngineOptions`, or just its engine (`"llama_cpp"`, `"openai"`, `"oracle"`,
            `"distilled"`, a `Strategist`).
        director: a `DirectorOptions` (None: the defaults).
        directive_in_obs: add the directive as numbers to the observation (a Dict).
        follow_weight: weight of the `follow` reward term (0: none).
        advice_fade: `[START, END]` training env steps over which the adviser fades out
            (None: advice always).
        seed: seeds the draw of advised episodes.
        **options: the keyword form: any field of `EngineOptions` or `DirectorOptions` by
            name; any other keyword goes to the engine (`EngineOptions.extra`).
    """

    #: info keys this wrapper adds (vector envs send them every step by default)
    added_info_keys: tuple[str, ...] = ("think", "directive")

    def __init__(
        self,
        env: gym.Env,
        engine: str | Strategist | EngineOptions = "llama_cpp",
        director: DirectorOptions | None = None,
        *,
        directive_in_obs: bool = True,
        follow_weight: float = 0.0,
        advice_fade: Sequence[int] | None = None,
        seed: int | None = None,
        **options: Any,
    ) -> None:
        engine_options, director_options = split_options(engine, director, options)
        own: dict[str, Any] = {"directive_in_obs": directive_in_obs, "follow_weight": follow_weight}
        own.update(advice_fade=advice_fade, seed=seed)
        RecordConstructorArgs.__init__(
            self, **_spec_kwargs(engine_options, director_options, **own)
        )
        gym.Wrapper.__init__(self, env)
        _check_advice(follow_weight, advice_fade)
        self.engine_options, self.director_options = engine_options, director_options
        self.follow_weight = float(follow_weight)
        self.advice_fade = [int(v) for v in advice_fade] if advice_fade is not None else None
        self.train_step: int | None = None
        self.advised = True
        self._rng = np.random.default_rng(seed)
        self._target: tuple[str, tuple[int, int] | None] | None = None
        self._distance: float | None = None
        self.adapter = adapter_for(env)
        self.director = self._make_director(engine_options, director_options)
        self.directive_in_obs = directive_in_obs
        self.follower = make_follower(env, self.adapter) if follow_weight > 0 else None
        self._steps = 0
        self._view: GameView | None = None
        if directive_in_obs:
            self.observation_space = self._directive_space()

    @classmethod
    def keyword_options(cls) -> list[str]:
        """The names the keyword form takes (a config's `pause_to_think` options)."""
        return list(KEYWORDS)

    def _game_card(self, given: str | None) -> str | None:
        """`given`, else the game's game_card.md (or the adapter's): the rules."""
        if given is not None:
            return given
        game_data = getattr(self.env.unwrapped, "game_data", None)
        card = game_data.game_card() if game_data is not None else None
        return card if card is not None else self.adapter.game_card()

    def _make_director(self, engine: EngineOptions, director: DirectorOptions) -> Director:
        """The prompt builder, the strategist, the decision log and the director over them."""
        builder = PromptBuilder.for_env(
            self.env,
            self.adapter,
            self._game_card(engine.game_card),
            strip=director.mode == "async",
            max_tokens=engine.max_tokens,
            profile=prompt_profile(engine.profile, vision=engine.sees()),
        )
        self.strategist = make_strategist(
            self.adapter,
            engine.engine,
            timeout_s=director.timeout_s,
            builder=builder,
            **engine.strategist_kwargs(),
        )
        log = None
        if director.log_dir is not None:
            meta = {
                "system_prompt": builder.system,
                "profile": builder.profile,
                **self.strategist.describe(),
            }
            game = self.adapter.spec.game
            log = DecisionLog(director.log_dir, game=game, frames=director.log_frames, meta=meta)
        return Director(
            self.strategist,
            self.adapter,
            mode=director.mode,
            timeout_s=director.timeout_s,
            think_every=director.think_every,
            cooldown_steps=director.cooldown_steps,
            min_confidence=director.min_confidence,
            log=log,
            max_timeout_s=director.max_timeout_s,
        )

    def _directive_space(self) -> spaces.Dict:
        """The observation space with the directive's numbers beside the env's."""
        size = self.adapter.feature_size()
        directive_space = spaces.Box(-1.0, 1.0, (size,), np.float32)
        inner = self.env.observation_space
        if isinstance(inner, spaces.Dict):
            return spaces.Dict({**inner.spaces, "directive": directive_space})
        return spaces.Dict({"pixels": inner, "directive": directive_space})

    @property
    def directive(self) -> dict[str, Any]:
        """The directive in force, as in `info["directive"]` (empty in an unadvised episode)."""
        return self.director.directive.to_dict() if self.advised else {}

    @property
    def scale(self) -> float:
        """The advice now (`advice_scale` of the fade at the last `set_train_step`)."""
        return advice_scale(self.advice_fade, self.train_step)

    def set_train_step(self, step: int) -> float:
        """A trainer's env step count (for `advice_fade`); takes effect at the next episode.
        Returns the advice scale."""
        self.train_step = int(step)
        return self.scale

    def _measure(self, directive: Directive) -> tuple[Any, float | None]:
        """The directive's target and the follower's distance to it now."""
        assert self.follower is not None and self._view is not None
        target = (directive.action, directive.tile)
        return target, self.follower.distance(self._view, directive)

    def _follow(self, before: Directive) -> float:
        """This step's progress toward the target of `before` (the directive the action was
        taken under), in path steps clipped to [-1, 1], times the weight and the scale."""
        if self.follower is None or not self.advised:
            return 0.0
        target, distance = self._measure(before)
        progress = 0.0
        if target == self._target and distance is not None and self._distance is not None:
            progress = float(np.clip(self._distance - distance, -1.0, 1.0))
        self._target, self._distance = target, distance
        return self.follow_weight * self.scale * progress

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None and self.advice_fade is not None:
            self._rng = np.random.default_rng(seed)
        self._steps = 0
        self._view = GameView.capture(self.env, info, 0, obs)
        scale = self.scale
        self.advised = scale >= 1.0 or bool(self._rng.random() < scale)
        self._target, self._distance = None, None
        if self.advised:
            self.director.reset(self._view)
            if self.follower is not None:
                self.follower.reset(seed)
                self._target, self._distance = self._measure(self.director.directive)
        return self._observation(obs), self._info(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        self._view = GameView.capture(self.env, info, self._steps, obs)
        if self.advised:
            before = self.director.directive
            self.director.update(self._view, float(reward))
            if self.follower is not None:
                bonus = self._follow(before)
                now = self.director.directive
                if (now.action, now.tile) != self._target:  # a new target: measure anew
                    self._target, self._distance = self._measure(now)
                info["reward_terms"] = {**(info.get("reward_terms") or {}), "follow": bonus}
                reward = float(reward) + bonus
        elif self.follower is not None:  # the same reward terms in every episode
            info["reward_terms"] = {**(info.get("reward_terms") or {}), "follow": 0.0}
        return self._observation(obs), reward, terminated, truncated, self._info(info)

    def close(self) -> None:
        self.director.close(self._view)
        super().close()

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = dict(info)
        info["directive"] = self.directive
        info["think"] = {**self.director.info(), "advised": self.advised, "advice": self.scale}
        return info

    def _observation(self, obs: Any) -> Any:
        if not self.directive_in_obs:
            return obs
        assert self._view is not None
        if self.advised:
            features = self.adapter.features(
                self.director.directive, self._view, self.director.frames_left()
            )
            features = np.clip(features, -1.0, 1.0).astype(np.float32)
        else:  # no advice this episode: the policy sees none
            features = np.zeros(self.adapter.feature_size(), np.float32)
        if isinstance(obs, dict):
            return {**obs, "directive": features}
        return {"pixels": obs, "directive": features}
