"""The one error of the bring-your-own-ROM tools: bad input, said in one line.

The CLI turns it (a `MetabonkError`) into one line and exit code 2; nothing is written first.

>>> str(IntegrateError("address 0x09000000 is outside RAM"))
'address 0x09000000 is outside RAM'
"""

from __future__ import annotations

from metabonk_gym.errors import MetabonkError


class IntegrateError(MetabonkError, ValueError):
    """Bad input to `metabonk integrate` / `metabonk ram` (a ROM, an address, a filter, a session)."""
