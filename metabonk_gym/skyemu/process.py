"""Start a SkyEmu of our own: `SkyEmu http_server PORT ROM` on a free port, with its own ROM copy.

SkyEmu writes save files and slots next to the ROM, so each instance gets a temp dir holding a
copy of the ROM. The program runs as a `metabonk_gym.process.ChildProcess` (it dies with this
process, even on SIGKILL); it and the dir go away on `stop()`, when the owner is garbage
collected, and at interpreter exit (a `weakref.finalize`, which runs atexit too).

>>> SkyEmuProcess("/no/such/SkyEmu", "rom.gba")
Traceback (most recent call last):
...
metabonk_gym.skyemu.errors.SkyEmuError: skyemu_binary='/no/such/SkyEmu' is not an executable file; ...
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path

from metabonk_gym.process import ChildProcess, ChildProcessFailed, free_port
from metabonk_gym.skyemu.client import SkyEmuClient
from metabonk_gym.skyemu.errors import SkyEmuError, SkyEmuUnreachableError

__all__ = ["START_TIMEOUT_S", "SkyEmuProcess"]

START_TIMEOUT_S = 30.0


def _stop(child: ChildProcess, folder: str) -> None:
    """End the process (terminate, then kill) and remove its folder."""
    child.stop()
    shutil.rmtree(folder, ignore_errors=True)


class SkyEmuProcess:
    """A headless SkyEmu serving one ROM copy on its own port (see the module docstring)."""

    def __init__(
        self, binary: str | Path, rom_path: str | Path, start_timeout: float = START_TIMEOUT_S
    ) -> None:
        """Copy the ROM to a temp dir, start SkyEmu on it and wait until it answers `/ping`.

        Args:
            binary: the SkyEmu program (a path, or a name on PATH).
            rom_path: the ROM to serve (copied; SkyEmu writes saves next to it).
            start_timeout: seconds to wait for its HTTP server.
        """
        exe = shutil.which(str(binary)) or str(binary)
        if not Path(exe).is_file() or not os.access(exe, os.X_OK):
            raise SkyEmuError(
                f"skyemu_binary={str(binary)!r} is not an executable file; pass the path of the SkyEmu "
                "program (from https://github.com/skylersaleh/SkyEmu/releases or your build)"
            )
        self.folder = Path(tempfile.mkdtemp(prefix="metabonk-skyemu-"))
        self.rom = self.folder / Path(rom_path).name
        try:
            shutil.copyfile(rom_path, self.rom)
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [exe, "http_server", str(self.port), str(self.rom)]
        try:
            # The log lives in the folder, so it outlasts the process for error messages.
            self.proc = ChildProcess.start(
                self.command, name="SkyEmu", cwd=self.folder, log_path=self.folder / "skyemu.log"
            )
        except ChildProcessFailed as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise SkyEmuError(f"cannot start SkyEmu: {exc}") from exc
        self._finalizer = weakref.finalize(self, _stop, self.proc, str(self.folder))
        try:
            self._wait_until_up(start_timeout)
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        """Whether `/ping` answers; SkyEmu may listen on IPv4 or IPv6 loopback ("localhost")."""
        for url in (f"http://127.0.0.1:{self.port}", f"http://[::1]:{self.port}"):
            client = SkyEmuClient(url, timeout=5.0)
            try:
                client.ping()
                self.url = url
                return True
            except SkyEmuUnreachableError:
                pass
            finally:
                client.close()
        return False

    def _wait_until_up(self, timeout: float) -> None:
        started = time.monotonic()
        try:
            self.proc.wait_ready(self._answers, timeout_s=timeout)
        except ChildProcessFailed as exc:
            if time.monotonic() - started < timeout and self.proc.returncode is not None:
                what = f"exited with code {self.proc.returncode} before its HTTP server came up"
            else:
                what = f"did not answer /ping on port {self.port} within {timeout:.0f} s"
            raise SkyEmuUnreachableError(
                f"SkyEmu ({' '.join(self.command)}) {what}; its output: {self.log_tail()!r}"
            ) from exc

    def log_tail(self, n: int = 2000) -> str:
        """The last `n` characters SkyEmu printed."""
        return self.proc.log_tail(n)

    def alive(self) -> bool:
        return self.proc.alive

    def stop(self) -> None:
        """End SkyEmu and delete its folder (idempotent)."""
        self._finalizer()
