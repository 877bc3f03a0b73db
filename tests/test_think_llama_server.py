"""llama.cpp's `llama-server` (built by `scripts/setup.sh think`) behind `metabonk serve-vlm` and
`OpenAIEngine`: requests overlap on its slots, the schema holds, images reach the model, a killed
server gives a fallback in time, and no server outlives its `metabonk serve-vlm` parent."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import pytest

from metabonk_gym.process import free_port
from metabonk_gym.think.directive import parse_directive
from metabonk_gym.think.engines import OpenAIEngine, ThinkRequest, png_bytes
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.llama_server import find_llama_server
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.serve import ServerProcess
from metabonk_gym.think.testing import TinyVisionConfig, write_tiny_llama, write_tiny_mmproj
from metabonk_gym.vector import make_vec

pytestmark = [pytest.mark.llm("llama-server"), pytest.mark.net]

SPEC = adapter_for_name("BonkQuest").spec
SYSTEM = "You are the strategist of a tile game. " * 40  # ~1.6k byte tokens, a cacheable prefix


@pytest.fixture(scope="module")
def binary() -> Path:
    found = find_llama_server()
    if found is None:
        pytest.skip("no llama-server binary: run `scripts/setup.sh think` to build it")
    return found


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gguf")
    return write_tiny_llama(folder / "tiny.gguf"), write_tiny_mmproj(folder / "mmproj.gguf")


@pytest.fixture(scope="module")
def server(binary: Path, tiny: tuple[Path, Path]) -> Iterator[ServerProcess]:
    """One text server with 4 slots of 8192 tokens (a BonkQuest prompt is about 6k) for the module."""
    process = ServerProcess(tiny[0], engine="llama-server", parallel=4, n_ctx=8192)
    process.start()
    yield process
    process.stop()


def schema_valid(text: str) -> None:
    directive = parse_directive(text, SPEC)
    jsonschema.validate(json.loads(text), SPEC.schema())
    assert directive.action in SPEC.actions


def test_directives_follow_the_schema_and_the_system_prompt_is_cached(
    server: ServerProcess,
) -> None:
    engine = OpenAIEngine(server.base_url)
    try:
        answers = [
            engine.complete(
                ThinkRequest(SYSTEM, f"state {i}", SPEC.schema(), max_tokens=200),
                time.monotonic() + 60,
            )
            for i in range(3)
        ]
    finally:
        engine.close()
    for answer in answers:
        schema_valid(answer.text)
        assert answer.prompt_tokens and answer.completion_tokens
    # the slot kept the constant prefix: later calls evaluate only the per-call text
    last = answers[-1]
    assert last.cached_tokens is not None and last.cached_tokens >= len(SYSTEM) * 0.9


def test_two_requests_overlap_in_time_on_the_server(server: ServerProcess) -> None:
    """Two clients' requests are decoded together: `/slots` shows two slots busy at once."""
    payload = {
        "messages": [{"role": "user", "content": "count"}],
        "max_tokens": 600,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    answers: list[dict] = []

    def ask() -> None:
        reply = httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=120)
        answers.append(reply.json())

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    most_busy = 0
    with httpx.Client() as client:
        while any(t.is_alive() for t in threads):
            slots = client.get(f"{server.root_url}/slots", timeout=10).json()
            most_busy = max(most_busy, sum(bool(s.get("is_processing")) for s in slots))
            time.sleep(0.005)
    for thread in threads:
        thread.join()
    assert len(answers) == 2 and all(a["usage"]["completion_tokens"] == 600 for a in answers)
    assert most_busy == 2


