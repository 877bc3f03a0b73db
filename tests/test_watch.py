"""`metabonk watch`: the server started for real, the page driven in a real headless chromium.

Live: a training vector env of BonkQuest (PauseToThink with the oracle strategist, so envs carry
directives) steps in a thread while the page shows it: frames change, the overlay shows the
directive's text, clicking an env opens its decision timeline, and a viewer that goes away
mid-stream leaves the stepping going. Other processes: `play --n-envs 2 --watch` shows both pool
workers' envs, a publisher sends nothing until a viewer connects and needs the key, `train appo`
and `tune pbt` stream their Ray processes' envs (slow). Replays: a Minari dataset recorded here
scrubs to step N and shows that step's action; a memory graph, an mp4 and a ladder (its JSON as a
table, its page) made for real show in the page. BonkArena's one-arena map places its envs.
Safety: `../` gets 404, a missing token 401, a wrong one 403.

Screenshots for docs/watch.md: `METABONK_WATCH_SCREENSHOTS=docs/images pytest tests/test_watch.py`
writes watch-grid.png, watch-map.png, watch-replay.png (and the others docs/watch.md shows) there.
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

from metabonk_gym.vector.view import MIN_SIDE, request_views, view_sources
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
            "/api/archive?path=../secret.txt",
            "/api/archive?path=link.txt",
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


# ----------------------------------------------------------------------------- other processes
def _watch_url(process: subprocess.Popen, deadline: float) -> str:
    """The URL a `--watch` command prints on stderr (its first `watch: ` line)."""
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        if line.startswith("watch: "):
            return line.split()[1]
    raise AssertionError("no watch URL printed")


@pytest.mark.net
def test_a_publisher_sends_only_while_watched_and_needs_the_key() -> None:
    """An env in another process (here: a publisher thread over a real env's view slot) reaches
    the dashboard over `/publish`; it encodes and sends nothing until a viewer connects, stops
    when the viewer goes, and a wrong key is refused."""
    import gymnasium as gym
    from websockets.sync.client import connect

    from metabonk_gym.vector.publish import Publisher
    from metabonk_gym.vector.view import ViewBuffers, ViewTap

    views = ViewBuffers.create(None, 1)
    env = ViewTap(gym.make("CartPole-v1", render_mode="rgb_array"), views, 0)
    stop = threading.Event()

    def play() -> None:
        env.reset(seed=0)
        while not stop.is_set():
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
            time.sleep(0.005)

    stepping = threading.Thread(target=play, daemon=True)
    stepping.start()
    hub = LiveHub(fps=10, sources=list)  # no envs of its own: only published ones
    publisher = wrong = None
    try:
        with WatchServer(None, hub, publish=True) as server:
            url = f"ws://127.0.0.1:{server.port}/publish"
            assert server.publish_key and server.token is None  # loopback: no page token
            publisher = Publisher(url, server.publish_key, lambda: [views]).start()
            wrong = Publisher(url, "not-the-key", lambda: [views]).start()
            deadline = time.monotonic() + 20
            while not publisher.connected and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(2.0)
            # connected, nobody watching: no frame encoded, none sent
            assert publisher.connected and publisher.sent == 0 and int(views.seq[0]) == 0
            assert wrong.error and not wrong.connected  # refused (4403)
            assert server.publishers is not None and len(server.publishers.sources()) == 1
            with connect(f"ws://127.0.0.1:{server.port}/ws", max_size=2**24) as ws:
                frames = 0
                while frames < 5 and time.monotonic() < deadline + 20:
                    message = ws.recv(timeout=10)
                    if isinstance(message, bytes):
                        frames += len(unpack_frames(message))
            snap = hub.snapshot()["envs"]
            assert frames >= 5 and publisher.sent >= 5
            assert snap[0]["source"] == publisher.label and snap[0]["length"] > 0
            time.sleep(3.0)  # the viewer is gone: the dashboard tells the publisher to stop
            sent = publisher.sent
            time.sleep(1.5)
            assert publisher.sent == sent
    finally:
        for p in (publisher, wrong):
            if p is not None:
                p.stop()
        stop.set()
        stepping.join(10)
        env.close()
        views.release()


@pytest.mark.net
@pytest.mark.browser
def test_frames_from_a_process_pool_reach_the_page(tmp_path: Path) -> None:
    """`metabonk play --n-envs 2 --watch`: the games run in a process pool, and the page shows
    both workers' frames (each tile names its process)."""
    command = [
        sys.executable,
        "-m",
        "metabonk_gym.cli.main",
        "play",
        ENV,
        "--agent",
        "random",
        "--n-envs",
        "2",
        "--episodes",
        "40",  # ~30 s of play: the page (a browser started cold) still sees frames change
        "--max-steps",
        "600",
        "--watch",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        url = _watch_url(process, deadline)
        with open_page(timeout_s=120) as page:
            page.goto(url)
            page.wait_for_selector("#img-1[src^='blob:']")
            page.wait_for_function(
                "['head-0', 'head-1'].every(i => document.getElementById(i)"
                ".textContent.includes(' pid '))"
            )
            heads = [page.text_content(f"#head-{i}") or "" for i in (0, 1)]
            pids = {int(h.split(" pid ", 1)[1].split(")", 1)[0]) for h in heads}
            # two pool workers' envs, none of them in the command's own process
            assert len(pids) >= 2 and process.pid not in pids, pids
            first = sum(int(page.get_attribute(f"#img-{i}", "data-seq") or 0) for i in (0, 1))
            page.wait_for_function(
                f"[0, 1].map(i => +document.getElementById('img-' + i).dataset.seq)"
                f".reduce((a, b) => a + b) > {first + 4}"
            )  # the frames go on changing
            _shot(page, tmp_path, "watch-pool.png")
        assert process.wait(timeout=300) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


PBT_FILE = """population_size: 2
perturbation_interval: 2048
total_steps: 8192
mutations: {learning_rate: [0.0001, 0.001]}
train: {n_envs: 1, n_steps: 128, batch_size: 64, n_epochs: 1, max_episode_steps: 300}
ray: {num_env_runners: 0}
"""


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.parametrize("job", ["train appo", "tune pbt"])
def test_ray_jobs_with_watch_stream_their_envs(job: str, tmp_path: Path) -> None:
    """`metabonk train appo --watch` (the envs in an RLlib env runner's vector env workers: a Ray
    actor's children) and `metabonk tune pbt --watch` (each member's envs in its Ray Tune
    trial): their frames reach the live stream, two envs, two processes."""
    from websockets.sync.client import connect

    run = ["--run-dir", str(tmp_path / "run"), "--watch", "127.0.0.1:0"]
    if job == "train appo":
        args = ["--total-steps", "20000", "--n-envs", "2", "--num-env-runners", "1"]
        args.append("--no-progress")
    else:
        (tmp_path / "pbt.yaml").write_text(PBT_FILE)
        args = ["--pbt", str(tmp_path / "pbt.yaml")]
    command = [sys.executable, "-m", "metabonk_gym.cli.main", *job.split(), ENV, *run, *args]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        url = _watch_url(process, deadline)
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        seen: dict[int, int] = {}
        sources: set[str] = set()
        with connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24) as ws:
            while (len(seen) < 2 or min(seen.values()) < 5) and time.monotonic() < deadline:
                message = ws.recv(timeout=240)
                if isinstance(message, bytes):
                    for index, _, _ in unpack_frames(message):
                        seen[index] = seen.get(index, 0) + 1
                else:
                    sources |= {e["source"] for e in json.loads(message)["envs"] if e["source"]}
        assert len(seen) == 2 and min(seen.values()) >= 5, seen
        assert len(sources) == 2 and str(process.pid) not in " ".join(sources), sources
    finally:
        process.kill()
        process.wait(60)


# ------------------------------------------------------------------------------------ replays
@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What runs leave behind, made for real: a ladder (one cell, its best and worst mp4 and
    its page) and a memory graph (BonkQuest's expert plays to room 2 with `Memory`)."""
    import gymnasium as gym
    from metabonk_gym.wrappers.memory import Memory

    from metabonk_gym.agents.ladder import run_ladder
    from metabonk_gym.games.BonkQuest.game import BonkQuestExpert

    root = tmp_path_factory.mktemp("replays")
    run_ladder([ENV], ["random"], root / "ladder", episodes=1, overrides={"max_episode_steps": 90})
    env = Memory(gym.make(ENV, state="start"), path=root / "run" / "memory.lbdb")
    try:
        obs, info = env.reset(seed=3)
        expert = BonkQuestExpert(env)
        while info["room"] < 2:
            obs, _, _, _, info = env.step(expert.act(obs, info))
    finally:
        env.close()
    return root


@pytest.mark.net
@pytest.mark.browser
def test_memory_graph_replay(replay_dir: Path, tmp_path: Path) -> None:
    from metabonk_gym.memory.graph import KnowledgeGraph
    from metabonk_gym.memory.report import render_map

    graph = KnowledgeGraph(str(replay_dir / "run" / "memory.lbdb"), read_only=True)
    try:
        height, width, _ = render_map(graph).shape
    finally:
        graph.close()
    with WatchServer(replay_dir) as server, open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#replay-list a")
        page.click("text=run/memory.lbdb")
        page.wait_for_function(
            "(() => { const i = document.getElementById('memory-map');"
            " return i && i.complete && i.naturalWidth > 0; })()"
        )
        # the map the database draws, and its summary: the rooms and the quest
        size = page.evaluate(
            "[document.getElementById('memory-map').naturalWidth,"
            " document.getElementById('memory-map').naturalHeight]"
        )
        grow = max(1, -(-MIN_SIDE // min(width, height)))  # (small pictures are enlarged)
        assert size == [width * grow, height * grow]
        summary = json.loads(page.text_content("#memory-summary"))
        assert len(summary["areas"]) >= 2
        assert "Reach the golden treasure" in json.dumps(summary["quests"])
        _shot(page, tmp_path, "watch-memory.png")


@pytest.mark.net
@pytest.mark.browser
def test_video_replay_plays(replay_dir: Path) -> None:
    videos = sorted((replay_dir / "ladder").rglob("*.mp4"))
    assert videos
    rel = videos[0].relative_to(replay_dir).as_posix()
    with WatchServer(replay_dir) as server, open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#replay-list a")
        page.click(f"text={rel}")
        # chromium decoded the file: its size is a GBA frame's, and it has a duration
        page.wait_for_function(
            "(() => { const v = document.getElementById('replay-video');"
            " return v && v.readyState >= 1 && v.duration > 0; })()"
        )
        assert page.evaluate(
            "[document.getElementById('replay-video').videoWidth,"
            " document.getElementById('replay-video').videoHeight]"
        ) == [240, 160]


@pytest.mark.net
@pytest.mark.browser
def test_ladder_replay_table_and_page(replay_dir: Path, tmp_path: Path) -> None:
    ladder = json.loads((replay_dir / "ladder" / "ladder.json").read_text())
    cell = ladder["cells"][0]
    with WatchServer(replay_dir) as server, open_page() as page:
        page.goto(server.url)
        page.wait_for_selector("#replay-list a")
        page.click("text=ladder/ladder.json")
        page.wait_for_selector("#ladder-table td")
        head = page.text_content("#ladder-table tr")
        row = page.text_content("#ladder-table tr:nth-child(2)")
        assert "agent" in head and "mean_return" in head and head.count("rank") == 1
        assert "random" in row and ENV in row and str(cell["rank"]) in row
        _shot(page, tmp_path, "watch-ladder.png")
        # the ladder's own page opens as it is, its table drawn by its script
        with page.expect_popup() as opened:
            page.click("text=ladder/ladder.html")
        popup = opened.value
        popup.wait_for_selector("#ladder td")
        assert "random" in popup.text_content("#ladder")


def test_bonkarena_places_its_player_on_its_one_map() -> None:
    """BonkArena's folder declares its map (one arena, pixels in 8-pixel cells): a real env's
    info places the player inside it, and moving moves the cell."""
    import gymnasium as gym

    from metabonk_gym.watch.worldmap import load_map_spec

    env = gym.make("MetaBonk/BonkArena-v0")
    try:
        _, info = env.reset(seed=0)
        spec = load_map_spec(env.unwrapped.game_data.folder)
        assert spec is not None and spec.area is None and spec.cell == 8
        start = spec.place(info)
        assert start is not None and 0 < start[0] < spec.width and 0 < start[1] < spec.height
        cells = {start}
        folder = Path(env.unwrapped.game_data.folder)
        right = json.loads((folder / "metabonk.json").read_text())["discrete_actions"].index(
            ["RIGHT"]
        )
        for _ in range(60):
            _, _, terminated, truncated, info = env.step(right)
            cells.add(spec.place(info))
            if terminated or truncated:
                break
        assert None not in cells and max(x for x, _ in cells) > start[0]  # walked right
    finally:
        env.close()


@pytest.mark.net
@pytest.mark.browser
def test_bonkarena_map_in_the_page(tmp_path: Path) -> None:
    """The Map tab of a live BonkArena run: one arena drawn (no area variable), both envs placed."""
    from metabonk_gym.training.config import resolve_config
    from metabonk_gym.training.envs import close_venv, make_train_venv

    arena = "MetaBonk/BonkArena-v0"
    cfg = resolve_config(arena, overrides={"n_envs": 2, "frame_stack": 1})
    request_views(True)
    venv = make_train_venv(arena, cfg)
    request_views(False)
    stepper = Stepper(venv)
    stepper.thread.start()
    try:
        with WatchServer(None, LiveHub(fps=10, label="arena")) as server, open_page() as page:
            page.goto(server.url)
            page.wait_for_selector("#img-1[src^='blob:']")
            page.click("#tab-map")
            page.wait_for_function(
                "document.getElementById('map-note').textContent.includes('positions of 2 envs')"
            )
            # the canvas is the arena's 30 x 20 cells, whole
            width, height = page.evaluate(
                "[document.getElementById('map-canvas').width,"
                " document.getElementById('map-canvas').height]"
            )
            assert width * 20 == height * 30, (width, height)
            _shot(page, tmp_path, "watch-map-arena.png")
    finally:
        stepper.stop()
        close_venv(venv)
    assert stepper.error is None
