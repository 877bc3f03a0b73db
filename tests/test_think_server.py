"""The OpenAI-compatible engine: llama-cpp-python's real server on loopback, and failure paths
against real sockets (a server that closes the connection, one that never answers, garbage)."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import pytest

from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.think.directive import parse_directive
from metabonk_gym.think.engines import (
    MAX_RESPONSE_BYTES,
    EngineError,
    OpenAIEngine,
    ThinkRequest,
    ThinkTimeout,
    png_bytes,
)
from metabonk_gym.think.games import adapter_for, adapter_for_name
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.serve import ServerProcess, free_port, server_command
from metabonk_gym.think.strategist import ModelStrategist, deadline_result
from metabonk_gym.think.testing import TinyVisionConfig, write_tiny_llama, write_tiny_pair
from metabonk_gym.think.view import GameView

pytestmark = pytest.mark.net

SPEC = adapter_for_name("BonkQuest").spec
REQUEST = ThinkRequest("You are the strategist.", "Where now?", SPEC.schema(), max_tokens=200)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.mark.llm
def test_llama_cpp_python_server_gives_schema_valid_directives(tiny_model: Path) -> None:
    with ServerProcess(tiny_model, engine="python") as url:
        assert url.startswith("http://127.0.0.1:")
        engine = OpenAIEngine(url)
        try:
            for i in range(3):
                request = ThinkRequest(REQUEST.system, f"state {i}", SPEC.schema(), max_tokens=200)
                completion = engine.complete(request, time.monotonic() + 60)
                d = parse_directive(completion.text, SPEC)
                jsonschema.validate(
                    {k: v for k, v in d.to_dict().items() if k not in ("source", "reason")},
                    SPEC.schema(),
                )
                assert completion.prompt_tokens and completion.completion_tokens
        finally:
            engine.close()


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_pair(tmp_path_factory.mktemp("gguf-vision"))


def _frame(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (160, 240, 3), dtype=np.uint8)


@pytest.mark.slow
@pytest.mark.llm
def test_vision_through_the_openai_engine_and_llama_cpp_python_server(
    tiny_pair: tuple[Path, Path],
) -> None:
    """Frames go to llama-cpp-python's server as data URIs, reach the model (another picture
    changes its logits, token counts include the image's), and answers are schema-valid."""
    image_tokens = (TinyVisionConfig().image_size // TinyVisionConfig().patch_size) ** 2
    with ServerProcess(*tiny_pair, engine="python") as url:
        text_only, vision = OpenAIEngine(url), OpenAIEngine(url, vision=True)
        try:
            request = ThinkRequest(
                REQUEST.system, "Where now?", SPEC.schema(), png_bytes(_frame(0)), 200
            )
            part = vision._payload(request)["messages"][1]["content"][0]
            assert part["type"] == "image_url"
            uri = part["image_url"]["url"]
            assert uri.startswith("data:image/png;base64,")
            assert base64.b64decode(uri.split(",", 1)[1]) == request.image_png
            seen = vision.complete(request, time.monotonic() + 60)
            blind = text_only.complete(request, time.monotonic() + 60)
            d = parse_directive(seen.text, SPEC)
            jsonschema.validate(
                {k: v for k, v in d.to_dict().items() if k not in ("source", "reason")},
                SPEC.schema(),
            )
            assert seen.prompt_tokens is not None and blind.prompt_tokens is not None
            assert seen.prompt_tokens - blind.prompt_tokens == image_tokens

            def first_logprobs(seed: int) -> list[float]:
                req = ThinkRequest(REQUEST.system, "Where now?", {}, png_bytes(_frame(seed)))
                payload = {
                    **vision._payload(req),
                    "max_tokens": 1,
                    "logprobs": True,
                    "top_logprobs": 5,
                }
                payload.pop("response_format", None)
                answer = httpx.post(f"{url}/chat/completions", json=payload, timeout=60).json()
                top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
                return [t["logprob"] for t in top]

            first = first_logprobs(0)
            assert first_logprobs(1) != first
            assert first_logprobs(0) == pytest.approx(first, abs=1e-5)

            # a Megabonk frame from the stand-in game, through a strategist and its prompt
            with BonkLinkSim(port=0, mode="lockstep", seed=0) as sim:
                env = MegabonkEnv(port=sim.port, frame_wait=1.0, connect_timeout=10)
                obs, info = env.reset()
                view = GameView.capture(env, info, 0, obs)
                adapter = adapter_for(env)
                strategist = ModelStrategist(vision, PromptBuilder(adapter), timeout_s=60)
                result = strategist.request(view, [], "start").result()
                env.close()
            assert result.category is None, result.error
            assert result.request is not None and result.request.image_png is not None
            adapter.spec.validate(json.loads(str(result.raw)))
            again = text_only.complete(result.request, time.monotonic() + 60)
            assert result.prompt_tokens == (again.prompt_tokens or 0) + image_tokens
        finally:
            text_only.close()
            vision.close()


def test_server_command_binds_loopback_and_picks_the_vision_family(tmp_path: Path) -> None:
    model, proj = tmp_path / "llava-v1.5-7b.gguf", tmp_path / "mmproj.gguf"
    model.write_bytes(b"x")
    proj.write_bytes(b"x")
    cmd = server_command(model, proj, engine="python", port=9999, n_gpu_layers=0)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--chat_format") + 1] == "llava-1-5"
    assert cmd[cmd.index("--clip_model_path") + 1] == str(proj)
    with pytest.raises(Exception, match="model file not found"):
        server_command(tmp_path / "missing.gguf", engine="python")


# ---------------------------------------------------------------------- failure paths
class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 64  # many clients connect at once
    daemon_threads = True


@contextmanager
def _http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _reply(
    content: str, status: int = 200, raw: bytes | None = None
) -> type[BaseHTTPRequestHandler]:
    class Handler(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = (
                raw
                if raw is not None
                else json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 3},
                    }
                ).encode()
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def _raw_server(answer: Callable[[socket.socket, threading.Event], None] | None) -> Iterator[str]:
    """A loopback TCP server: each connection's request is read, then `answer(conn, stop)` runs
    and the connection closes; `answer=None` accepts and never reads or answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.recv(65536)
            assert answer is not None
            answer(conn, stop)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    if answer is not None:
        thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        if answer is not None:
            thread.join()
        listener.close()


@pytest.fixture
def closing_server() -> Iterator[str]:
    """Accepts, reads the request, closes the connection without answering."""
    with _raw_server(lambda conn, stop: None) as url:
        yield url


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers."""
    with _raw_server(None) as url:
        yield url


