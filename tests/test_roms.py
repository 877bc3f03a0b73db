"""The bundled ROMs: reproducible from source, padded past mGBA's multiboot guess, hashes match."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from metabonk_gym.gamedata import BUNDLED_GAMES, bundled_game_folder
from metabonk_gym.gba.integration import Integration

ROOT = Path(__file__).resolve().parent.parent
#: The bundled games built from gba/ (Megabonk's folder has no ROM).
GBA_GAMES = [game for game in BUNDLED_GAMES if (bundled_game_folder(game) / "rom.gba").is_file()]
#: The games built here from gba/ (the public games ship their authors' ROMs unmodified).
BUILT_GAMES = [game for game in GBA_GAMES if (ROOT / "gba" / game.lower()).is_dir()]


def test_our_games_are_built_here_and_the_public_ones_are_not() -> None:
    assert set(BUILT_GAMES) == {"BonkQuest", "BonkArena"}
    assert set(GBA_GAMES) - set(BUILT_GAMES) == {"HatWizard", "MeteoRain", "uCity"}


@pytest.mark.parametrize("game", GBA_GAMES)
def test_rom_sha_matches_integration(game: str) -> None:
    integration = Integration.bundled(game)
    expected = (integration.folder / "rom.sha").read_text().split()[0]
    assert hashlib.sha1(integration.rom_path.read_bytes()).hexdigest() == expected


@pytest.mark.parametrize("game", BUILT_GAMES)
def test_rom_is_padded_past_the_multiboot_guess(game: str) -> None:
    rom = Integration.bundled(game).rom_path.read_bytes()
    assert len(rom) == 512 * 1024
    assert rom[0xB2] == 0x96  # fixed header byte
    check = 0
    for b in rom[0xA0:0xBD]:
        check = (check - b) & 0xFF
    assert rom[0xBD] == (check - 0x19) & 0xFF  # header complement


@pytest.mark.toolchain
def test_rebuild_is_byte_identical(tmp_path: Path) -> None:
    build = tmp_path / "gba"
    shutil.copytree(ROOT / "gba", build, ignore=shutil.ignore_patterns("build"))
    subprocess.run(["make", "-C", str(build), "all"], check=True, capture_output=True)
    assert BUILT_GAMES
    for game in BUILT_GAMES:
        rebuilt = (build / "build" / f"{game.lower()}.gba").read_bytes()
        shipped = Integration.bundled(game).rom_path.read_bytes()
        assert rebuilt == shipped, (
            f"{game}: rebuilding from gba/{game.lower()} gives different bytes"
        )
