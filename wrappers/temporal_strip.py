"""`TemporalStrip`: past frames, the present and predicted future frames in one observation.

Why: a model that sees motion (and where things will be) decides better than one that sees a
single frame, and a slow thinker needs the predicted frames to make up for its own latency
(issue: pause-to-think, async mode). The strip is also one tiled image for a VLM (`strip_image`).

`obs["strip"]` is (past + 1 + future, H, W, C) uint8: indices 0..past-1 the past frames (oldest
first), index `past` the present, then the predictions t+1..t+future. After a reset the past is
the first frame repeated. An action-conditioned predictor ("world-model") is told each action and
the step's info (which may hold `planned_actions`); its uncertainty per predicted frame goes into
`info["predicted_uncertainty"]`.

>>> import gymnasium as gym, metabonk_gym
>>> env = TemporalStrip(gym.make("MetaBonk/BonkQuest-v0"), past=2, future=1, predictor="flow")
>>> obs, _ = env.reset(seed=0)
>>> obs["strip"].shape, strip_image(obs["strip"], past=2).shape
((4, 160, 240, 3), (178, 976, 3))
>>> env.close()
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers._dict_obs import as_dict, extend_space, pixels, pixels_space
from metabonk_gym.wrappers.grid_overlay import label_font
from metabonk_gym.wrappers.predictors import Predictor, make_predictor
from metabonk_gym.wrappers.registry import config_wrapper

PAST_COLOUR = (110, 110, 110)
PRESENT_COLOUR = (60, 220, 60)
FUTURE_COLOUR = (255, 150, 0)


def strip_image(
    strip: np.ndarray, past: int, columns: int | None = None, border: int = 2, labels: bool = True
) -> np.ndarray:
    """Tile a strip (T, H, W, C) into one RGB image, `columns` frames per row (default: all in
    one row), each framed (grey past, green present, orange predicted) and labelled t-k / t /
    t+k above it.

    >>> strip_image(np.zeros((3, 8, 8, 3), np.uint8), past=1, columns=2, labels=False).shape
    (24, 24, 3)
    """
    frames = np.asarray(strip)
    if frames.ndim == 3:
        frames = frames[..., None]
    if frames.shape[-1] == 1:
        frames = np.repeat(frames, 3, axis=-1)
    count, h, w = frames.shape[:3]
    columns = count if columns is None else max(1, min(columns, count))
    rows = -(-count // columns)
    label_h = 14 if labels else 0
    cell_h, cell_w = h + 2 * border + label_h, w + 2 * border
    out = np.zeros((rows * cell_h, columns * cell_w, 3), np.uint8)
    names = []
    for i in range(count):
        r, c = divmod(i, columns)
        y0, x0 = r * cell_h + label_h, c * cell_w
        colour = PAST_COLOUR if i < past else PRESENT_COLOUR if i == past else FUTURE_COLOUR
        out[y0 : y0 + h + 2 * border, x0 : x0 + w + 2 * border] = colour
        out[y0 + border : y0 + border + h, x0 + border : x0 + border + w] = frames[i]
        offset = i - past
        names.append((x0 + 2, r * cell_h + 1, "t" if offset == 0 else f"t{offset:+d}", colour))
    if labels:
        from PIL import Image, ImageDraw

        image = Image.fromarray(out)
        draw = ImageDraw.Draw(image)
        for x, y, text, colour in names:
            draw.text((x, y), text, fill=colour, font=label_font())
        out = np.asarray(image, dtype=np.uint8)
    return out


@config_wrapper()
class TemporalStrip(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Adds `strip` (past + 1 + future, H, W, C) uint8 to the observation.

    Args:
        env: an env with an image observation (Box, or Dict with `pixels_key`).
        past, future: frames before and after the present.
        predictor: "copy", "linear", "flow", "learned", "world-model" or a `Predictor`.
        predictor_kwargs: arguments of the predictor (e.g. `{"path": "predictor.pt"}` for
            "learned").
        model: shorthand for `predictor_kwargs={"path": model}` ("learned", "world-model").
        key, pixels_key: observation keys.
    """

    #: info keys this wrapper adds (vector envs send them every step by default)
    added_info_keys: tuple[str, ...] = ("predicted_uncertainty",)

    def __init__(
        self,
        env: gym.Env,
        past: int = 5,
        future: int = 3,
        predictor: str | Predictor = "copy",
        predictor_kwargs: dict[str, Any] | None = None,
        key: str = "strip",
        pixels_key: str = "pixels",
        model: str | Path | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            past=past,
            future=future,
            predictor=predictor,
            predictor_kwargs=predictor_kwargs,
            key=key,
            pixels_key=pixels_key,
            model=None if model is None else str(model),  # the spec stays JSON
        )
        gym.ObservationWrapper.__init__(self, env)
        if past < 0 or future < 0:
            raise ValueError(f"past and future must be >= 0, not {past} and {future}")
        frame = pixels_space(env.observation_space, pixels_key)
        if len(frame.shape) != 3 or frame.dtype != np.uint8:
            raise ValueError(
                f"TemporalStrip needs (H, W, C) uint8 frames, not {frame.shape} {frame.dtype}"
            )
        self.past, self.future = int(past), int(future)
        self.key, self.pixels_key = key, pixels_key
        kwargs = dict(predictor_kwargs or {})
        if model is not None:
            kwargs.setdefault("path", model)
        self.predictor = make_predictor(predictor, **kwargs)
        bind = getattr(self.predictor, "bind", None)  # a predictor that checks the env it serves
        if callable(bind):
            bind(env, pixels_key)
        self._history: deque[np.ndarray] = deque(maxlen=self.past + 1)
        self.observation_space = extend_space(
            env.observation_space,
            pixels_key,
            {key: spaces.Box(0, 255, (self.past + 1 + self.future, *frame.shape), np.uint8)},
        )
        self.strip: np.ndarray | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._history.clear()
        self.predictor.reset()
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        observe = getattr(self.predictor, "observe_action", None)  # action-conditioned predictors
        if callable(observe):
            observe(action, info)
        out = self.observation(obs)
        spread = getattr(self.predictor, "uncertainty", None)
        if spread is not None and len(spread):
            info["predicted_uncertainty"] = [float(v) for v in spread]
        return out, reward, terminated, truncated, info

    def observation(self, observation: Any) -> dict[str, Any]:
        frame = np.asarray(pixels(observation, self.pixels_key))
        if not self._history:
            self._history.extend([frame] * (self.past + 1))
        else:
            self._history.append(frame)
        self.predictor.update(frame)
        parts = list(self._history)
        if self.future:
            parts.extend(self.predictor.predict(self.future))
        self.strip = np.stack(parts)
        out = as_dict(observation, self.pixels_key)
        out[self.key] = self.strip
        return out

    def image(self, columns: int | None = None, labels: bool = True) -> np.ndarray:
        """The last strip as one tiled image (`strip_image`)."""
        if self.strip is None:
            raise RuntimeError("no strip yet: call reset() first")
        return strip_image(self.strip, self.past, columns=columns, labels=labels)
