"""`Memory`: a GBA env's public view of the machine's memory (the bus, by address).

Wrappers that read memory the integration does not name (VRAM, OAM, I/O registers) use
`env.unwrapped.memory`, never a backend's internals; it is as fast as the backend allows.

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0"); _ = env.reset(seed=0)
>>> hex(env.unwrapped.memory.value(0x02000000, "<u4"))
'0x4b4e4f42'
>>> [a.shape for a in env.unwrapped.memory.regions([(0x05000000, 0x400), (0x07000000, 8)])]
[(1024,), (8,)]
>>> env.close()
"""

from __future__ import annotations

import numpy as np

from metabonk_gym.gba.backends.base import EmulatorBackend


class Memory:
    """Reads (and writes) of the GBA bus through an env's backend.

    Args:
        backend: the emulator backend the env runs on.
    """

    def __init__(self, backend: EmulatorBackend) -> None:
        self._backend = backend

    def read(self, address: int, n: int) -> bytes:
        """`n` bytes at `address` (inside one region: EWRAM, IWRAM, I/O, palette, VRAM, OAM)."""
        return self._backend.read_bytes(address, n)

    def regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        """Several `(address, n)` spans as read-only uint8 arrays, in one go (on the embedded
        core: views of one copy of memory, ~30 us for all). Copy them to keep them past a step."""
        return self._backend.read_regions(spans)

    def value(self, address: int, type_: str) -> int:
        """One stable-retro typed value (`<u2`, `|i1`, ...)."""
        return self._backend.read(address, type_)

    def write(self, address: int, type_: str, value: int) -> None:
        """Write one typed value (for tests, curricula and cheats)."""
        self._backend.write(address, type_, value)
