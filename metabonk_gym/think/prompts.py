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

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.engines import ThinkRequest, png_bytes
from metabonk_gym.think.games import GameAdapter
from metabonk_gym.think.view import GameView
from metabonk_gym.wrappers.grid_overlay import draw_overlay
from metabonk_gym.wrappers.screen import ScreenReader
from metabonk_gym.wrappers.temporal_strip import strip_image
from metabonk_gym.wrappers.text_map import ascii_map, describe

SYSTEM_TEMPLATE = """You are the strategist ("System 2") of an agent playing {game}, {platform}.
{system1}

# The game
{card}

# Coordinates
{coordinates}

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
        platform=adapter.platform,
        system1=adapter.system1_text,
        coordinates=adapter.coordinates_text,
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


def overlay_image(view: GameView, player: tuple[int, int] | None) -> np.ndarray:
    """The frame, doubled, with the cell grid and coordinates (`wrappers.GridOverlay`'s drawing)."""
    return draw_overlay(view.frame, player=player)


def strip_picture(view: GameView) -> np.ndarray | None:
    """The temporal strip (past, present, predicted frames) tiled into one picture, if any."""
    if view.strip is None:
        return None
    frames, past = view.strip
    return strip_image(frames, past=past, columns=min(len(frames), 3))


def screen_text_map(env: Any) -> Callable[[GameView], str | None] | None:
    """The wrappers' VRAM-based map and description (`ascii_map`, `describe`) for games the
    adapters do not know; None when the env has no `tiles.json` semantic classes."""
    try:
        reader = ScreenReader(env)
    except (TypeError, AttributeError):
        return None
    semantic = reader.semantic
    if semantic is None:
        return None

    def text(view: GameView) -> str | None:
        screen = reader.read()
        classes = reader.classes(screen)
        if classes is None:
            return None
        player = reader.player_cell(screen, view.info)
        return (
            ascii_map(classes, semantic.names, player)
            + "\n"
            + describe(classes, semantic.names, player)
        )

    return text


class PromptBuilder:
    """Builds `ThinkRequest`s for one game; see the module docstring.

    `text_map` / `image` override how the map text and the picture are made (callables taking a
    `GameView`); by default the game adapter's map (exact, from RAM) and the frame with the
    cell grid are used. With `strip=True` (async mode) a `TemporalStrip` in the wrapper stack
    supplies the picture: past frames, the present and predicted frames, so the model can
    plan for where things will be when its answer arrives.

    Args:
        adapter: the game's `GameAdapter` (state, goals, map, directive schema).
        game_card: the game's rules (its `game_card.md`) for the system prompt; None: a generic
            line asking the model to infer them.
        text_map: `GameView` -> the map text (None: no map); default: the adapter's.
        image: `GameView` -> the picture sent to vision models; default: the strip or the
            adapter's picture, else the frame with its cell grid.
        max_tokens: the most tokens an answer may have (the request's limit).
        history_len: how many past directives, with their outcomes, the prompt lists.
        strip: take the picture from a `TemporalStrip` when the view has one (async mode).
        sections: more `GameView` -> text callables whose text goes after the spatial lines
            (e.g. the long-term memory's `prompt_section`); empty text is left out.
    """

    def __init__(
        self,
        adapter: GameAdapter,
        game_card: str | None = None,
        text_map: Callable[[GameView], str | None] | None = None,
        image: Callable[[GameView], np.ndarray | None] | None = None,
        max_tokens: int = 256,
        history_len: int = 4,
        strip: bool = False,
        sections: Sequence[Callable[[GameView], str | None]] = (),
    ) -> None:
        self.adapter = adapter
        self.sections = list(sections)
        self.system = system_prompt(adapter, game_card)
        self.schema = adapter.spec.schema()
        self._text_map = text_map or adapter.text_map
        self._image = image or self._default_image
        self.strip = strip
        self.max_tokens = int(max_tokens)
        self.history_len = int(history_len)

    def _default_image(self, view: GameView) -> np.ndarray:
        picture = strip_picture(view) if self.strip else None
        if picture is None:
            picture = self.adapter.picture(view)
        return (
            picture if picture is not None else overlay_image(view, self.adapter.player_cell(view))
        )

    @classmethod
    def for_env(
        cls,
        env: Any,
        adapter: GameAdapter,
        game_card: str | None,
        strip: bool = False,
        max_tokens: int = 256,
    ) -> PromptBuilder:
        """The builder for `env`: games without an adapter map get the wrappers' screen map;
        a layer of the stack with a `prompt_section(view)` (the `Memory` wrapper) adds its text."""
        text_map = screen_text_map(env) if type(adapter) is GameAdapter else None
        sections = []
        layer = env
        while layer is not None:
            if callable(getattr(type(layer), "prompt_section", None)):
                sections.append(layer.prompt_section)
            layer = getattr(layer, "env", None)
        return cls(
            adapter,
            game_card,
            text_map=text_map,
            max_tokens=max_tokens,
            strip=strip,
            sections=sections,
        )

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
        for section in self.sections:
            extra = section(view)
            if extra:
                parts.append(extra)
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
        """One request; the PNG is only made when the engine has vision."""
        image = self._image(view) if vision else None
        return ThinkRequest(
            system=self.system,
            user=self.user_text(view, history, trigger, note),
            schema=self.schema,
            image_png=png_bytes(image) if image is not None else None,
            max_tokens=self.max_tokens,
        )
