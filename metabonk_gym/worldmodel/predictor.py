"""`WorldModelPredictor`: `TemporalStrip`'s "world-model" predictor, conditioned on planned actions.

It predicts frames t+1..t+k with a trained `WorldModel` under the actions the agent plans:
`info["planned_actions"]` when the step's info has them (a planner, or a thinker that knows its
follower's next buttons, puts them there), or the plan given to `set_plan`, else the last action
repeated. `uncertainty` holds the mean predicted standard deviation (0-255) of each predicted
frame, `uncertainty_map` the per-pixel one. `bind(env)` refuses a model made for another game,
frame shape or action space.

>>> import numpy as np
>>> from metabonk_gym.worldmodel.model import WorldModel
>>> p = WorldModelPredictor(model=WorldModel(channels=3, n_actions=4, width=4))
>>> p.update(np.zeros((8, 12, 3), np.uint8))
>>> p.predict(3).shape, p.planned(3).tolist(), p.uncertainty.shape
((3, 8, 12, 3), [0, 0, 0], (3,))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.worldmodel.data import game_of
from metabonk_gym.worldmodel.files import WorldModelError, check_fits, load_world_model
from metabonk_gym.worldmodel.model import CONTEXT, WorldModel, imagine
from metabonk_gym.wrappers._dict_obs import pixels_space
from metabonk_gym.wrappers.predictors import Predictor

#: The info key a planner fills with the discrete actions it will take next (first: this step's).
PLAN_KEY = "planned_actions"


class WorldModelPredictor(Predictor):
    """Frames ahead from a world model under the planned actions (see the module docstring).

    Args:
        path: a model file or run directory (`metabonk train world-model --out DIR`).
        model: a `WorldModel` in memory instead of `path`.
        metadata: the model's metadata when `model` is given (checked by `bind`).
        device: torch device.
        threads: torch threads (None: leave as is; 1 suits subprocess envs).
        plan_key: the info key holding planned actions.
    """

    name = "world-model"
    context = CONTEXT

    def __init__(
        self,
        path: str | Path | None = None,
        model: WorldModel | None = None,
        metadata: Mapping[str, Any] | None = None,
        device: str = "cpu",
        threads: int | None = None,
        plan_key: str = PLAN_KEY,
    ) -> None:
        super().__init__()
        if threads is not None:
            import torch

            torch.set_num_threads(int(threads))
        if model is None:
            if path is None:
                raise WorldModelError(
                    "the world-model predictor needs a model: TemporalStrip(env, predictor='world-model', "
                    "model='DIR'); train one with `metabonk train world-model DATASET --out DIR`"
                )
            model, meta = load_world_model(path, device)
            metadata = meta
        self.model = model.to(device).eval()
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.source = str(path) if path is not None else "the world model"
        self.device = device
        self.plan_key = plan_key
        self.last_action: Any = 0
        self.plan: list[int] | None = None
        self._pending: list[int] | None = None
        self.uncertainty: np.ndarray = np.zeros(0)
        self.uncertainty_map: np.ndarray | None = None

    def bind(self, env: Any, pixels_key: str = "pixels") -> None:
        """Check the model fits `env` (game, frame shape, actions)."""
        import gymnasium as gym

        frame = pixels_space(env.observation_space, pixels_key)
        spec = getattr(env, "spec", None)
        space = env.action_space
        box = isinstance(space, gym.spaces.Box) and len(space.shape) == 1
        n = space.n if isinstance(space, gym.spaces.Discrete) else space.shape[0] if box else None
        if n is None:
            raise WorldModelError(
                "the world-model predictor needs a Discrete or a flat Box action space, not "
                f"{env.action_space}"
            )
        if box != bool(self.model.config.action_box):
            raise WorldModelError(
                f"{self.source} was trained on {'Box' if self.model.config.action_box else 'Discrete'}"
                f" actions, this env has {env.action_space}"
            )
        check_fits(
            self.metadata,
            game=game_of(spec.id if spec else "", env),
            obs_shape=frame.shape,
            n_actions=int(n),
            source=self.source,
        )
        if int(n) != self.model.config.n_actions:
            raise WorldModelError(
                f"{self.source} knows {self.model.config.n_actions} actions, this env has {n}"
            )

    def reset(self) -> None:
        super().reset()
        self.last_action = 0
        self.plan = None
        self._pending = None
        self.uncertainty = np.zeros(0)
        self.uncertainty_map = None

    def observe_action(self, action: Any, info: Mapping[str, Any] | None = None) -> None:
        """The action just taken and the step's info (which may hold the plan ahead)."""
        if self.model.config.action_box:  # Box actions: held as they are, no plans
            self.last_action = np.asarray(action, np.float32).reshape(-1)
            self.plan = None
            return
        self.last_action = int(np.asarray(action).reshape(-1)[0])
        plan = (info or {}).get(self.plan_key)
        if plan is not None:
            self.plan = [int(a) for a in np.asarray(plan).reshape(-1)]
        else:  # a plan given before this step (an agent's `set_plan`), else none
            self.plan = self._pending
        self._pending = None

    def set_plan(self, actions: Sequence[int] | None) -> None:
        """Use these actions (first: the step after the one about to be taken) now and for the
        coming step's prediction; a plan in that step's info takes precedence. An agent calls
        it before `env.step` (`ThinkAgent` does, with its follower's plan)."""
        self.plan = None if actions is None else [int(a) for a in actions]
        self._pending = self.plan

    def planned(self, steps: int) -> np.ndarray:
        """The actions the prediction assumes: the plan (its last action held), else the last
        action repeated (Box actions: the last one held)."""
        if self.model.config.action_box:
            last = np.asarray(self.last_action, np.float32).reshape(-1)
            if last.size != self.model.config.n_actions:  # before the first step: neutral
                last = np.zeros(self.model.config.n_actions, np.float32)
            return np.repeat(last[None], steps, axis=0)
        plan = self.plan or [self.last_action]
        out = [plan[min(i, len(plan) - 1)] for i in range(steps)]
        n = self.model.config.n_actions
        if any(not 0 <= a < n for a in out):
            raise WorldModelError(f"planned actions {out} are outside the model's 0..{n - 1}")
        return np.asarray(out, np.int64)

    def predict(self, steps: int) -> np.ndarray:
        present = self._present()
        if present.ndim != 3 or present.shape[-1] != self.model.config.channels:
            raise WorldModelError(
                f"{self.source} predicts {self.model.config.channels}-channel frames, got {present.shape}"
            )
        frames = list(self.frames)
        while len(frames) < self.context:
            frames.insert(0, frames[0])
        pred, std = imagine(self.model, np.stack(frames), self.planned(steps), self.device)
        self.uncertainty_map = std.cpu().numpy()
        self.uncertainty = self.uncertainty_map.mean(axis=(1, 2))
        return pred.cpu().numpy()
