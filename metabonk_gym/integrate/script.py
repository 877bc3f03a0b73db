"""Input scripts: `wait 600; START 10; wait 60; A 10` as (buttons, frames) steps.

Each step is `BUTTON[+BUTTON...] FRAMES` (hold those buttons for FRAMES frames) or `wait FRAMES`
(no buttons); steps are separated by `;` or new lines, and `# ...` starts a comment. Button names
are the GBA's (A B SELECT START RIGHT LEFT UP DOWN R L), in any case. A script is how the RAM
search, the probes and `integrate state` play without a window, and what tests replay.

>>> parse_script("wait 2; right+a 3")
[(0, 2), (17, 3)]
>>> script_text([(0, 2), (17, 3)])
'wait 2; A+RIGHT 3'
>>> total_frames(parse_script("wait 600; START 10"))
610
"""

from __future__ import annotations

from metabonk_gym.errors import IntegrateError
from metabonk_gym.gba.buttons import BUTTONS, buttons_to_mask, mask_to_buttons

#: The most frames one script may run (an hour of play): a typo such as `wait 6000000` is refused.
MAX_SCRIPT_FRAMES = 60 * 60 * 60

Step = tuple[int, int]  # (KEYINPUT-order button mask, frames)


def parse_script(text: str) -> list[Step]:
    """The steps of an input script (see the module docstring); a one-line error names a bad step."""
    steps: list[Step] = []
    for raw in text.replace("\n", ";").split(";"):
        part = raw.split("#")[0].strip()
        if not part:
            continue
        words = part.split()
        if len(words) != 2:
            raise IntegrateError(
                f"input script step {part!r}: write BUTTON[+BUTTON] FRAMES or wait FRAMES "
                "(e.g. 'wait 600; START 10; RIGHT+A 8')"
            )
        what, frames_text = words
        try:
            frames = int(frames_text)
        except ValueError:
            raise IntegrateError(
                f"input script step {part!r}: {frames_text!r} is not a frame count"
            ) from None
        if frames < 0:
            raise IntegrateError(f"input script step {part!r}: frames must be >= 0")
        if what.lower() == "wait":
            mask = 0
        else:
            names = [b.upper() for b in what.split("+")]
            unknown = [b for b in names if b not in BUTTONS]
            if unknown:
                raise IntegrateError(
                    f"input script step {part!r}: unknown button {unknown[0]!r}; GBA buttons: "
                    f"{' '.join(BUTTONS)} (or wait)"
                )
            mask = buttons_to_mask(names)
        steps.append((mask, frames))
    if total_frames(steps) > MAX_SCRIPT_FRAMES:
        raise IntegrateError(f"input script runs {total_frames(steps)} frames, more than an hour")
    return steps


def total_frames(steps: list[Step]) -> int:
    return sum(frames for _, frames in steps)


def script_text(steps: list[Step]) -> str:
    """The script of `steps` (what `parse_script` reads back)."""
    return "; ".join(
        f"{'+'.join(mask_to_buttons(mask)) if mask else 'wait'} {frames}" for mask, frames in steps
    )
