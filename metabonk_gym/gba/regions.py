"""The GBA's memory map: the bus regions an emulator core exposes, and the range check on them.

Here, below the backends and the integration loader, so both check addresses with one function:
the backends at each read, an integration folder's variables and arrays when the env is made.

>>> check_region(0x02000000, 4)
>>> check_region(0xFFFFFFF0, 4)
Traceback (most recent call last):
...
ValueError: cannot read 4 bytes at 0xFFFFFFF0: outside the GBA regions 0x02000000-0x0203FFFF, ...
"""

from __future__ import annotations

import numpy as np

#: The GBA bus regions the cores expose: start address -> size in bytes.
GBA_REGIONS: dict[int, int] = {
    0x02000000: 0x40000,  # EWRAM
    0x03000000: 0x8000,  # IWRAM
    0x04000000: 0x400,  # I/O registers
    0x05000000: 0x400,  # palette
    0x06000000: 0x18000,  # VRAM
    0x07000000: 0x400,  # OAM
}


def check_region(address: int, n: int) -> None:
    """Raise ValueError unless [address, address+n) lies inside one GBA memory region."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"cannot read {n!r} bytes at 0x{address:08X}: give a count >= 0")
    for start, size in GBA_REGIONS.items():
        if start <= address and address + n <= start + size:
            return
    regions = ", ".join(f"0x{s:08X}-0x{s + z - 1:08X}" for s, z in GBA_REGIONS.items())
    raise ValueError(f"cannot read {n} bytes at 0x{address:08X}: outside the GBA regions {regions}")
