"""GBA buttons: names, the KEYINPUT bit order, and stable-retro's button-mask order.

The env speaks KEYINPUT order (bit 0..9 = A, B, SELECT, START, RIGHT, LEFT, UP, DOWN, R, L);
stable-retro's GBA core wants a 12-entry mask in its own order, converted here once per action.

>>> buttons_to_mask(["A", "UP"])
65
>>> mask_to_buttons(65)
['A', 'UP']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

#: The 10 GBA buttons in KEYINPUT bit order: the MultiBinary action layout.
BUTTONS: tuple[str, ...] = ("A", "B", "SELECT", "START", "RIGHT", "LEFT", "UP", "DOWN", "R", "L")

#: stable-retro's GBA button order (None = unused slot).
RETRO_ORDER: tuple[str | None, ...] = (
    "B",
    None,
    "SELECT",
    "START",
    "UP",
    "DOWN",
    "LEFT",
    "RIGHT",
    "A",
    None,
    "L",
    "R",
)

#: Default discrete actions for a user ROM without a metabonk.json: no-op, 8 directions,
#: the face and shoulder buttons, Start, Select, and each cardinal direction with A and with B.
DEFAULT_DISCRETE: tuple[tuple[str, ...], ...] = (
    (),
    ("UP",),
    ("DOWN",),
    ("LEFT",),
    ("RIGHT",),
    ("UP", "LEFT"),
    ("UP", "RIGHT"),
    ("DOWN", "LEFT"),
    ("DOWN", "RIGHT"),
    ("A",),
    ("B",),
    ("L",),
    ("R",),
    ("START",),
    ("SELECT",),
    ("UP", "A"),
    ("DOWN", "A"),
    ("LEFT", "A"),
    ("RIGHT", "A"),
    ("UP", "B"),
    ("DOWN", "B"),
    ("LEFT", "B"),
    ("RIGHT", "B"),
)


def buttons_to_mask(names: Iterable[str]) -> int:
    """KEYINPUT-order bit mask (1 = pressed) of button names."""
    mask = 0
    for name in names:
        try:
            mask |= 1 << BUTTONS.index(name.upper())
        except ValueError:
            raise ValueError(f"unknown GBA button {name!r}; valid: {', '.join(BUTTONS)}") from None
    return mask


def mask_to_buttons(mask: int) -> list[str]:
    """Button names of a KEYINPUT-order mask."""
    return [name for bit, name in enumerate(BUTTONS) if mask >> bit & 1]


def multibinary_to_mask(pressed: Sequence[int] | np.ndarray) -> int:
    """KEYINPUT-order mask of a 10-entry 0/1 vector."""
    mask = 0
    for bit, value in enumerate(pressed):
        if value:
            mask |= 1 << bit
    return mask


def mask_to_retro(mask: int) -> np.ndarray:
    """stable-retro's 12-entry uint8 button array for a KEYINPUT-order mask."""
    out = np.zeros(len(RETRO_ORDER), dtype=np.uint8)
    for i, name in enumerate(RETRO_ORDER):
        if name is not None and mask >> BUTTONS.index(name) & 1:
            out[i] = 1
    return out