def test_a_server_that_closes_the_connection_is_an_engine_error(closing_server: str) -> None:
    engine = OpenAIEngine(closing_server)
    with pytest.raises(EngineError, match="closed the connection without a full answer"):
        engine.complete(REQUEST, time.monotonic() + 5)
    engine.close()


def test_a_server_that_never_answers_times_out_on_time(silent_server: str) -> None:
    engine = OpenAIEngine(silent_server)
    started = time.monotonic()
    with pytest.raises(ThinkTimeout):
        engine.complete(REQUEST, started + 0.3)
    assert time.monotonic() - started < 1.0
    engine.close()


def test_http_errors_and_malformed_bodies_are_engine_errors() -> None:
    for handler, message in (
        (_reply("", status=500, raw=b'{"error": "boom"}'), "answered HTTP 500"),
        (_reply("", raw=b"<html>not json</html>"), "not a chat completion"),
        (_reply("", raw=b'{"choices": []}'), "not a chat completion"),
        (_reply("", raw=b"x" * (MAX_RESPONSE_BYTES + 10)), "more than"),
    ):
        with _http_server(handler) as url:
            engine = OpenAIEngine(url)
            with pytest.raises(EngineError, match=message):
                engine.complete(REQUEST, time.monotonic() + 5)
            engine.close()
    engine = OpenAIEngine(f"http://127.0.0.1:{free_port()}")  # nobody listens
    with pytest.raises(EngineError, match="failed"):
        engine.complete(REQUEST, time.monotonic() + 5)
    engine.close()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"goal": "g", "reasoning": "", "action": "wait", "target": null, '
         '"duration_frames": ' + "7" * 5000 + ', "confidence": 1}', "unreadable number"),
        ('{"goal": "g", "reasoning": ' + "[" * 100_000, "nested too deeply"),
    ],
)  # fmt: skip
def test_answers_that_break_the_json_reader_are_invalid_fallbacks(
    content: str, message: str
) -> None:
    """A 5000-digit integer (ValueError in `json`) and deep nesting (RecursionError) from a real
    HTTP server: the strategist's fallback reason is `invalid`, nothing raises."""
    adapter = adapter_for_name("BonkQuest")
    view = GameView("BonkQuest", 0, np.zeros((160, 240, 3), np.uint8), {}, {"hp": 5})
    with _http_server(_reply(content)) as url:
        strategist = ModelStrategist(OpenAIEngine(url), PromptBuilder(adapter), timeout_s=10)
        try:
            result = strategist.request(view, [], "start").result()
        finally:
            strategist.close()
    assert result.category == "invalid" and message in str(result.error)
    assert result.directive.source == "fallback" and result.raw == content


