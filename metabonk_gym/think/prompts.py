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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from metabonk_gym.think.directive import Directive, DirectiveSpec
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

#: Prompt profiles: "full" (the whole game card, the schema, the full state; for large models),
#: "compact" (for small models on small machines: see `compact_system_prompt`) and "choice"
#: (small models pick one of the game's numbered options: see `choice_system_prompt`).
PROFILES = ("full", "compact", "choice")

COMPACT_TEMPLATE = """You direct a player of {game}. {brief}
Map: x = column, y = row, @ = you. Actions: {actions}.
Answer in JSON: goal, reasoning (a few words each), action, target ({{"x": X, "y": Y}} from \
"Where things are"{option}, or null), duration_frames (60 = 1 s), confidence (0-1)."""


CHOICE_TEMPLATE = """You direct a player of {game}. {brief}
Each turn you get the state, the goal and numbered options. Answer with the number of the \
option that best serves the goal."""

#: The longest answer of the choice profile (a number: one or two tokens, then the end).
CHOICE_MAX_TOKENS = 4


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


def prompt_profile(profile: str, vision: bool) -> str:
    """`profile` itself, or for `"auto"`: `"full"` when the model sees images (large vision
    models read the whole game card), `"choice"` otherwise (small text models; a
    `PromptBuilder` turns it into `"compact"` for a game whose adapter offers no options).

    >>> prompt_profile("auto", vision=False), prompt_profile("auto", vision=True)
    ('choice', 'full')
    """
    if profile == "auto":
        return "full" if vision else "choice"
    if profile not in PROFILES:
        raise ValueError(f"profile must be auto, {' or '.join(PROFILES)}, not {profile!r}")
    return profile


def compact_system_prompt(adapter: GameAdapter, examples: Sequence[dict[str, Any]] = ()) -> str:
    """The "compact" profile's fixed system prompt: a one-line brief of the game, the fields
    described in words (no schema whose title a small model copies), the actions, and worked
    examples (`examples`: `{"user": ..., "answer": {...}}`, e.g. the oracle's, see
    `metabonk_gym.think.examples`). Constant per game, so it is a cached prefix.

    >>> from metabonk_gym.think.games import adapter_for_name
    >>> text = compact_system_prompt(adapter_for_name("BonkQuest"))
    >>> "schema" in text, "Actions: go_to, collect, open" in text
    (False, True)
    """
    spec = adapter.spec
    actions = ", ".join(spec.actions)
    text = COMPACT_TEMPLATE.format(
        game=spec.game,
        brief=adapter.brief,
        actions=actions,
        option=' or a menu option {"option": N}' if spec.n_options else "",
    )
    for i, example in enumerate(examples, 1):
        answer = json.dumps(example["answer"], separators=(",", ":"))
        text += f"\n\nExample {i}:\n{example['user'].strip()}\nAnswer: {answer}"
    return text


def choice_system_prompt(adapter: GameAdapter, examples: Sequence[dict[str, Any]] = ()) -> str:
    """The "choice" profile's fixed system prompt: the one-line brief, how to answer (the
    number of an option) and worked examples (`{"user": ..., "answer": {"pick": N}}`, the
    oracle's, from `think_examples.json`). Constant per game: a cached prefix.

    >>> from metabonk_gym.think.games import adapter_for_name
    >>> text = choice_system_prompt(adapter_for_name("BonkQuest"))
    >>> text.splitlines()[-1]
    'Each turn you get the state, the goal and numbered options. Answer with the number of the option that best serves the goal.'
    """
    text = CHOICE_TEMPLATE.format(game=adapter.spec.game, brief=adapter.brief)
    for i, example in enumerate(examples, 1):
        text += f"\n\nExample {i}:\n{example['user'].strip()}\nAnswer: {example['answer']['pick']}"
    return text


