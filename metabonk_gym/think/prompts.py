"""Prompts for System 2: a constant system prompt per game, and per-call user content.

What: `system_prompt(adapter, game_card)` is fixed for a game (rules from the integration's
`game_card.md`, the action vocabulary, the directive schema), so servers reuse its KV cache as a
prefix. `PromptBuilder.build(...)` makes one `ThinkRequest`: why we are thinking, the RAM state,
the goal list, the text map and spatial description, the last directives and their outcomes, and
the image (the frame with a cell grid, or a temporal strip in async mode) for vision models.
Why a builder object: the text map, grid overlay and temporal strip come from
`metabonk_gym.wrappers` when it provides them; the builder is the one seam that picks them, with
small built-in versions so thinking works on its own.

>>> from metabonk_gym.think.games import adapter_for_name
>>> text = system_prompt(adapter_for_name("BonkQuest"), None)
>>> "go_to" in text and '"duration_frames"' in text
True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from metabonk_gym.think.backends import ThinkRequest, png_bytes
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import CELL, GameAdapter
from metabonk_gym.think.view import GameView

SYSTEM_TEMPLATE = """You are the strategist ("System 2") of an agent playing {game}, a Game Boy Advance game.
A fast controller ("System 1") turns your directive into button presses: it walks shortest paths
to tile targets, presses A to talk and open, and navigates menus. You are asked again when the
directive is done or expires, on a new room or menu, when HP drops, or every few seconds.

# The game
{card}

# Coordinates
The screen is a grid of 30 x 20 cells of 8x8 pixels: x is the column (0..29, left to right),
y is the row (0..19, top to bottom). The text map shows x along the top and y down the side;
@ is you, E an enemy.

# Actions
{actions}

# Answer
Answer with one JSON object and nothing else, following this JSON schema:
{schema}
`goal` is a few words, `reasoning` one short sentence, `duration_frames` how long (60 frames =
1 second) the directive should stay in force, `confidence` 0..1 how sure you are."""

GENERIC_CARD = "No game card is available: infer the rules from the state, the map and the screen."


def system_prompt(adapter: GameAdapter, game_card: str | None) -> str:
    """The fixed system prompt of a game (identical on every call: a cacheable prefix)."""
    spec = adapter.spec
    actions = "\n".join(
        f"- {name}: {spec.action_help.get(name, name.replace('_', ' '))}" for name in spec.actions
    )
    return SYSTEM_TEMPLATE.format(
        game=spec.game,
        card=(game_card or GENERIC_CARD).strip(),
        actions=actions,
        schema=json.dumps(spec.schema(), separators=(",", ":")),
    )


@dataclass
class HistoryItem:
    """A past directive and, once it ended, its outcome (reward, status, HP lost, frames)."""

    directive: Directive
    outcome: dict[str, Any] | None = None

    def line(self) -> str:
        d = self.directive
        target = f" {json.dumps(d.target, separators=(',', ':'))}" if d.target else ""
        text = f"{d.action}{target} ({d.goal})"
        if d.source == "fallback":
            text += f" [fallback: {d.reason}]"
        if self.outcome is None:
            return text + " -> in progress"
        o = self.outcome
        return (
            f"{text} -> {o.get('status', '?')} after {o.get('frames', '?')} frames, "
            f"reward {o.get('reward', 0):+.2f}, HP lost {o.get('hp_lost', 0)}"
        )


def _builtin_grid(frame: np.ndarray) -> np.ndarray:
    """The frame with a faint line every 8 px and a strong one every 5 cells (a built-in stand-in
    for `wrappers.GridOverlay`)."""
    out = np.asarray(frame, dtype=np.uint8).copy()
    if out.ndim != 3 or out.shape[2] != 3:
        return out
    for step, value in ((CELL, 96), (CELL * 5, 255)):
        out[::step, :, :] = np.maximum(out[::step, :, :], value // 2)
        out[:, ::step, :] = np.maximum(out[:, ::step, :], value // 2)
        out[::step, :, 1] = value
        out[:, ::step, 1] = value
    return out


class PromptBuilder:
    """Builds `ThinkRequest`s for one game; see the module docstring.

    `text_map` / `image` override how the map text and the picture are made (callables taking a
    `GameView`); by default the game adapter's map and the built-in grid overlay are used.
    """

    def __init__(
        self,
        adapter: GameAdapter,
        game_card: str | None = None,
        text_map: Callable[[GameView], str | None] | None = None,
        image: Callable[[GameView], np.ndarray | None] | None = None,
        max_tokens: int = 256,
        history_len: int = 4,
    ) -> None:
        self.adapter = adapter
        self.system = system_prompt(adapter, game_card)
        self.schema = adapter.spec.schema()
        self._text_map = text_map or adapter.text_map
        self._image = image or (lambda view: _builtin_grid(view.frame))
        self.max_tokens = int(max_tokens)
        self.history_len = int(history_len)

    def user_text(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> str:
        """The per-call text (everything but the image)."""
        parts = [f"Step {view.step}. You are asked because: {trigger}."]
        if note:
            parts.append(note)
        parts.append("## State\n" + json.dumps(self.adapter.state(view), separators=(", ", ": ")))
        parts.append("## Goals\n" + "\n".join(f"- {g}" for g in self.adapter.goals(view)))
        text_map = self._text_map(view)
        if text_map:
            parts.append("## Map\n" + text_map)
        spatial = self.adapter.spatial(view)
        if spatial:
            parts.append("## Where things are\n" + "\n".join(spatial))
        recent = list(history)[-self.history_len :]
        if recent:
            parts.append("## Your last directives\n" + "\n".join(h.line() for h in recent))
        parts.append("Answer with the JSON directive.")
        return "\n\n".join(parts)

    def build(
        self,
        view: GameView,
        history: Sequence[HistoryItem],
        trigger: str,
        vision: bool,
        note: str | None = None,
    ) -> ThinkRequest:
        """One request; the PNG is only made when the backend has vision."""
        image = self._image(view) if vision else None
        return ThinkRequest(
            system=self.system,
            user=self.user_text(view, history, trigger, note),
            schema=self.schema,
            image_png=png_bytes(image) if image is not None else None,
            max_tokens=self.max_tokens,
        )
