"""A human at the keyboard (pygame), and the window `metabonk play` shows any agent in.

The window draws the full-colour screen (whatever observation the agent gets) scaled up, with the
key map beside it. Keys follow mGBA's defaults. Closing the window sets `closed`, which ends the
episode; `play`/`record` then save the partial episode as truncated or drop it, and say which.

>>> KEY_MAP["X"], KEY_MAP["ENTER"]
('A', 'START')
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError, action_index

#: Keyboard key -> GBA button (mGBA's default layout).
KEY_MAP: dict[str, str] = {
    "UP": "UP",
    "DOWN": "DOWN",
    "LEFT": "LEFT",
    "RIGHT": "RIGHT",
    "X": "A",
    "Z": "B",
    "A": "L",
    "S": "R",
    "ENTER": "START",
    "BACKSPACE": "SELECT",
}

SCALE = 3


def display_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why a window would be invisible here (None when a display seems to be there): SDL's
    dummy/offscreen video driver, or on Linux neither DISPLAY nor WAYLAND_DISPLAY set.

    >>> display_problem({"SDL_VIDEODRIVER": "dummy", "DISPLAY": ":0"})
    'SDL_VIDEODRIVER=dummy draws no window'
    >>> display_problem({"SDL_VIDEODRIVER": "x11", "DISPLAY": ":0"}) is None
    True
    """
    import os
    import sys

    env = os.environ if environ is None else environ
    driver = env.get("SDL_VIDEODRIVER", "").lower()
    if driver in ("dummy", "offscreen"):
        return f"SDL_VIDEODRIVER={driver} draws no window"
    if driver or not sys.platform.startswith("linux"):
        return None
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return "neither DISPLAY nor WAYLAND_DISPLAY is set (no desktop session)"
    return None


def require_display(agent: str = "human") -> None:
    """`AgentError` when a human would play a window nobody can see (and record no-ops)."""
    problem = display_problem()
    if problem is not None:
        raise AgentError(
            f"--agent {agent} needs a window you can see, but {problem}; play on a desktop "
            "(or over ssh -X), or choose --agent scripted, random or a model PATH.zip"
        )


PANEL_WIDTH = 190


def _pygame_key(name: str) -> int:
    import pygame

    special = {
        "UP": pygame.K_UP,
        "DOWN": pygame.K_DOWN,
        "LEFT": pygame.K_LEFT,
        "RIGHT": pygame.K_RIGHT,
        "ENTER": pygame.K_RETURN,
        "BACKSPACE": pygame.K_BACKSPACE,
    }
    return special.get(name, pygame.key.key_code(name.lower()))


class PlayWindow:
    """A pygame window: the frame scaled x3, the key map and a status line beside it.

    Args:
        title: the window's caption.
        fps: the most frames per second `show` draws (it sleeps to keep to it).
        show_keys: draw the key map and the status text in a panel right of the frame.
    """

    def __init__(
        self, title: str = "metabonk play", fps: float = 15.0, show_keys: bool = True
    ) -> None:
        import pygame

        pygame.init()
        self.pygame = pygame
        self.fps = fps
        self.show_keys = show_keys
        self.surface: Any = None
        self.clock = pygame.time.Clock()
        self.font = pygame.font.Font(None, 20)
        self.title = title
        self.closed = False
        self.held: set[int] = set()
        self._keys = {_pygame_key(k): button for k, button in KEY_MAP.items()}

    def pump(self) -> None:
        """Handle window events: close, key presses and releases."""
        for event in self.pygame.event.get():
            if event.type == self.pygame.QUIT:
                self.closed = True
            elif event.type == self.pygame.KEYDOWN:
                if event.key == self.pygame.K_ESCAPE:
                    self.closed = True
                self.held.add(event.key)
            elif event.type == self.pygame.KEYUP:
                self.held.discard(event.key)

    def buttons(self) -> set[str]:
        return {self._keys[k] for k in self.held if k in self._keys}

    def show(self, frame: np.ndarray, status: str = "") -> None:
        pygame = self.pygame
        if frame.ndim == 3 and frame.shape[-1] == 1:
            frame = np.repeat(frame, 3, axis=-1)
        h, w = frame.shape[:2]
        if self.surface is None:
            width = w * SCALE + (PANEL_WIDTH if self.show_keys else 0)
            self.surface = pygame.display.set_mode((width, h * SCALE))
            pygame.display.set_caption(self.title)
        image = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
        self.surface.fill((20, 20, 28))
        self.surface.blit(pygame.transform.scale(image, (w * SCALE, h * SCALE)), (0, 0))
        if self.show_keys:
            x, y = w * SCALE + 10, 10
            lines = [
                "keys",
                *[f"{k:>9}  {b}" for k, b in KEY_MAP.items()],
                "      ESC  quit",
                "",
                *status.split("\n"),
            ]
            for line in lines:
                self.surface.blit(self.font.render(line, True, (230, 230, 230)), (x, y))
                y += 18
        pygame.display.flip()
        self.clock.tick(self.fps)

    def close(self) -> None:
        self.pygame.display.quit()
        self.closed = True


class HumanAgent:
    """Maps the keys held in a `PlayWindow` to the env's discrete action each step.

    Args:
        env: a GBA env; held buttons become the nearest of its discrete actions (`action_index`).
        window: where keys are read (and `play` draws); default: a new `PlayWindow` at
            60 / `frameskip` fps, the game's real speed.
    """

    name = "human"

    def __init__(self, env: gym.Env, window: PlayWindow | None = None) -> None:
        self.env = env
        frameskip = int(getattr(env.unwrapped, "frameskip", 4))
        self.window = window if window is not None else PlayWindow(fps=60.0 / frameskip)

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self.window.pump()

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        self.window.pump()
        return action_index(self.env, self.window.buttons())


class GameInputAgent:
    """The person playing the game itself: for envs whose game reports that person's input
    (`env_traits(...).human_input == "snapshot"`, Megabonk's BonkLink input snapshot).

    The env is made with `send_actions=False`, so the neutral action `act` returns is never
    sent; `record` stores `info["human_action"]` (what the person played during each step) as
    the step's action. A game that sends no input snapshot is refused at reset in one line.

    Args:
        env: the env (made with `send_actions=False`); its action space gives the neutral action.
    """

    name = "human"

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self._neutral = (
            np.zeros(env.action_space.shape, env.action_space.dtype)
            if isinstance(env.action_space, gym.spaces.Box)
            else env.action_space.sample()
        )

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        if "human_action" not in info:
            raise AgentError(
                "the game sent no input snapshot, so there is no human action to record: set "
                "EnableInputSnapshot = true in BepInEx/config/com.metabonk.bonklink.cfg (or run "
                "`metabonk bonklink-sim --human scripted`)"
            )

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        return self._neutral
