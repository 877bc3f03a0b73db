"""The bundled ROMs: reproducible from source, padded past mGBA's multiboot guess, hashes match."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from metabonk_gym.gba.integration import BUNDLED_GAMES, Integration

ROOT = Path(__file__).resolve().parent.parent
TOOLCHAIN = shutil.which("arm-none-eabi-gcc") is not None


@pytest.mark.parametrize("game", BUNDLED_GAMES)
def test_rom_sha_matches_integration(game: str) -> None:
    integration = Integration.bundled(game)
    expected = (integration.folder / "rom.sha").read_text().split()[0]
    assert hashlib.sha1(integration.rom_path.read_bytes()).hexdigest() == expected


@pytest.mark.parametrize("game", BUNDLED_GAMES)
def test_rom_is_padded_past_the_multiboot_guess(game: str) -> None:
    rom = Integration.bundled(game).rom_path.read_bytes()
    assert len(rom) == 512 * 1024
    assert rom[0xB2] == 0x96  # fixed header byte
    check = 0
    for b in rom[0xA0:0xBD]:
        check = (check - b) & 0xFF
    assert rom[0xBD] == (check - 0x19) & 0xFF  # header complement


def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    assert TOOLCHAIN, (
        "install the toolchain: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi"
    )
    build = tmp_path / "gba"
    shutil.copytree(ROOT / "gba", build, ignore=shutil.ignore_patterns("build"))
    subprocess.run(["make", "-C", str(build), "all"], check=True, capture_output=True)
    for game in BUNDLED_GAMES:
        rebuilt = (build / "build" / f"{game.lower()}.gba").read_bytes()
        shipped = Integration.bundled(game).rom_path.read_bytes()
        assert rebuilt == shipped, (
            f"{game}: rebuilding from gba/{game.lower()} gives different bytes"
        )
