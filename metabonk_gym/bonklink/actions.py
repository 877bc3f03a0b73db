"""The env's action spaces and their conversion to BonkLink wire actions.

The default is one flat ``Box(-1, 1, (10,), float32)`` (what Stable-Baselines3 accepts), laid
out as :data:`BOX_LAYOUT`:

====  ==========  ==================================================================
 idx  name        meaning
====  ==========  ==================================================================
 0-1  move_x/y    movement stick, -1..1 (moveY is forward)
 2-3  aim_x/y     aim stick, -1..1
 4    fire        pressed when > 0
 5    ability     pressed when > 0
 6    interact    pressed when > 0 (submit in menus)
 7    click       a UI click this tick when > 0
 8-9  click_x/y   where: -1..1 maps to 0..1 of the screen, **top-left** origin
====  ==========  ==================================================================

``action_type="dict"`` offers the same as a Dict space. Click positions are normalised with a
top-left origin on the agent's side and converted here to the plugin's capture-pixel
coordinates with a **bottom-left** origin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from metabonk_gym.bonklink.codec import Action, InputSnapshot
from metabonk_gym.errors import InvalidActionError

__all__ = [
    "BOX_LAYOUT",
    "ActionType",
    "action_space",
    "click_from_plugin",
    "click_to_plugin",
    "make_box_action",
    "merge_box_actions",
    "release_presses",
    "snapshot_to_action",
    "to_wire",
]

ActionType = Literal["box", "dict"]

BOX_LAYOUT: tuple[str, ...] = (
    "move_x",
    "move_y",
    "aim_x",
    "aim_y",
    "fire",
    "ability",
    "interact",
    "click",
    "click_x",
    "click_y",
)


def action_space(kind: ActionType = "box") -> spaces.Space[Any]:
    """The flat Box (default) or the Dict action space."""
    if kind == "box":
        return spaces.Box(-1.0, 1.0, (len(BOX_LAYOUT),), np.float32)
    if kind == "dict":
        return spaces.Dict(
            {
                "move": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "aim": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "buttons": spaces.MultiBinary(3),  # fire, ability, interact
                "click": spaces.Discrete(2),
                "click_pos": spaces.Box(0.0, 1.0, (2,), np.float32),  # top-left origin
            }
        )
    raise ValueError(f"action_type must be 'box' or 'dict', not {kind!r}")


def click_to_plugin(nx: float, ny: float, width: int, height: int) -> tuple[int, int]:
    """Normalised top-left coordinates to capture pixels with a bottom-left origin.

    The pixel column is ``floor(nx * width)`` and the pixel row counted from the top is
    ``floor(ny * height)``; the plugin wants the row counted from the bottom, so
    ``y = height - 1 - row``. Both are clamped into the capture.
    """
    nx, ny = _unit(nx), _unit(ny)
    x = min(width - 1, max(0, int(nx * width)))
    row = min(height - 1, max(0, int(ny * height)))
    return x, height - 1 - row


def click_from_plugin(x: int, y: int, width: int, height: int) -> tuple[float, float]:
    """Inverse of :func:`click_to_plugin`: the centre of the pixel, normalised, top-left."""
    return (x + 0.5) / width, (height - y - 0.5) / height


def _unit(value: float) -> float:
    return 0.0 if value != value else min(1.0, max(0.0, value))


def _axis(value: float) -> float:
    return 0.0 if value != value else min(1.0, max(-1.0, value))


def to_wire(action: Any, kind: ActionType, capture_size: tuple[int, int]) -> Action:
    """Convert an action of the env's space to a wire :class:`Action` (values are clamped,
    NaN reads as 0). ``capture_size`` is the game's capture (width, height)."""
    width, height = capture_size
    if kind == "box":
        try:
            values = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            values = np.zeros(0)
        if values.shape != (len(BOX_LAYOUT),):
            raise InvalidActionError(
                f"invalid action of shape {np.shape(action)}: the Box action is {len(BOX_LAYOUT)} "
                f"numbers in one flat array ({', '.join(BOX_LAYOUT)}); see make_box_action"
            )
        v = values.tolist()
        click = v[7] > 0
        x, y = click_to_plugin((v[8] + 1) / 2, (v[9] + 1) / 2, width, height) if click else (0, 0)
        return Action(
            _axis(v[0]), _axis(v[1]), _axis(v[2]), _axis(v[3]),
            v[4] > 0, v[5] > 0, v[6] > 0, click, x, y,
        )  # fmt: skip
    if not isinstance(action, Mapping):
        raise TypeError(f"dict actions are mappings, got {type(action).__name__}")
    move = np.asarray(action.get("move", (0.0, 0.0)), dtype=np.float64).tolist()
    aim = np.asarray(action.get("aim", (0.0, 0.0)), dtype=np.float64).tolist()
    buttons = np.asarray(action.get("buttons", (0, 0, 0))).tolist()
    click = bool(np.asarray(action.get("click", 0)).item())
    pos = np.asarray(action.get("click_pos", (0.5, 0.5)), dtype=np.float64).tolist()
    x, y = click_to_plugin(pos[0], pos[1], width, height) if click else (0, 0)
    return Action(
        _axis(move[0]), _axis(move[1]), _axis(aim[0]), _axis(aim[1]),
        bool(buttons[0]), bool(buttons[1]), bool(buttons[2]), click, x, y,
    )  # fmt: skip