def test_every_failure_becomes_a_counted_fallback_never_an_exception(
    make_env, closing_server: str, silent_server: str
) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=1)
    view = GameView.capture(env, info, 0, obs)
    adapter = adapter_for_name("BonkQuest")
    builder = PromptBuilder(adapter, "rules")
    cases = [(closing_server, "engine"), (silent_server, "timeout")]
    with _http_server(_reply("I would go left, then up! {not json")) as url:
        cases.append((url, "invalid"))
        for base_url, category in cases:
            strategist = ModelStrategist(OpenAIEngine(base_url), builder, timeout_s=0.5)
            started = time.monotonic()
            result = deadline_result(
                strategist.request(view, [], "start"), adapter.spec, started, 0.5
            )
            assert time.monotonic() - started < 1.5
            assert result.category == category, result.error
            assert result.directive == adapter.spec.fallback(f"{category}: {result.error}")
            if category == "invalid":
                assert result.raw == "I would go left, then up! {not json"
            strategist.close()


# ---------------------------------------------------------------------- engines and concurrency
def test_server_commands_of_every_engine(tmp_path: Path) -> None:
    model, proj = tmp_path / "m.gguf", tmp_path / "mmproj.gguf"
    model.write_bytes(b"x")
    proj.write_bytes(b"x")
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    cmd = server_command(
        model, proj, engine="llama-server", port=9, parallel=16, n_ctx=4096, server_binary=binary
    )
    assert cmd[0] == str(binary) and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--parallel") + 1] == "16"
    assert cmd[cmd.index("--ctx-size") + 1] == str(16 * 4096)  # split between the slots
    assert cmd[cmd.index("--mmproj") + 1] == str(proj)
    vllm = server_command("Qwen/Qwen2.5-VL-3B-Instruct", engine="vllm", port=9, parallel=16)
    assert vllm[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert vllm[vllm.index("--max-num-seqs") + 1] == "16"
    assert vllm[vllm.index("--host") + 1] == "127.0.0.1"
    sglang = server_command("/models/qwen", engine="sglang", port=9, parallel=8, n_ctx=4096)
    assert sglang[1:3] == ["-m", "sglang.launch_server"]
    assert sglang[sglang.index("--model-path") + 1] == "/models/qwen"
    assert sglang[sglang.index("--max-running-requests") + 1] == "8"
    assert sglang[sglang.index("--context-length") + 1] == "4096"
    assert sglang[sglang.index("--host") + 1] == "127.0.0.1"
    with pytest.raises(Exception, match="drop --mmproj"):
        server_command("/models/qwen", proj, engine="vllm")
    with pytest.raises(Exception, match="engine must be one of"):
        server_command(model, engine="ollama")
    with pytest.raises(Exception, match="not an executable file"):
        server_command(model, engine="llama-server", server_binary=tmp_path / "nope")


def test_the_llama_server_binary_is_found_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metabonk_gym.think import llama_server

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(llama_server.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert llama_server.find_llama_server() is None
    with pytest.raises(llama_server.LlamaServerNotFound, match="scripts/setup.sh think"):
        llama_server.require_llama_server()
    cached = llama_server.cached_binary()
    assert cached.parent.name == f"llama-server-{llama_server.llama_cpp_python_version()}"
    cached.parent.mkdir(parents=True)
    cached.write_text("#!/bin/sh\n")
    cached.chmod(0o755)
    assert llama_server.find_llama_server() == cached
    own = tmp_path / "own-llama-server"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.setenv(llama_server.ENV_VAR, str(own))
    assert llama_server.find_llama_server() == own
    assert llama_server.find_llama_server(cached) == cached  # --server-binary wins
    monkeypatch.setenv(llama_server.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(llama_server.LlamaServerNotFound, match="METABONK_LLAMA_SERVER"):
        llama_server.find_llama_server()


def _slow_handler(delay_s: float, counter: dict[str, int]) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                counter["now"] += 1
                counter["most"] = max(counter["most"], counter["now"])
            time.sleep(delay_s)
            with lock:
                counter["now"] -= 1
            body = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": "{}"}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def test_one_engine_sends_many_threads_requests_at_once() -> None:
    """No lock in the client: 8 threads through one engine are 8 requests in flight together."""
    counter = {"now": 0, "most": 0}
    with _http_server(_slow_handler(0.5, counter)) as url:
        engine = OpenAIEngine(url)
        try:
            started = time.monotonic()
            threads = [
                threading.Thread(target=engine.complete, args=(REQUEST, started + 10))
                for _ in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
        finally:
            engine.close()
    assert counter["most"] == 8
    assert elapsed < 8 * 0.5 / 2


def _trickle(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.is_set():
        try:
            conn.sendall(b"X")
        except OSError:
            break
        time.sleep(0.1)


@pytest.fixture
def trickling_server() -> Iterator[str]:
    """Answers with a status line and then one header byte every 0.1 s, forever."""
    with _raw_server(_trickle) as url:
        yield url


def test_the_deadline_bounds_the_whole_request_even_slow_headers(trickling_server: str) -> None:
    engine = OpenAIEngine(trickling_server)
    started = time.monotonic()
    with pytest.raises(ThinkTimeout):
        engine.complete(REQUEST, started + 0.5)
    assert time.monotonic() - started < 1.0
    engine.close()


def test_close_never_waits_for_a_request_in_flight(silent_server: str) -> None:
    engine = OpenAIEngine(silent_server)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            engine.complete(REQUEST, time.monotonic() + 30)
        except EngineError as exc:
            errors.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    time.sleep(0.3)  # the request is in flight
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < 10  # far from the request's 30 s deadline
    thread.join(timeout=20)
    assert not thread.is_alive() and "closed" in str(errors[0])
    with pytest.raises(EngineError, match="closed"):
        engine.complete(REQUEST, time.monotonic() + 1)


def _holding_handler(events: list[tuple[str, float]]) -> type[BaseHTTPRequestHandler]:
    """Records each request's arrival, never answers, records when the client hangs up."""

    class Handler(_Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            events.append(("request", time.monotonic()))
            self.connection.settimeout(60)
            try:
                gone = self.rfile.read(1) == b""  # blocks until the client sends or closes
            except OSError:
                gone = True
            if gone:
                events.append(("hangup", time.monotonic()))
            self.close_connection = True

    return Handler


def test_a_reset_cancels_the_async_request_in_flight_and_frees_the_worker() -> None:
    """Async mode, a model that never answers (deadline 30 s): the episode's request, dropped
    by the next reset, is cancelled on the server at once, and the new episode's request reaches
    the server within a fraction of a second instead of queueing until the old deadline."""
    from metabonk_gym.think.director import Director

    adapter = adapter_for_name("BonkQuest")
    events: list[tuple[str, float]] = []

    def view(step: int) -> GameView:
        return GameView("BonkQuest", step, np.zeros((160, 240, 3), np.uint8), {}, {"hp": 5})

    def wait_for(kind: str, count: int, within_s: float) -> float:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            seen = [t for k, t in events if k == kind]
            if len(seen) >= count:
                return seen[count - 1]
            time.sleep(0.01)
        raise AssertionError(f"no {kind} #{count} within {within_s} s: {events}")

    with _http_server(_holding_handler(events)) as url:
        strategist = ModelStrategist(OpenAIEngine(url), PromptBuilder(adapter), timeout_s=30)
        director = Director(strategist, adapter, mode="async", timeout_s=30)
        try:
            director.reset(view(0))
            wait_for("request", 1, 5.0)
            director.update(view(1), 0.0)
            assert director.info()["pending"] and director.info()["dropped"] == 0
            reset_at = time.monotonic()
            director.reset(view(0))  # a short episode: its request is still unanswered
            hangup = wait_for("hangup", 1, 5.0)
            second = wait_for("request", 2, 5.0)
            assert hangup - reset_at < 1.0 and second - reset_at < 1.0, (reset_at, events)
            info = director.info()
            assert info["dropped"] == 1 and info["pending"] and info["calls"] == 0
            director.reset(view(0))
            assert director.info()["dropped"] == 2
            assert wait_for("request", 3, 5.0) - reset_at < 2.0
        finally:
            director.close()
    assert director.stats.dropped == 3  # closing drops the last one too
