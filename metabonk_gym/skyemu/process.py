"""Start a SkyEmu of our own: `SkyEmu http_server PORT ROM` on a free port, with its own ROM copy.

SkyEmu writes save files and slots next to the ROM, so each instance gets a temp dir holding a
copy of the ROM; the process and the dir go away on `stop()`, when the owner is garbage
collected, and at interpreter exit (a `weakref.finalize`, which runs atexit too).

>>> free_port() > 0
True
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from pathlib import Path

from metabonk_gym.skyemu.client import SkyEmuClient
from metabonk_gym.skyemu.errors import SkyEmuError, SkyEmuUnreachableError

START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes], folder: str) -> None:
    """End the process (terminate, then kill) and remove its folder."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    shutil.rmtree(folder, ignore_errors=True)


class SkyEmuProcess:
    """A headless SkyEmu serving one ROM copy on its own port (see the module docstring)."""

    def __init__(
        self, binary: str | Path, rom_path: str | Path, start_timeout: float = START_TIMEOUT_S
    ) -> None:
        exe = shutil.which(str(binary)) or str(binary)
        if not Path(exe).is_file() or not os.access(exe, os.X_OK):
            raise SkyEmuError(
                f"skyemu_binary={str(binary)!r} is not an executable file; pass the path of the SkyEmu "
                "program (from https://github.com/skylersaleh/SkyEmu/releases or your build)"
            )
        self.folder = Path(tempfile.mkdtemp(prefix="metabonk-skyemu-"))
        self.rom = self.folder / Path(rom_path).name
        shutil.copyfile(rom_path, self.rom)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [exe, "http_server", str(self.port), str(self.rom)]
        self.proc = subprocess.Popen(
            self.command,
            cwd=self.folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        # SkyEmu prints a line per request: keep only the tail, in memory, for error messages.
        self._output: deque[bytes] = deque(maxlen=64)
        self._drainer = threading.Thread(target=self._drain, name="skyemu-output", daemon=True)
        self._drainer.start()
        self._finalizer = weakref.finalize(self, _stop, self.proc, str(self.folder))
        try:
            self._wait_until_up(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _drain(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(stream.fileno(), 4096):
                self._output.append(chunk)
        with contextlib.suppress(OSError):
            stream.close()

    def _wait_until_up(self, timeout: float) -> None:
        """Wait for `/ping`; SkyEmu may listen on IPv4 or IPv6 loopback ("localhost")."""
        candidates = [f"http://127.0.0.1:{self.port}", f"http://[::1]:{self.port}"]
        deadline = time.monotonic() + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                self._drainer.join(timeout=2)  # all it printed
                raise SkyEmuUnreachableError(
                    f"SkyEmu ({' '.join(self.command)}) exited with code {code} before its HTTP "
                    f"server came up; its output: {self.log_tail()!r}"
                )
            for url in candidates:
                client = SkyEmuClient(url, timeout=5.0)
                try:
                    client.ping()
                    self.url = url
                    return
                except SkyEmuUnreachableError:
                    pass
                finally:
                    client.close()
            if time.monotonic() > deadline:
                raise SkyEmuUnreachableError(
                    f"SkyEmu ({' '.join(self.command)}) did not answer /ping on port {self.port} "
                    f"within {timeout:.0f} s; its output: {self.log_tail()!r}"
                )
            time.sleep(0.05)

    def log_tail(self, n: int = 2000) -> str:
        """The last `n` characters SkyEmu printed."""
        return b"".join(self._output)[-n:].decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """End SkyEmu and delete its folder (idempotent)."""
        self._finalizer()