def make_box_action(
    move: Sequence[float] = (0.0, 0.0),
    aim: Sequence[float] = (0.0, 0.0),
    fire: bool = False,
    ability: bool = False,
    interact: bool = False,
    click: tuple[float, float] | None = None,
) -> np.ndarray:
    """Build a flat Box action; ``click`` is a normalised (x, y) point, top-left origin."""
    cx, cy = (0.0, 0.0) if click is None else (2 * click[0] - 1, 2 * click[1] - 1)
    return np.array(
        [move[0], move[1], aim[0], aim[1], _press(fire), _press(ability), _press(interact),
         _press(click is not None), cx, cy],
        dtype=np.float32,
    )  # fmt: skip


def _press(pressed: bool) -> float:
    return 1.0 if pressed else -1.0


def snapshot_to_action(snapshot: InputSnapshot, kind: ActionType) -> Any:
    """The human's ``HINP`` input expressed in the env's action space (for demonstrations)."""
    click = (snapshot.click_nx, snapshot.click_ny) if snapshot.ui_click else None
    if kind == "box":
        return make_box_action(
            (_axis(snapshot.move_x), _axis(snapshot.move_y)),
            (_axis(snapshot.look_x), _axis(snapshot.look_y)),
            snapshot.fire,
            snapshot.ability,
            snapshot.interact,
            None if click is None else (_unit(click[0]), _unit(click[1])),
        )
    return {
        "move": np.array([_axis(snapshot.move_x), _axis(snapshot.move_y)], np.float32),
        "aim": np.array([_axis(snapshot.look_x), _axis(snapshot.look_y)], np.float32),
        "buttons": np.array([snapshot.fire, snapshot.ability, snapshot.interact], np.int8),
        "click": int(snapshot.ui_click),
        "click_pos": np.array(
            [_unit(snapshot.click_nx), _unit(snapshot.click_ny)]
            if snapshot.ui_click
            else [0.5, 0.5],
            np.float32,
        ),
    }


def release_presses(action: Any) -> Any:
    """`action` with `interact` and `click` released (a Box action of the flat layout, or its
    Dict form); sticks, `fire` and `ability` stay as they are. With `frameskip` > 1 the env
    sends this on every tick after the first, so each agent step that presses is a new press.

    >>> release_presses(np.ones(10, np.float32)).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0]
    """
    if isinstance(action, Mapping):
        out = dict(action)
        buttons = np.array(out.get("buttons", (0, 0, 0)), np.int8).reshape(-1)
        buttons[2:3] = 0
        out["buttons"] = buttons
        out["click"] = 0
        return out
    released = np.array(action, np.float32).reshape(-1)
    released[6:8] = -1.0
    return released


def merge_box_actions(actions: Sequence[Any]) -> np.ndarray:
    """One Box action for what was played over several ticks (a step of ``frameskip`` ticks):
    sticks averaged, a button pressed if pressed on any tick, the click point of the first
    tick that clicked (so a human's step reads like an agent's step that held it).

    >>> a = make_box_action(move=(1, 0), fire=True)
    >>> b = make_box_action(move=(0, 1), click=(1.0, 0.5))
    >>> merge_box_actions([a, b]).tolist()
    [0.5, 0.5, 0.0, 0.0, 1.0, -1.0, -1.0, 1.0, 1.0, 0.0]
    """
    stack = np.asarray([np.asarray(a, np.float32).reshape(-1) for a in actions], np.float32)
    out = stack.mean(axis=0)
    out[4:8] = stack[:, 4:8].max(axis=0)
    clicked = np.flatnonzero(stack[:, 7] > 0)
    out[8:10] = stack[clicked[0], 8:10] if len(clicked) else 0.0
    return out.astype(np.float32)
