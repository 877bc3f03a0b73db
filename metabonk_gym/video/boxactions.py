"""Box (continuous and mixed) actions for the IDM: the loss, decoding with a confidence, figures.

An env with a Box action space declares its parts on its registration
(`metabonk_gym.registration.EnvTraits.action_parts`): sticks (2-d directions such as Megabonk's
move and aim), buttons (pressed when > 0) and points (a 2-d position, e.g. a click). The IDM's
net gives one output per Box dimension: sticks and points are continuous (`tanh`, squared
error; a point only on steps that carry one), buttons are binary heads (logits, binary cross
entropy). Movement and aim are continuous, not binned: a prediction's direction resolution is
whatever the net learns; the figures say how close it is (the share of moving steps whose
predicted direction is within 22.5 degrees, half a 45-degree sector of an 8-way stick).

>>> layout = BoxLayout((("move", "stick", (0, 1)), ("fire", "button", (2,))))
>>> actions, confidence = layout.decode(np.array([[0.0, 20.0, 2.0], [-20.0, 0.0, -2.0]]))
>>> actions.round(2).tolist(), confidence.round(2).tolist()
([[0.0, 1.0, 1.0], [-1.0, 0.0, -1.0]], [0.88, 0.88])
>>> m = layout.metrics(actions, np.array([[0.1, 0.9, 1.0], [-1.0, 0.3, 1.0]], np.float32))
>>> m["move"]["within_22_5"], m["fire"]["accuracy"], m["button_accuracy"]
(1.0, 0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Part = tuple[str, str, tuple[int, ...]]
KINDS = ("stick", "button", "point")
#: A stick counts as moved on a step when its true length is at least this.
MOVING = 0.5


@dataclass(frozen=True)
class BoxLayout:
    """The parts of a Box action: (name, kind, indices), kind "stick", "button" or "point".

    Args:
        parts: the parts (every index of the Box in exactly one part).
    """

    parts: tuple[Part, ...]

    @classmethod
    def from_list(cls, parts: Any) -> BoxLayout:
        """From JSON (lists), checked: a `ValueError` names what is wrong."""
        out = []
        for part in parts:
            name, kind, idx = part
            if kind not in KINDS:
                raise ValueError(f"action part {name!r} has kind {kind!r}, not one of {KINDS}")
            idx = tuple(int(i) for i in idx)
            if kind in ("stick", "point") and len(idx) != 2 or kind == "button" and len(idx) != 1:
                raise ValueError(f"action part {name!r} ({kind}) has indices {idx}")
            out.append((str(name), str(kind), idx))
        layout = cls(tuple(out))
        if sorted(layout.indices("stick", "button", "point")) != list(range(layout.dim)):
            raise ValueError("the action parts must cover each index of the Box once")
        return layout

    def to_list(self) -> list[list[Any]]:
        return [[name, kind, list(idx)] for name, kind, idx in self.parts]

    @property
    def dim(self) -> int:
        return sum(len(idx) for _, _, idx in self.parts)

    def indices(self, *kinds: str) -> list[int]:
        return [i for _, kind, idx in self.parts if kind in kinds for i in idx]

    def loss(self, out: Any, target: Any, press_weight: dict[str, float] | None = None) -> Any:
        """Training loss of net outputs (B, D) against true actions (B, D) (torch tensors);
        `press_weight` weighs a button's pressed steps (a rare button: its unpressed/pressed)."""
        import torch
        import torch.nn.functional as F

        total = out.new_zeros(())
        for name, kind, idx in self.parts:
            o, t = out[:, list(idx)], target[:, list(idx)]
            if kind == "button":
                weight = (press_weight or {}).get(name)
                total = total + F.binary_cross_entropy_with_logits(
                    o,
                    (t > 0).float(),
                    pos_weight=None if weight is None else o.new_tensor([weight]),
                )
            elif kind == "stick":
                total = total + F.mse_loss(torch.tanh(o), t)
            else:  # a point counts only on steps that carry one
                mask = (t != 0).any(dim=1, keepdim=True).float()
                err = ((torch.tanh(o) - t) ** 2 * mask).sum() / (mask.sum() * 2).clamp(min=1.0)
                total = total + err
        return total

    def decode(self, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Net outputs (N, D) -> (actions (N, D) float32, confidence (N,)): sticks and points
        `tanh`, buttons +1/-1 by their probability; the confidence is that of the least sure
        button (1 with no buttons)."""
        out = np.asarray(out, np.float64)
        actions = np.tanh(out)
        confidence = np.ones(len(out))
        buttons = self.indices("button")
        if buttons:
            p = 1.0 / (1.0 + np.exp(-out[:, buttons]))
            actions[:, buttons] = np.where(p > 0.5, 1.0, -1.0)
            confidence = np.maximum(p, 1.0 - p).min(axis=1)
        return actions.astype(np.float32), confidence

    def metrics(self, predicted: np.ndarray, true: np.ndarray) -> dict[str, Any]:
        """Per part: sticks: on steps where the true stick moved (length >= 0.5), the mean angle
        error in degrees and the share within 22.5 degrees (and how often a still stick was
        predicted still); buttons: accuracy and recall (of the steps it was pressed, the share
        predicted pressed); points: mean absolute error where one is given.
        `button_accuracy`: all buttons right on a step; `direction_within_22_5`: the first
        stick's."""
        out: dict[str, Any] = {}
        n = len(true)
        buttons = self.indices("button")
        if buttons:
            agree = (predicted[:, buttons] > 0) == (true[:, buttons] > 0)
            out["button_accuracy"] = float(agree.mean()) if n else None
            out["button_accuracy_all"] = float(agree.all(axis=1).mean()) if n else None
        for name, kind, idx in self.parts:
            p, t = predicted[:, list(idx)], true[:, list(idx)]
            if kind == "button":
                pressed = t[:, 0] > 0
                out[name] = {
                    "accuracy": float(np.mean((p > 0) == (t > 0))) if n else None,
                    "pressed_fraction": float(np.mean(t > 0)) if n else None,
                    # a rare button's accuracy is high when it is never predicted: its recall
                    "recall": float(np.mean(p[pressed, 0] > 0)) if pressed.any() else None,
                }
            elif kind == "stick":
                out[name] = stick_metrics(p, t)
                if "direction_within_22_5" not in out:
                    out["direction_within_22_5"] = out[name]["within_22_5"]
            else:
                given = (t != 0).any(axis=1)
                out[name] = {
                    "mean_abs_error": float(np.abs(p[given] - t[given]).mean())
                    if given.any()
                    else None,
                    "steps": int(given.sum()),
                }
        return out


def stick_metrics(predicted: np.ndarray, true: np.ndarray) -> dict[str, Any]:
    """Direction figures of a 2-d stick (see `BoxLayout.metrics`).

    >>> stick_metrics(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[0.9, 0.3], [0.0, 0.0]]))["mean_angle_error_deg"]
    18.43
    """
    length = np.hypot(true[:, 0], true[:, 1])
    moving = length >= MOVING
    angle = np.degrees(
        np.abs(
            np.angle(
                np.exp(
                    1j
                    * (
                        np.arctan2(predicted[:, 1], predicted[:, 0])
                        - np.arctan2(true[:, 1], true[:, 0])
                    )
                )
            )
        )
    )
    still = ~moving & (length < 0.1)
    pred_still = np.hypot(predicted[:, 0], predicted[:, 1]) < MOVING
    return {
        "moving_steps": int(moving.sum()),
        "within_22_5": float(np.mean(angle[moving] <= 22.5)) if moving.any() else None,
        "mean_angle_error_deg": round(float(angle[moving].mean()), 2) if moving.any() else None,
        "still_steps": int(still.sum()),
        "still_recognised": float(np.mean(pred_still[still])) if still.any() else None,
    }


def layout_of(parts: Sequence[Part], dim: int) -> BoxLayout:
    """The layout of an env's declared parts, checked against its Box's size."""
    layout = BoxLayout.from_list(parts)
    if layout.dim != dim:
        raise ValueError(f"the action parts cover {layout.dim} values, the Box has {dim}")
    return layout


def press_weights(actions: np.ndarray, layout: BoxLayout, cap: float = 20.0) -> dict[str, float]:
    """Per button, unpressed steps over pressed ones (at most `cap`; 1 for a button pressed as
    often as not, none for one never pressed): the loss then counts a rare button's presses as
    much as its idle steps, so it is not learned as never pressed.

    >>> layout = BoxLayout((("fire", "button", (0,)), ("ability", "button", (1,))))
    >>> press_weights(np.array([[1.0, -1.0]] * 3 + [[-1.0, 1.0]]), layout)
    {'fire': 1.0, 'ability': 3.0}
    """
    out = {}
    for name, kind, idx in layout.parts:
        if kind != "button":
            continue
        pressed = int(np.sum(actions[:, idx[0]] > 0))
        if pressed:
            out[name] = float(min(cap, max(1.0, (len(actions) - pressed) / pressed)))
    return out
