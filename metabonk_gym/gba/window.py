"""A pygame window for `render_mode="human"` and for humans playing (`metabonk play`).

Frames are shown `SCALE` times their size (pygame loads on the first window):

>>> SCALE, Window(surface=None, clock=None).closed
(3, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SCALE = 3


@dataclass
class Window:
    surface: Any
    clock: Any
    closed: bool = False


def show_frame(window: Window | None, frame: np.ndarray, fps: float) -> Window:
    """Draw `frame` (H, W, 3) scaled up, opening the window on first use; keeps `fps`."""
    import pygame

    if window is None:
        pygame.init()
        surface = pygame.display.set_mode((frame.shape[1] * SCALE, frame.shape[0] * SCALE))
        pygame.display.set_caption("metabonk-gym")
        window = Window(surface, pygame.time.Clock())
    for event in pygame.event.get():
        if event.type == pygame.QUIT:
            window.closed = True
    image = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
    pygame.transform.scale(image, window.surface.get_size(), window.surface)
    pygame.display.flip()
    window.clock.tick(fps)
    return window


def close_window(window: Window) -> None:
    import pygame

    pygame.display.quit()
    window.closed = True
