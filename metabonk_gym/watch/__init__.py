"""`metabonk watch`: a live dashboard of running envs and a replay viewer, in the browser.

`LiveHub` samples frames from the envs' view slots (`metabonk_gym.vector.view`) while a viewer
is connected; `LiveProcess` runs it and the server in a process of their own (`--watch`);
`WatchServer` serves the page (static files shipped in `static/`), the
live stream, the run's TensorBoard curves and the replays found in a directory.

>>> from metabonk_gym.watch import LiveHub, WatchServer
>>> LiveHub.__name__, WatchServer.__name__
('LiveHub', 'WatchServer')
"""

from metabonk_gym.watch.hub import LiveHub
from metabonk_gym.watch.live import LiveProcess
from metabonk_gym.watch.server import WatchServer, parse_address

__all__ = ["LiveHub", "LiveProcess", "WatchServer", "parse_address"]
