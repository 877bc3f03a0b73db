"""`metabonk watch`: the server started for real, the page driven in a real headless chromium.

Live: a training vector env of BonkQuest (PauseToThink with the oracle strategist, so envs carry
directives) steps in a thread while the page shows it: frames change, the overlay shows the
directive's text, clicking an env opens its decision timeline, and a viewer that goes away
mid-stream leaves the stepping going. Replays: a Minari dataset recorded here scrubs to step N
and shows that step's action. Safety: `../` gets 404, a missing token 401, a wrong one 403.

Screenshots for docs/watch.md: `METABONK_WATCH_SCREENSHOTS=docs/images pytest tests/test_watch.py`
writes watch-grid.png, watch-map.png and watch-replay.png there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metabonk_gym.vector.view import request_views, view_sources
from metabonk_gym.watch import LiveHub, WatchServer
from metabonk_gym.watch.server import unpack_frames

sys.path.insert(0, str(Path(__file__).parent))
from browser import open_page  # noqa: E402

ENV = "MetaBonk/BonkQuest-v0"
SHOTS = os.environ.get("METABONK_WATCH_SCREENSHOTS")


def _shot(page: Any, tmp: Path, name: str) -> Path:
    path = tmp / name
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 5000  # a real picture, not an empty page
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(SHOTS) / name)
    return path


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class Stepper:
    """Steps a training vector env with random actions in a thread (the "training")."""

    def __init__(self, venv: Any) -> None:
        self.venv = venv
        self.steps = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = np.random.default_rng(0)
        try:
            self.venv.reset()
            while not self._stop.is_set():
                self.venv.step(rng.integers(0, 6, self.venv.num_envs))
                self.steps += self.venv.num_envs
                time.sleep(0.002)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)


@pytest.fixture
def live(tmp_path: Path) -> Any:
    from metabonk_gym.training.config import resolve_config
    from metabonk_gym.training.envs import close_venv, make_train_venv

    cfg = resolve_config(
        ENV,
        overrides={
            "n_envs": 6,
            "frame_stack": 1,
            "wrappers": [
                {"name": "pause_to_think", "engine": "oracle", "log_dir": str(tmp_path / "think")}
            ],
        },
    )
    request_views(True)
    venv = make_train_venv(ENV, cfg)
    request_views(False)
    stepper = Stepper(venv)
    stepper.thread.start()
    hub = LiveHub(fps=12, label="test run")
    server = WatchServer(tmp_path, hub).start()
    try:
        yield server, hub, stepper
    finally:
        server.stop()
        stepper.stop()
        close_venv(venv)
    assert not view_sources() or all(s.closed for s in view_sources())


@pytest.mark.net
@pytest.mark.browser
def test_live_grid_overlay_timeline_and_disconnect(live: Any, tmp_path: Path) -> None:
    server, hub, stepper = live
    with open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#img-5[src^='blob:']")
        first = {i: page.get_attribute(f"#img-{i}", "data-seq") for i in range(6)}
        time.sleep(1.5)
        later = {i: page.get_attribute(f"#img-{i}", "data-seq") for i in range(6)}
        for i in range(6):  # every env's frame changed over time
            assert int(later[i]) > int(first[i]), (first, later)
        assert hub.viewers == 1
        # the overlay shows the directive in force, as the env reported it
        page.wait_for_function("document.getElementById('dir-0').textContent.includes('goal:')")
        shown = page.text_content("#dir-0")
        goals = [e["directive"]["goal"] for e in hub.snapshot()["envs"] if e["directive"]]
        assert goals and any(g and g in shown for g in goals), (shown, goals)
        _shot(page, tmp_path, "watch-grid.png")
        # click an env: its larger view and its decision timeline
        page.click("#env-1")
        page.wait_for_selector("#timeline li.call img")
        assert page.is_visible("#detail-img")
        text = page.text_content("#timeline")
        calls = hub.decisions(1)  # env 1's own thinker's log: its calls, none of another env's
        assert calls and {c["run"] for c in calls} == {hub.decision_log(1)["run"]}
        assert calls[0]["directive"]["goal"] in text and "prompt" in text and "answer" in text
        page.wait_for_function(
            "[...document.querySelectorAll('#timeline li.call img')].some("
            "i => i.complete && i.naturalWidth > 0)"
        )  # the frame the model saw
        # the env looked at closely gets whole frames (240 wide), grid tiles every other pixel
        page.wait_for_function(
            "document.getElementById('detail-img').naturalWidth === 240 && "
            "document.getElementById('img-0').naturalWidth === 120"
        )
        page.locator("#detail").scroll_into_view_if_needed()
        _shot(page, tmp_path, "watch-timeline.png")
        # the world map: every env placed, visits counted
        page.click("#tab-map")
        page.wait_for_function("document.getElementById('map-note').textContent.includes('6 envs')")
        _shot(page, tmp_path, "watch-map.png")
        steps_before = stepper.steps
    # the browser is gone mid-stream: the envs go on stepping, the hub stops asking
    deadline = time.monotonic() + 10
    while hub.viewers and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hub.viewers == 0
    time.sleep(1.0)
    assert stepper.error is None
    assert stepper.thread.is_alive() and stepper.steps > steps_before


@pytest.mark.net
def test_paths_outside_the_directory_get_404(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "ok.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    with WatchServer(root) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert _get(base + "/files/ok.txt") == (200, b"inside")
        for path in (
            "/files/../secret.txt",
            "/files/%2e%2e/secret.txt",
            "/files/..%2fsecret.txt",
            "/files/link.txt",
            "/files//etc/passwd",
            "/api/decisions?path=../",
            "/api/dataset?path=..%2F..",
        ):
            status, body = _get(base + path)
            assert status == 404, (path, status)
            assert b"outside" not in body
        status, _ = _get(base + "/static/../server.py")
        assert status == 404


@pytest.mark.net
def test_another_host_needs_the_token(tmp_path: Path) -> None:
    with WatchServer(tmp_path, host="0.0.0.0") as server:
        assert server.token and f"token={server.token}" in server.url
        base = f"http://127.0.0.1:{server.port}"
        assert _get(base + "/api/info")[0] == 401
        assert _get(base + "/api/info?token=wrong")[0] == 403
        status, body = _get(base + f"/api/info?token={server.token}")
        assert status == 200 and json.loads(body)["replays"] is True
        # read-only: nothing but GET
        request = urllib.request.Request(
            base + f"/files/x?token={server.token}", data=b"x", method="POST"
        )
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError("POST was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code in (404, 405)
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    hub = LiveHub()
    with WatchServer(None, hub, host="0.0.0.0") as server:
        for query in ("", "?token=bad"):  # the live stream refuses too, before it starts
            with pytest.raises(InvalidStatus) as refused:
                connect(f"ws://127.0.0.1:{server.port}/ws{query}", open_timeout=10)
            assert refused.value.response.status_code == 403
        assert hub.viewers == 0


def _record_dataset(root: Path) -> tuple[Path, Any]:
    env = dict(os.environ, MINARI_DATASETS_PATH=str(root))
    command = [
        sys.executable,
        "-m",
        "metabonk_gym.cli.main",
        "record",
        ENV,
        "--agent",
        "random",
        "--dataset",
        "watchtest/random-v0",
        "--episodes",
        "2",
        "--max-steps",
        "40",
        "--set",
        "obs_type=rgb",
        "--set",
        "downscale=2",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = root / "watchtest" / "random-v0"
    import minari

    return folder, minari.MinariDataset(folder / "data")


@pytest.mark.net
@pytest.mark.browser
def test_dataset_replay_scrubs_to_a_step(tmp_path: Path) -> None:
    folder, dataset = _record_dataset(tmp_path / "datasets")
    episode = next(iter(dataset.iterate_episodes([1])))
    step = min(17, len(episode.actions) - 1)
    want = np.asarray(episode.actions[step]).tolist()
    with WatchServer(tmp_path / "datasets") as server, open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#replay-list a")
        page.click("text=watchtest/random-v0")
        page.wait_for_selector("#ds-episode")
        page.select_option("#ds-episode", "1")
        page.wait_for_selector("#ds-action[data-step='0']")
        page.fill("#ds-step", str(step))
        page.wait_for_selector(f"#ds-action[data-step='{step}']")
        text = page.text_content("#ds-action")
        assert text.startswith(f"action {json.dumps(want)}"), (text, want)
        assert f"step {step} /" in page.text_content("#ds-label")
        page.wait_for_function(
            "document.getElementById('ds-frame').complete && "
            "document.getElementById('ds-frame').naturalWidth > 0"
        )
        _shot(page, tmp_path, "watch-replay.png")


@pytest.mark.net
@pytest.mark.slow
def test_train_ppo_with_watch(tmp_path: Path) -> None:
    """`metabonk train ppo --watch 127.0.0.1:0`: the URL is printed and the live API lists the
    training envs with frames while a viewer is connected."""
    from websockets.sync.client import connect

    command = [
        sys.executable,
        "-m",
        "metabonk_gym.cli.main",
        "train",
        "ppo",
        ENV,
        "--run-dir",
        str(tmp_path / "run"),
        "--total-steps",
        "4096",
        "--n-envs",
        "2",
        "--no-progress",
        "--watch",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if line.startswith("watch: "):
                url = line.split()[1]
        assert url, "no watch URL printed"
        base = url.rstrip("/")
        port = int(base.rsplit(":", 1)[1])
        with connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24) as ws:
            frames = 0
            while frames < 4 and time.monotonic() < deadline:
                message = ws.recv(timeout=30)
                if isinstance(message, bytes):
                    frames += len(unpack_frames(message))
        status, body = _get(base + "/api/live")
        envs = json.loads(body)["envs"]
        assert status == 200 and len(envs) >= 2 and frames >= 4
        assert process.wait(timeout=300) == 0
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.net
@pytest.mark.browser
def test_training_view_reads_the_runs_tensorboard_files(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "run"
    writer = SummaryWriter(str(run / "tensorboard" / "PPO_1"))
    for step in range(0, 5000, 500):
        writer.add_scalar("time/fps", 100 + step / 100, step)
        writer.add_scalar("episode/win_rate", step / 10000, step)
    writer.close()
    (run / "run.json").write_text(json.dumps({"status": "running", "stage": "room2"}))
    with WatchServer(run) as server, open_page() as page:
        page.goto(server.url)
        page.click("#tab-train")
        page.wait_for_selector(".chart canvas")
        text = page.text_content("#train")
        assert "time/fps (last 145" in text and "episode/win_rate" in text
        assert "room2" in text and "running" in text


@pytest.mark.net
@pytest.mark.slow
def test_eval_with_watch_serves_its_one_env(tmp_path: Path) -> None:
    """`metabonk eval ... --watch`: the env in eval's own process is tapped and served too."""
    from websockets.sync.client import connect

    command = [
        sys.executable,
        "-m",
        "metabonk_gym.cli.main",
        "eval",
        ENV,
        "random",
        "--episodes",
        "40",
        "--max-steps",
        "300",
        "--watch",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url, deadline = None, time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            if line.startswith("watch: "):
                url = line.split()[1]
        assert url, "no watch URL printed"
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        seen: set[int] = set()
        with connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24) as ws:
            frames = 0
            while frames < 5 and time.monotonic() < deadline:
                message = ws.recv(timeout=30)
                if isinstance(message, bytes):
                    records = unpack_frames(message)
                    frames += len(records)
                    seen.update(index for index, _, _ in records)
        assert frames >= 5 and seen == {0}
        status, body = _get(url.rstrip("/") + "/api/live")
        assert status == 200 and json.loads(body)["envs"][0]["info"]["room"] >= 1
    finally:
        process.kill()
        process.wait(30)
