"""The dashboard's side of envs in other processes (`metabonk_gym.vector.publish`): one
`RemoteSource` per connected publisher, a frame source like the shared-memory ones.

Why the same interface (`num_envs`, `poll`, `wanted`, `request`): `LiveHub` samples every source
alike, so a Ray trial's or a pool worker's envs join the grid, the overlays, the timeline and the
map with no branch of their own. `request` only notes the shrink and the time; the server's
publish socket tells the publisher to sample (`control`) while requests keep coming, which the
hub makes only while a viewer is connected. What a publisher sends is shown, never followed: an
overlay's `decisions` (a log folder) is dropped and its `game_folder` kept only when it is a
bundled game's (`published_meta`), so a publisher cannot make the server read a file.

>>> src = RemoteSource("host pid 1")
>>> src.set_envs(2); src.request(1, 2); src.control(10.0)
{'on': True, 'fps': 10.0, 'shrink': [1, 2]}
>>> src.ingest(1, 5, b"\\xff\\xd8", b'{"return": 3.0}')
>>> jpeg, meta = src.poll(1, 0)
>>> meta["return"], meta["seq"], meta["source"], src.poll(1, 5)
(3.0, 5, 'host pid 1', None)
>>> published_meta({"return": 1, "decisions": {"folder": "/"}, "game_folder": "/etc"})
{'return': 1}
"""

from __future__ import annotations

import functools
import json
import threading
import time
from typing import Any

from metabonk_gym.gamedata import is_bundled_folder
from metabonk_gym.vector.publish import MAX_ENVS

#: A publisher samples while the hub asked within this many seconds.
ACTIVE_S = 1.5
#: Publishers one dashboard takes at once.
MAX_PUBLISHERS = 64


@functools.lru_cache(maxsize=64)
def _bundled(folder: str) -> bool:
    try:
        return is_bundled_folder(folder)
    except (OSError, ValueError, RuntimeError):
        return False


def published_meta(data: dict[str, Any]) -> dict[str, Any]:
    """A published overlay with nothing the server would read: no decision log folder, and a
    game folder only when it is a bundled game's (its map then shows)."""
    data.pop("decisions", None)
    folder = data.get("game_folder")
    if folder is not None and not (isinstance(folder, str) and _bundled(folder[:4096])):
        del data["game_folder"]
    return data


class RemoteSource:
    """The envs of one publishing process (see the module docstring).

    Args:
        label: what the page calls the process (its host and pid).
    """

    closed = False

    def __init__(self, label: str = "") -> None:
        self.label = label[:80]
        self.num_envs = 0
        self.received = 0
        self._frames: list[tuple[int, bytes, dict[str, Any]]] = []
        self._shrink: list[int] = []
        self._asked = 0.0
        self._lock = threading.Lock()

    def set_envs(self, n: int) -> None:
        """The publisher holds `n` envs now (capped at `MAX_ENVS`)."""
        n = max(0, min(int(n), MAX_ENVS))
        with self._lock:
            self._frames = (self._frames + [(0, b"", {})] * n)[:n]
            self._shrink = (self._shrink + [1] * n)[:n]
            self.num_envs = n

    def ingest(self, index: int, seq: int, jpeg: bytes, meta: bytes) -> None:
        """A frame the publisher sent (an overlay that is not a JSON object counts as empty)."""
        try:
            data = json.loads(meta) if meta else {}
        except ValueError:
            data = {}
        data = published_meta(data) if isinstance(data, dict) else {}
        with self._lock:
            if 0 <= index < self.num_envs:
                self._frames[index] = (int(seq), bytes(jpeg), data)
                self.received += 1

    # the hub's side (as `ViewBuffers`) --------------------------------------------------------
    def poll(self, i: int, last_seq: int = 0) -> tuple[bytes, dict[str, Any]] | None:
        with self._lock:
            if not 0 <= i < self.num_envs:
                return None
            seq, jpeg, meta = self._frames[i]
        if seq <= last_seq:
            return None
        return jpeg, {**meta, "seq": seq, "source": self.label}

    def wanted(self, i: int) -> bool:
        return False  # the publisher paces itself; the hub's requests only keep it sampling

    def request(self, i: int, shrink: int = 1) -> None:
        with self._lock:
            if 0 <= i < self.num_envs:
                self._shrink[i] = max(1, min(int(shrink), 4))
            self._asked = time.monotonic()

    def control(self, fps: float) -> dict[str, Any]:
        """What the publisher should do now: sample at `fps` with these shrinks, or nothing."""
        with self._lock:
            if time.monotonic() - self._asked > ACTIVE_S:
                return {"on": False}
            return {"on": True, "fps": float(fps), "shrink": list(self._shrink)}


class Publishers:
    """The connected publishers, in the order they connected.

    Args:
        limit: the most publishers connected at once (`add` refuses more).

    >>> group = Publishers(); a = group.add("a"); group.sources() == [a]
    True
    >>> group.remove(a); group.sources()
    []
    """

    def __init__(self, limit: int = MAX_PUBLISHERS) -> None:
        self.limit = int(limit)
        self._sources: list[RemoteSource] = []
        self._lock = threading.Lock()

    def add(self, label: str) -> RemoteSource | None:
        """A new publisher's source (None: the limit is reached)."""
        with self._lock:
            if len(self._sources) >= self.limit:
                return None
            source = RemoteSource(label)
            self._sources.append(source)
            return source

    def remove(self, source: RemoteSource) -> None:
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)
        source.closed = True

    def sources(self) -> list[RemoteSource]:
        with self._lock:
            return list(self._sources)
