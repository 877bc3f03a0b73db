"""The throwaway process of `metabonk_gym.gba.backends.probe`: load a state on a ROM and run it.

Exit code 0 when the state loaded and ran `PROBE_FRAMES` frames, `REFUSED` (message on stderr)
when the core refused it; a hang is the parent's to end.

>>> REFUSED
3
"""

from __future__ import annotations

import sys
from pathlib import Path

from metabonk_gym.errors import CorruptSavestateError
from metabonk_gym.gba.backends.embedded import RetroCore
from metabonk_gym.gba.backends.probe import PROBE_FRAMES, REFUSED


def main(argv: list[str]) -> int:
    """`ROM STATE_FILE`: load the raw state (the file is deleted once read) and run it."""
    rom, state_file = argv
    state = Path(state_file).read_bytes()
    Path(state_file).unlink(missing_ok=True)
    core = RetroCore(rom)
    try:
        core.load_state(state)
    except CorruptSavestateError as exc:
        print(exc, file=sys.stderr, flush=True)
        return REFUSED
    core.step(PROBE_FRAMES, 0)
    core.screen()
    core.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
