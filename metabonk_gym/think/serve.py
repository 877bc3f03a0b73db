"""llama-cpp-python's OpenAI-compatible server for a GGUF, on loopback (`metabonk serve-vlm`).

What: `server_command(...)` is the command line (`python -m llama_cpp.server` bound to
127.0.0.1, the vision projector and the family's `--chat_format` when an mmproj is given, every
layer on the GPU when the build offloads); `ServerProcess` starts it as a subprocess on a free
port, waits until `/v1/models` answers and stops it (tests, benchmarks, scripts).
Why: 8-16 env instances can share one model behind `PauseToThink(backend="openai",
base_url=...)`; the server batches their requests and reuses the constant system prompt.

>>> cmd = server_command("m.gguf", port=8011, check=False)
>>> cmd[1:4], cmd[cmd.index("--host") + 1]
(['-m', 'llama_cpp.server', '--model'], '127.0.0.1')
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from metabonk_gym.errors import MetabonkError
from metabonk_gym.think.families import resolve_family

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def server_command(
    model_path: str | Path,
    mmproj_path: str | Path | None = None,
    port: int = 8000,
    chat_format: str = "auto",
    n_ctx: int = 8192,
    n_gpu_layers: int | None = None,
    check: bool = True,
) -> list[str]:
    """The argv that serves `model_path` on 127.0.0.1:`port` (`check` verifies the files)."""
    model_path = Path(model_path).expanduser()
    if check and not model_path.is_file():
        raise MetabonkError(f"model file not found: {model_path} (pass the path of a .gguf file)")
    if check and mmproj_path is not None and not Path(mmproj_path).expanduser().is_file():
        raise MetabonkError(
            f"mmproj file not found: {mmproj_path} (the model's vision projector .gguf)"
        )
    if n_gpu_layers is None:
        n_gpu_layers = _default_gpu_layers()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--host",
        LOOPBACK,
        "--port",
        str(int(port)),
        "--n_ctx",
        str(int(n_ctx)),
        "--n_gpu_layers",
        str(int(n_gpu_layers)),
    ]
    if mmproj_path is not None:
        family = resolve_family(model_path, mmproj_path, chat_format)
        cmd += [
            "--clip_model_path",
            str(Path(mmproj_path).expanduser()),
            "--chat_format",
            family.server_chat_format,
        ]
    elif chat_format != "auto":
        cmd += ["--chat_format", chat_format]
    return cmd


def _default_gpu_layers() -> int:
    try:
        import llama_cpp

        return -1 if llama_cpp.llama_supports_gpu_offload() else 0
    except ImportError:
        return 0


class ServerProcess:
    """Run `server_command(...)` as a child process; `with ServerProcess(...) as url:` gives the
    base URL (`http://127.0.0.1:PORT/v1`) once the server answers, and stops it afterwards."""

    def __init__(
        self,
        model_path: str | Path,
        mmproj_path: str | Path | None = None,
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        log: IO[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.port = port or free_port()
        self.cmd = server_command(model_path, mmproj_path, port=self.port, **kwargs)
        self.startup_timeout_s = startup_timeout_s
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    def start(self) -> str:
        """Start and wait until `/v1/models` answers; raise with the server's output if it dies."""
        import httpx

        sink = self.log if self.log is not None else subprocess.DEVNULL
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(self.cmd, stdout=sink, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise MetabonkError(
                    f"the llama-cpp-python server exited with code {self.proc.returncode}: {' '.join(self.cmd)}"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return self.base_url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise MetabonkError(
            f"the llama-cpp-python server did not answer within {self.startup_timeout_s} s"
        )

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
