"""One OpenAI-compatible model server on loopback for many envs (`metabonk serve-vlm`).

What: `server_command(model, engine=...)` is the command line of one of four engines, always bound
to 127.0.0.1: `"llama-server"` (llama.cpp's server, built by `scripts/setup.sh think`: continuous
batching over `parallel` slots, each slot keeping its prompt's KV cache so the constant system
prompt is evaluated once per slot, `--mmproj` for images), `"python"` (llama-cpp-python's server:
one request at a time), `"vllm"` and `"sglang"` (GPU servers, when installed; they take a Hugging
Face model folder or id, not a GGUF + mmproj pair). `ServerProcess` runs one as a child process
that dies with this one (`metabonk_gym.process.ChildProcess`), waits until `/v1/models` answers,
and stops it. `default_engine()` is `"llama-server"` where the binary exists, else `"python"`.
Why: 8-16 envs share one model behind `PauseToThink(engine="openai", base_url=...)`; only a
batching server answers them together instead of one after another.

>>> cmd = server_command("m.gguf", engine="python", port=8011, check=False)
>>> cmd[1:4], cmd[cmd.index("--host") + 1]
(['-m', 'llama_cpp.server', '--model'], '127.0.0.1')
>>> cmd = server_command("Qwen/Qwen2.5-VL-3B-Instruct", engine="vllm", port=8011, parallel=16)
>>> cmd[cmd.index("--max-num-seqs") + 1], cmd[cmd.index("--host") + 1]
('16', '127.0.0.1')
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from metabonk_gym.errors import MetabonkError
from metabonk_gym.process import ChildProcess, free_port
from metabonk_gym.think.families import resolve_family
from metabonk_gym.think.llama_server import find_llama_server, require_llama_server

LOOPBACK = "127.0.0.1"
ENGINES = ("llama-server", "python", "vllm", "sglang")
#: The `response_format` dialect each engine honours (`OpenAIEngine(response_format=...)`).
RESPONSE_FORMATS = {
    "llama-server": "json_object",
    "python": "json_object",
    "vllm": "json_schema",
    "sglang": "json_schema",
}

__all__ = [
    "ENGINES",
    "LOOPBACK",
    "ServerProcess",
    "default_engine",
    "free_port",
    "server_command",
]


def default_engine() -> str:
    """`"llama-server"` when a binary is found (see `llama_server.find_llama_server`), else
    `"python"`."""
    try:
        return "llama-server" if find_llama_server() is not None else "python"
    except MetabonkError:  # $METABONK_LLAMA_SERVER names no binary: say so when it is used
        return "llama-server"


def _check_gguf(model_path: Path, mmproj_path: Path | None) -> None:
    if not model_path.is_file():
        raise MetabonkError(f"model file not found: {model_path} (pass the path of a .gguf file)")
    if mmproj_path is not None and not mmproj_path.is_file():
        raise MetabonkError(
            f"mmproj file not found: {mmproj_path} (the model's vision projector .gguf)"
        )


def server_command(
    model_path: str | Path,
    mmproj_path: str | Path | None = None,
    *,
    engine: str = "llama-server",
    port: int = 8000,
    parallel: int = 8,
    n_ctx: int = 8192,
    n_gpu_layers: int | None = None,
    chat_format: str = "auto",
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
    server_binary: str | Path | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    check: bool = True,
) -> list[str]:
    """The argv that serves `model_path` on 127.0.0.1:`port` with `engine`.

    Args:
        model_path: a GGUF (llama-server, python) or a Hugging Face model folder or id (vllm,
            sglang).
        mmproj_path: the vision projector GGUF (llama-server, python).
        engine: one of `ENGINES`.
        port: the TCP port on 127.0.0.1.
        parallel: requests served at once (llama-server's slots, vLLM's `--max-num-seqs`,
            SGLang's `--max-running-requests`; the python engine serves one at a time).
        n_ctx: context length per request (llama-server gets `parallel * n_ctx` in all, split
            between its slots).
        n_gpu_layers: layers on the GPU (default: all when llama-cpp-python offloads, else 0).
        chat_format: the python engine's chat handler family ("auto": from the files).
        n_threads: CPU threads for decoding (llama-server, python; default: the engine's).
        n_threads_batch: CPU threads for prompt evaluation (default: the engine's).
        server_binary: the llama-server to run (default: `find_llama_server()`).
        extra_args: appended as they are.
        check: verify that the GGUF files (and the llama-server binary) exist.
    """
    if engine not in ENGINES:
        raise MetabonkError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if parallel < 1:
        raise MetabonkError(f"parallel must be >= 1, not {parallel}")
    model = Path(model_path).expanduser() if engine in ("llama-server", "python") else None
    mmproj = Path(mmproj_path).expanduser() if mmproj_path is not None else None
    if engine in ("vllm", "sglang"):
        if mmproj is not None:
            raise MetabonkError(
                f"--engine {engine} serves a Hugging Face model folder or id, which carries its "
                "own vision tower: drop --mmproj (it is for GGUF engines)"
            )
        return _gpu_server_command(str(model_path), engine, port, parallel, n_ctx, extra_args)
    assert model is not None
    if check:
        _check_gguf(model, mmproj)
    if n_gpu_layers is None:
        n_gpu_layers = _default_gpu_layers()
    if engine == "llama-server":
        binary = require_llama_server(server_binary) if check else (server_binary or "llama-server")
        cmd = [str(binary), "--model", str(model), "--host", LOOPBACK, "--port", str(int(port))]
        cmd += ["--parallel", str(int(parallel)), "--ctx-size", str(int(n_ctx) * int(parallel))]
        cmd += ["--n-gpu-layers", str(int(n_gpu_layers)), "--cont-batching", "--jinja"]
        cmd += ["--slots", "--metrics", "--no-webui"]
        if n_threads is not None:
            cmd += ["--threads", str(int(n_threads))]
        if n_threads_batch is not None:
            cmd += ["--threads-batch", str(int(n_threads_batch))]
        if n_gpu_layers == 0:  # measured here: CPU decoding 2.4x slower with flash attention
            cmd += ["--flash-attn", "off"]
        if mmproj is not None:
            cmd += ["--mmproj", str(mmproj)]
        return cmd + list(extra_args)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
    cmd += ["--host", LOOPBACK, "--port", str(int(port)), "--n_ctx", str(int(n_ctx))]
    cmd += ["--n_gpu_layers", str(int(n_gpu_layers))]
    if n_threads is not None:
        cmd += ["--n_threads", str(int(n_threads))]
    if n_threads_batch is not None:
        cmd += ["--n_threads_batch", str(int(n_threads_batch))]
    if mmproj is not None:
        family = resolve_family(model, mmproj, chat_format)
        cmd += ["--clip_model_path", str(mmproj), "--chat_format", family.server_chat_format]
    elif chat_format != "auto":
        cmd += ["--chat_format", chat_format]
    return cmd + list(extra_args)


def _gpu_server_command(
    model: str,
    engine: str,
    port: int,
    parallel: int,
    n_ctx: int,
    extra: tuple[str, ...] | list[str],
) -> list[str]:
    """vLLM's or SGLang's OpenAI-compatible server (both honour `json_schema` response formats)."""
    if engine == "vllm":
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
        cmd += ["--host", LOOPBACK, "--port", str(int(port))]
        cmd += ["--max-num-seqs", str(int(parallel)), "--max-model-len", str(int(n_ctx))]
        cmd += ["--served-model-name", "default", "--enable-prefix-caching"]
    else:
        cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model]
        cmd += ["--host", LOOPBACK, "--port", str(int(port))]
        cmd += ["--max-running-requests", str(int(parallel)), "--context-length", str(int(n_ctx))]
        cmd += ["--served-model-name", "default"]
    return cmd + list(extra)


def _default_gpu_layers() -> int:
    try:
        import llama_cpp

        return -1 if llama_cpp.llama_supports_gpu_offload() else 0
    except ImportError:
        return 0


class ServerProcess:
    """`server_command(...)` as a child process that dies with this one; `with ServerProcess(...)
    as url:` gives the base URL (`http://127.0.0.1:PORT/v1`) once `/v1/models` answers, and stops
    the server afterwards.

    Args:
        model_path: see `server_command`.
        mmproj_path: see `server_command`.
        engine: one of `ENGINES` (default: `default_engine()`).
        port: the port on 127.0.0.1 (default: a free one).
        startup_timeout_s: how long loading the model may take.
        log_path: keep the server's output there (default: a temp file, quoted in errors).
        **kwargs: more `server_command` arguments (`parallel`, `n_ctx`, `server_binary`, ...).
    """

    def __init__(
        self,
        model_path: str | Path,
        mmproj_path: str | Path | None = None,
        engine: str | None = None,
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        log_path: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        self.engine = engine or default_engine()
        self.port = port or free_port()
        self.cmd = server_command(
            model_path, mmproj_path, engine=self.engine, port=self.port, **kwargs
        )
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self.child: ChildProcess | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server without `/v1` (llama-server's `/slots`, `/health`, `/metrics`)."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def response_format(self) -> str:
        """The `response_format` dialect this engine honours (for `OpenAIEngine`)."""
        return RESPONSE_FORMATS[self.engine]

    def start(self) -> str:
        """Start the server and wait until `/v1/models` answers; raises `ChildProcessFailed`
        with the server's output when it exits or is not ready in time."""
        import httpx

        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.child = ChildProcess.start(self.cmd, name=self.engine, env=env, log_path=self.log_path)

        def ready() -> bool:
            return httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200

        self.child.wait_ready(ready, self.startup_timeout_s, interval_s=0.1)
        return self.base_url

    def stop(self) -> None:
        """SIGTERM the server (SIGKILL if it lingers); safe to call twice."""
        if self.child is not None:
            self.child.stop(timeout_s=10.0)
        self.child = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