def test_the_image_reaches_the_model_through_the_mmproj(
    binary: Path, tiny: tuple[Path, Path]
) -> None:
    image_tokens = (TinyVisionConfig().image_size // TinyVisionConfig().patch_size) ** 2
    frames = [np.random.default_rng(s).integers(0, 256, (160, 240, 3), np.uint8) for s in (0, 1)]
    with ServerProcess(*tiny, engine="llama-server", parallel=2, n_ctx=4096) as url:
        vision, blind = OpenAIEngine(url, vision=True), OpenAIEngine(url)
        try:
            request = ThinkRequest(SYSTEM, "Where now?", SPEC.schema(), png_bytes(frames[0]), 200)
            seen = vision.complete(request, time.monotonic() + 60)
            unseen = blind.complete(request, time.monotonic() + 60)
            schema_valid(seen.text)
            assert seen.prompt_tokens is not None and unseen.prompt_tokens is not None
            assert seen.prompt_tokens - unseen.prompt_tokens >= image_tokens

            def first_logprobs(frame: np.ndarray) -> list[float]:
                req = ThinkRequest(SYSTEM, "Where now?", {}, png_bytes(frame))
                payload = {**vision._payload(req), "max_tokens": 1, "logprobs": True}
                payload.update(top_logprobs=5, cache_prompt=False)
                payload.pop("response_format", None)
                answer = httpx.post(f"{url}/chat/completions", json=payload, timeout=60).json()
                top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
                return [t["logprob"] for t in top]

            first = first_logprobs(frames[0])
            assert first_logprobs(frames[1]) != first
            assert first_logprobs(frames[0]) == pytest.approx(first, abs=1e-4)
        finally:
            vision.close()
            blind.close()


def test_a_server_killed_mid_request_gives_the_env_a_fallback_in_time(
    binary: Path, tiny: tuple[Path, Path], make_env
) -> None:
    timeout_s = 8.0
    # the slot holds at most the model's training context (8192 for the tiny model), whatever
    # n_ctx says: a longer prompt is refused at once (HTTP 400), never processed
    process = ServerProcess(tiny[0], engine="llama-server", parallel=1, n_ctx=8192)
    url = process.start()
    assert process.child is not None
    pid = process.child.pid
    killed: list[float] = []

    def kill_when_busy() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                slots = httpx.get(f"{process.root_url}/slots", timeout=1).json()
            except httpx.HTTPError:
                continue
            if any(s.get("is_processing") for s in slots):
                os.kill(pid, signal.SIGKILL)
                killed.append(time.monotonic())
                return
            time.sleep(0.002)

    # a long game card (~6k tokens in all) keeps the server busy with the prompt for a while
    env = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"),
        engine="openai",
        base_url=url,
        timeout_s=timeout_s,
        game_card="Rules. " * 400,
    )
    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    try:
        started = time.monotonic()
        _, info = env.reset(seed=0)
        elapsed = time.monotonic() - started
    finally:
        killer.join()
        process.stop()
        env.close()
    assert killed, "the server never started on the request"
    assert not process_alive(pid)
    assert info["think"]["fallbacks"] == 1 and info["directive"]["source"] == "fallback"
    assert "engine" in info["think"]["fallback_reasons"], info["think"]
    assert "closed the connection" in info["think"]["last_error"], info["think"]
    assert elapsed < timeout_s


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(p) for p in task.read_text().split()]
    return found


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_server_outlives_its_serve_vlm_parent(
    binary: Path, tiny: tuple[Path, Path], how: signal.Signals
) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "metabonk_gym.cli.main", "serve-vlm", str(tiny[0])]
    cmd += ["--engine", "llama-server", "--port", str(port), "--parallel", "2", "--n-ctx", "2048"]
    parent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert parent.poll() is None, "metabonk serve-vlm exited early"
            assert time.monotonic() < deadline, "the server did not answer within 60 s"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        servers = [p for p in children_of(parent.pid) if process_alive(p)]
        assert len(servers) == 1
        parent.send_signal(how)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 15
        while process_alive(servers[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(servers[0]), f"llama-server outlived {how.name} of its parent"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def server_metrics(root_url: str) -> dict[str, float]:
    """llama-server's `/metrics` (Prometheus text) by name, without the `llamacpp:` prefix."""
    text = httpx.get(f"{root_url}/metrics", timeout=10).text
    pairs = (line.split()[:2] for line in text.splitlines() if line and not line.startswith("#"))
    return {name.split(":", 1)[-1]: float(value) for name, value in pairs}


def test_envs_in_make_vec_workers_share_one_batching_server(
    binary: Path, tiny: tuple[Path, Path]
) -> None:
    """4 BonkQuest envs, one process each, think in async mode against one llama-server: they
    step on while their directives are computed, the server decodes for several at once, `info`
    says what is pending, and closing with requests in flight leaves no worker behind."""
    n_envs, timeout_s = 4, 20.0
    think = functools.partial(
        PauseToThink,
        engine="openai",
        mode="async",
        timeout_s=timeout_s,
        think_every=8,
        max_tokens=200,
        game_card="Find the key of each room (k), open the door (D), avoid the enemies (E).",
        directive_in_obs=False,
    )
    # One server thread: the 4 env processes share the 2 cores with it, and llama.cpp's
    # spin-waiting threads would wait for a descheduled sibling at every layer.
    server = ServerProcess(
        tiny[0], engine="llama-server", parallel=n_envs, n_ctx=8192, n_threads=1, n_threads_batch=1
    )
    with server as url:
        envs = make_vec(
            "MetaBonk/BonkQuest-v0",
            n_envs,
            envs_per_worker=1,
            wrappers=[functools.partial(think, base_url=url)],
        )
        try:
            _, info = envs.reset(seed=0)
            # every env asked at once and none waited: the safe directive runs meanwhile
            assert info["think"]["pending"].all() and set(info["think"]["mode"]) == {"async"}
            assert set(info["directive"]["source"]) == {"fallback"}
            assert set(info["directive"]["reason"]) == {"waiting for the first answer"}
            rng = np.random.default_rng(0)
            n_actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]
            steps_pending, answered = 0, np.zeros(n_envs, int)
            deadline = time.monotonic() + 40
            while (answered < 2).any():
                assert time.monotonic() < deadline, f"no 2 answers per env in 40 s: {info['think']}"
                _, _, _, _, info = envs.step(rng.integers(n_actions, size=n_envs))
                steps_pending += int(info["think"]["pending"].sum())
                answered = info["think"]["calls"] - info["think"]["fallbacks"]
                time.sleep(0.01)  # a game's pace (~100 steps/s), not a busy loop against the server
            # each answer came after the env had stepped on: its delay is counted in frames
            assert (info["think"]["latency_frames_p50"] > 0).all(), info["think"]
            # several steps per answer (36 pending steps for 8 answers on an idle machine, where
            # the tiny model answers in a few steps; more under load)
            assert steps_pending >= 2 * answered.sum(), (steps_pending, answered)
            assert "model" in set(info["directive"]["source"])
            # the server decoded for several envs in the same batches: 1.0 means one slot a
            # decode (no batching); how far above it depends on when the 4 requests land (1.47
            # in one fresh-clone CI run), so the bar is batching, not a rate
            assert server_metrics(server.root_url)["n_busy_slots_per_decode"] > 1.2
            while not info["think"]["pending"].all():  # close with every request in flight
                assert time.monotonic() < deadline, info["think"]
                _, _, _, _, info = envs.step(rng.integers(n_actions, size=n_envs))
        finally:
            started = time.monotonic()
            envs.close()
            closed_in = time.monotonic() - started
    assert closed_in < 5.0, f"close took {closed_in:.1f} s"
    assert envs.engine.exitcodes() == [0] * n_envs  # exited on their own


def test_metabonk_eval_think_in_two_processes_against_one_server(
    server: ServerProcess, tmp_path: Path
) -> None:
    """`metabonk eval ENV think --n-envs 2 --server URL`: two games in two processes think with
    one llama-server (through the CLI), and every episode is reported."""
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    before = server_metrics(server.root_url).get("prompt_tokens_total", 0.0)
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        [
            "eval", "MetaBonk/BonkQuest-v0", "think", "--n-envs", "2", "--server", server.base_url,
            "--episodes", "2", "--max-steps", "6", "--agent-opt", "timeout_s=60",
            "--out", str(report),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["n_episodes"] == 2 and [e["length"] for e in data["episodes"]] == [6, 6]
    # the strategists' prompts reached the shared server
    assert server_metrics(server.root_url)["prompt_tokens_total"] > before