def choice_schema(n: int) -> dict[str, Any]:
    """The JSON schema of a pick among `n` options: a bare integer, one of 1..n (an enum, so
    the grammar admits only the numbers listed, and the answer is one or two tokens).

    >>> choice_schema(3)
    {'type': 'integer', 'enum': [1, 2, 3]}
    """
    return {"type": "integer", "enum": list(range(1, n + 1))}


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
        profile: "full" (the game card, the JSON schema, the whole state), "compact" (small
            models: a one-line brief, the fields in words, worked examples, a short state and
            at most 2 past directives; see `compact_system_prompt`) or "choice" (small models
            pick one of the adapter's numbered `options`, so every valid answer is sensible;
            `"compact"` for a game whose adapter offers none; see `choice_system_prompt`).
        examples: the compact or choice profile's worked examples (`{"user", "answer"}`
            dicts); None: the game folder's `think_examples.json` (`GameAdapter.prompt_examples`).
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
        profile: str = "full",
        examples: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {', '.join(PROFILES)}, not {profile!r}")
        if profile == "choice" and not adapter.offers_options:
            profile = "compact"  # a game without options: the model writes the directive
        self.adapter = adapter
        self.sections = list(sections)
        self.profile = profile
        if profile == "choice":
            self.examples = list(
                examples if examples is not None else adapter.prompt_examples("choice")
            )
            self.system = choice_system_prompt(adapter, self.examples)
            self.schema = choice_schema(1)  # per request: as many numbers as options
            max_tokens = min(int(max_tokens), CHOICE_MAX_TOKENS)
            history_len = 0
        elif profile == "compact":
            self.examples = list(examples if examples is not None else adapter.prompt_examples())
            self.system = compact_system_prompt(adapter, self.examples)
            # short strings bound how long a small model decodes (the grammar enforces them)
            self.schema = compact_spec(adapter.spec).schema()
            history_len = min(history_len, 2)
        else:
            self.examples = []
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
        profile: str = "full",
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
            profile=profile,
        )

    def user_text(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> str:
        """The per-call text (everything but the image)."""
        if self.profile == "choice":
            return self.choice_text(view, self.adapter.options(view))
        if self.profile == "compact":
            return self.compact_text(view, history, trigger, note)
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

    def compact_text(
        self,
        view: GameView,
        history: Sequence[HistoryItem] = (),
        trigger: str = "start",
        note: str | None = None,
        map_text: bool = True,
    ) -> str:
        """The compact profile's per-call text: the state in one line (the adapter's
        `compact_state_keys`), the most urgent goal, the map cropped to the room (unless `map_text` is False: the worked examples leave it out), where
        things are, the last 2 directives."""
        parts = [f"Step {view.step}, asked because: {trigger}."]
        if note:
            parts.append(note)
        state = self.adapter.state(view)
        keys = self.adapter.compact_state_keys
        if keys:  # the game's few telling values, and what `state` adds (what an NPC said)
            state = {
                k: v for k, v in state.items() if k in keys or k not in self.adapter.state_keys
            }
        parts.append("State: " + ", ".join(f"{k}={_short(v)}" for k, v in state.items()))
        parts.append("Goal: " + (self.adapter.goals(view) or ["win"])[0])
        text_map = self._text_map(view) if map_text else None
        if text_map:
            parts.append("Map:\n" + crop_map(text_map))
        spatial = self.adapter.spatial(view)
        if spatial:
            parts.append("Where things are:\n" + "\n".join(spatial))
        for section in self.sections:
            extra = section(view)
            if extra:
                parts.append(extra)
        recent = list(history)[-self.history_len :] if self.history_len else []
        if recent:
            parts.append("Last directives:\n" + "\n".join(h.line() for h in recent))
        return "\n".join(parts)

    def choice_text(self, view: GameView, options: Sequence[Directive]) -> str:
        """The choice profile's per-call text: the state in one line (the adapter's
        `choice_state_keys`, and what `state` adds), the most urgent goal, and the options
        numbered from 1 (their `goal`s). No map: the options say where things are."""
        state = self.adapter.state(view)
        keys = self.adapter.choice_state_keys or self.adapter.compact_state_keys
        if keys:
            state = {
                k: v for k, v in state.items() if k in keys or k not in self.adapter.state_keys
            }
        lines = [", ".join(f"{k}={_short(v)}" for k, v in state.items())]
        lines.append("Goal: " + (self.adapter.goals(view) or ["win"])[0])
        lines += [f"{i} {option.goal}" for i, option in enumerate(options, 1)]
        return "\n".join(line for line in lines if line)

    def build(
        self,
        view: GameView,
        history: Sequence[HistoryItem],
        trigger: str,
        vision: bool,
        note: str | None = None,
    ) -> ThinkRequest:
        """One request; the PNG is only made when the engine has vision. The choice profile's
        request carries its options (`choices`) and a schema admitting only their numbers."""
        image = self._image(view) if vision else None
        if self.profile == "choice":
            options = tuple(self.adapter.options(view))
            if not options:  # the strategist answers its fallback ("invalid: prompt: ...")
                raise ValueError(f"{type(self.adapter).__name__} offered no options")
            return ThinkRequest(
                system=self.system,
                user=self.choice_text(view, options),
                schema=choice_schema(len(options)),
                image_png=png_bytes(image) if image is not None else None,
                max_tokens=self.max_tokens,
                choices=options,
            )
        return ThinkRequest(
            system=self.system,
            user=self.user_text(view, history, trigger, note),
            schema=self.schema,
            image_png=png_bytes(image) if image is not None else None,
            max_tokens=self.max_tokens,
        )


def compact_spec(spec: DirectiveSpec) -> DirectiveSpec:
    """`spec` with goal and reasoning bounded to 40 characters: what the compact profile's
    grammar enforces, so a small model cannot ramble past its deadline.

    >>> from metabonk_gym.think.games import adapter_for_name
    >>> compact_spec(adapter_for_name("BonkQuest").spec).max_reasoning_chars
    40
    """
    return replace(
        spec,
        max_goal_chars=min(spec.max_goal_chars, 40),
        max_reasoning_chars=min(spec.max_reasoning_chars, 40),
    )


def _short(value: Any) -> str:
    """A state value in the compact line (floats to 2 decimals, text as it is)."""
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def crop_map(text: str, margin: int = 1) -> str:
    r"""A framed text map (`games.framed`: two x-ruler lines, then rows prefixed with y) cut to
    the rows and columns that hold anything but the fill of its first row (walls), plus
    `margin`; the rulers and row labels keep the true x and y. Other text is returned as is.

    >>> print(crop_map("   0000\n   0123\n 0 ####\n 1 #@.#\n 2 ####", margin=0))
       00
       12
     1 @.
    """
    lines = text.split("\n")
    if len(lines) < 3:
        return text
    rows: list[tuple[int, str]] = []
    for line in lines[2:]:
        label, _, cells = line.strip().partition(" ")
        if not label.isdigit() or line[3:] != cells:
            return text
        rows.append((int(label), cells))
    width = len(rows[0][1])
    if any(len(cells) != width for _, cells in rows):
        return text
    fill = max(set(rows[0][1]), key=rows[0][1].count)
    keep_rows = [i for i, (_, cells) in enumerate(rows) if set(cells) != {fill}]
    keep_cols = [x for x in range(width) if any(cells[x] != fill for _, cells in rows)]
    if not keep_rows or not keep_cols:
        return text
    r0, r1 = max(0, keep_rows[0] - margin), min(len(rows) - 1, keep_rows[-1] + margin)
    c0, c1 = max(0, keep_cols[0] - margin), min(width - 1, keep_cols[-1] + margin)
    xs = range(c0, c1 + 1)
    out = ["   " + "".join(str(x // 10) for x in xs), "   " + "".join(str(x % 10) for x in xs)]
    out += [f"{rows[i][0]:2d} {rows[i][1][c0 : c1 + 1]}" for i in range(r0, r1 + 1)]
    return "\n".join(out)
