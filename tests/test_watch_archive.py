"""`metabonk watch` shows an explorer's archive on the world map (issue 34): the real server on
loopback reads an archive that BonkQuest's explorer wrote on the mGBA core, places its cells in
their rooms (3-tile buckets of the game's world map), coloured by visits, and the page, in a real
headless chromium, draws it from the Replays tab. Screen cells (a game with no RAM cells) go on a
grid in the order found. A corrupt archive is a one-line 422, a path outside the folder or a
link out of it 404.
"""

from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.training.explore import ExploreSettings, run_explore
from metabonk_gym.training.explore_archive import Archive
from metabonk_gym.watch import WatchServer

sys.path.insert(0, str(Path(__file__).parent))
from browser import open_page  # noqa: E402

QUEST = "MetaBonk/BonkQuest-v0"


def get(server: WatchServer, rel: str) -> tuple[int, bytes]:
    url = f"{server.url.rstrip('/')}/api/archive?path={urllib.parse.quote(rel)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a BonkQuest archive (room cells) and a screen-cell one."""
    folder = tmp_path_factory.mktemp("watched")
    run_explore(QUEST, folder / "explore", ExploreSettings(n_envs=1, max_frames=6_400, seed=0))
    screen = Archive(meta={"env_id": "MetaBonk/HatWizard-v0", "rom_sha1": "ab" * 20,
                           "cells": {"kind": "screen", "width": 11, "height": 8, "levels": 8}})  # fmt: skip
    for i in range(5):
        screen.update((i, 0), float(i), i, b"s", np.zeros(i, np.uint8), i == 4, i)
        screen.seen[i] = 10 * (i + 1)
    (folder / "screen").mkdir()
    screen.save(folder / "screen" / "archive.npz")
    return folder


@pytest.mark.net
def test_the_archive_map_places_cells_in_their_rooms(root: Path) -> None:
    archive = Archive.load(root / "explore" / "archive.npz")
    with WatchServer(root) as server:
        status, body = get(server, "explore/archive.npz")
        assert status == 200, body[:400]
        data = json.loads(body)
        assert get(server, "explore")[1] == body  # the explorer's folder names it too
        found = json.loads(urllib.request.urlopen(server.url + "api/scan", timeout=30).read())
        assert {"explore/archive.npz", "screen/archive.npz"} <= set(found["archives"])
    assert data["placed"] == "world map" and data["spec"]["area"] == "room"
    assert data["cells"] == len(archive) and data["env_id"] == QUEST
    # room r is the r-th 30 x 20 block: each cell's 3 x 3 tiles lie in its own room's block
    rooms = {key[0] for key in archive.keys}
    for x, y, _ in data["heat"]:
        assert x // 30 + 1 in rooms and 0 <= y < 20, (x, y)
    # every cell's visits on each of its squares: 3 x 3 tiles, the bottom row's 3 x 2 (20 rows)
    squares = [
        3 * len([y for y in range(3 * key[2], 3 * key[2] + 3) if y < 20]) for key in archive.keys
    ]
    assert sum(n for *_, n in data["heat"]) == sum(s * n for s, n in zip(squares, archive.seen))
    best = archive.keys[archive.best()]
    assert len(data["best"]) == squares[archive.best()]
    assert all(best[0] == x // 30 + 1 and x % 30 // 3 == best[1] for x, _ in data["best"])


@pytest.mark.net
def test_screen_cells_go_on_a_grid_and_bad_archives_are_refused(root: Path, tmp_path: Path) -> None:
    with WatchServer(root) as server:
        status, body = get(server, "screen")
        assert status == 200, body
        data = json.loads(body)
        assert data["placed"] == "grid" and data["spec"]["area"] is None
        width = data["spec"]["width"]
        assert data["heat"] == sorted([[i % width, i // width, 10 * (i + 1)] for i in range(5)])
        assert data["won"] == [[4 % width, 4 // width]] and data["best"] == data["won"]
        # cut short: refused with the archive's one line, naming the path asked for
        bad = root / "bad"
        bad.mkdir(exist_ok=True)
        raw = (root / "screen" / "archive.npz").read_bytes()
        (bad / "archive.npz").write_bytes(raw[: len(raw) // 2])
        status, body = get(server, "bad/archive.npz")
        assert status == 422 and b"bad/archive.npz" in body and b"\n" not in body.strip(), body
        assert str(root).encode() not in body  # no temporary or server path in the message
        # outside the folder, missing, or a link out of it: 404
        outside = tmp_path / "outside"
        outside.mkdir()
        shutil.copy(root / "screen" / "archive.npz", outside / "archive.npz")
        (root / "link").symlink_to(outside, target_is_directory=True)
        try:
            for rel in ("../outside/archive.npz", "nothing/archive.npz", "link/archive.npz", ""):
                assert get(server, rel)[0] == 404, rel
        finally:
            (root / "link").unlink()


@pytest.mark.net
@pytest.mark.browser
def test_the_page_draws_the_archive(root: Path, tmp_path: Path) -> None:
    with WatchServer(root) as server, open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#replay-list a")
        page.click("text=explore/archive.npz")
        page.wait_for_selector("#archive-note")
        note = page.text_content("#archive-note")
        assert QUEST in note and "placed on the world map" in note, note
        width, height = page.evaluate(
            "[document.getElementById('archive-canvas').width,"
            " document.getElementById('archive-canvas').height]"
        )
        assert width * 20 == height * 150, (width, height)  # five 30 x 20 rooms side by side
        # painted: some pixel of room 1 is the heat colour, not the black background
        lit = page.evaluate(
            "(() => { const c = document.getElementById('archive-canvas');"
            " const d = c.getContext('2d').getImageData(0, 0, c.width / 5, c.height).data;"
            " let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] > 100 && d[i + 2] < 60) n++;"
            " return n; })()"
        )
        assert lit > 0
        page.screenshot(path=str(tmp_path / "watch-archive.png"))
        assert (tmp_path / "watch-archive.png").stat().st_size > 5000
