"""Savestate files from anywhere: checksummed when ours, tried in a throwaway process when not, never
inflated past the core's state size, and showing their own screen once loaded (issue 12)."""

from __future__ import annotations

import gzip
import random
import resource
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.errors import CorruptSavestateError, MissingFolderError, UnknownStateError
from metabonk_gym.gba.backends import probe
from metabonk_gym.gba.integration import Integration, savestates_dir
from metabonk_gym.gba.skyemu_peer import PeerProcess
from metabonk_gym.gba.statefile import SUBFIELD, read_state
from metabonk_gym.skyemu.client import SkyEmuClient

QUEST = "MetaBonk/BonkQuest-v0"


@pytest.fixture(autouse=True)
def _own_verdict_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Probe verdicts go to a fresh cache, so every test really probes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(probe, "_verdicts", {})


def corrupted_room1(tmp_path: Path, seed: int) -> Path:
    """The issue's recipe: bytes 1000..3000 of room1's decompressed state randomised, gzipped."""
    raw = bytearray(gzip.decompress((savestates_dir("BonkQuest") / "room1.state").read_bytes()))
    rng = random.Random(seed)
    for i in range(1000, 3000):
        raw[i] = rng.randrange(256)
    path = tmp_path / f"corrupt-{seed}.state"
    path.write_bytes(gzip.compress(bytes(raw)))
    return path


# ---------------------------------------------------------------------- checksums
def test_states_we_write_carry_a_checksum_and_stay_stable_retro_files(
    make_env, tmp_path: Path
) -> None:
    env = make_env(QUEST)
    env.reset(seed=1)
    path = tmp_path / "mine.state"
    state = env.unwrapped.save_state(path)
    raw = path.read_bytes()
    assert raw[3] & 4 and raw[12:14] == SUBFIELD, "the checksum sits in the gzip extra field"
    assert gzip.decompress(raw) == state, "any gzip reader (stable-retro's) still reads it"
    assert read_state(path, len(state)).verified
    for bundled in Integration.bundled("BonkQuest").savestate_files().values():
        assert read_state(bundled, len(state)).verified, f"{bundled} carries its checksum"
    changed = bytearray(state)
    changed[5000] ^= 0xFF
    path.write_bytes(raw[:200])
    with pytest.raises(CorruptSavestateError, match="truncated"):
        read_state(path, len(state))
    path.write_bytes(gzip.compress(bytes(changed)))
    assert not read_state(path, len(state)).verified, "no checksum: of unknown origin"


def test_a_checksummed_state_loads_without_a_probe(make_env, tmp_path: Path) -> None:
    env = make_env(QUEST)
    env.reset(seed=2)
    env.unwrapped.save_state(tmp_path / "ok.state")
    before = probe.probes_run
    env.reset(options={"state": tmp_path / "ok.state"})
    env.reset(options={"state": "room2"})
    assert probe.probes_run == before


# ---------------------------------------------------------------------- unknown origin
@pytest.mark.timeout(180)
def test_a_corrupted_state_is_refused_within_a_deadline(
    make_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 10.0)
    env = make_env(QUEST)
    env.reset(seed=0)
    bad = corrupted_room1(tmp_path, seed=0)
    before = probe.probes_run
    started = time.monotonic()
    with pytest.raises(CorruptSavestateError, match="savestate.*(refused|corrupt)"):
        env.reset(options={"state": bad})
        env.step(0)  # on main this never returned
    assert time.monotonic() - started < 60
    assert probe.probes_run == before + 1
    started = time.monotonic()
    with pytest.raises(CorruptSavestateError):
        env.reset(options={"state": bad})
    assert time.monotonic() - started < 2, "the verdict is cached per file hash"
    assert probe.probes_run == before + 1
    _, info = env.reset(seed=0)  # the env is still usable
    env.step(0)
    assert info["hp"] > 0


@pytest.mark.timeout(180)
def test_a_good_state_of_unknown_origin_is_probed_once_then_loads(make_env, tmp_path: Path) -> None:
    env = make_env(QUEST)
    env.reset(seed=0, options={"state": "room3"})
    expected = env.unwrapped.variables()
    foreign = tmp_path / "foreign.state"
    foreign.write_bytes(gzip.compress(env.unwrapped.save_state()))  # no checksum
    env.reset(seed=0)
    before = probe.probes_run
    env.reset(options={"state": foreign})
    assert env.unwrapped.variables() == expected
    env.reset(options={"state": str(foreign)})
    assert probe.probes_run == before + 1, "tried once, then the cached verdict holds"
    probe._verdicts.clear()  # a new process: the verdict is on disk
    env.reset(options={"state": foreign})
    assert probe.probes_run == before + 1


# ---------------------------------------------------------------------- decompression bombs
def gzip_bomb(path: Path, mib: int) -> Path:
    """A gzip file of `mib` MiB of zeros, written without ever holding them in memory."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    with open(path, "wb") as out:
        for _ in range(mib):
            out.write(deflate.compress(chunk))
        out.write(deflate.flush())
    return path


@pytest.mark.parametrize(
    ("mib", "message"),
    [(512, "larger than any compressed state"), (64, "inflates to more than 4\\d+ bytes")],
    ids=["issue-0.5MB-to-512MiB", "64KB-to-64MiB"],
)
def test_a_decompression_bomb_is_refused_quickly_in_bounded_memory(
    make_env, tmp_path: Path, mib: int, message: str
) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.state", mib)
    assert bomb.stat().st_size < 1 << 20
    env = make_env(QUEST)
    env.reset(seed=0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.monotonic()
    with pytest.raises(CorruptSavestateError, match=message):
        env.reset(options={"state": bomb})
    assert time.monotonic() - started < 5
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    assert grown_mib < 32, f"peak memory grew by {grown_mib:.0f} MiB"
    _, info = env.reset(seed=0)
    assert info["hp"] > 0


# ---------------------------------------------------------------------- the screen after a load
def test_reset_to_a_state_file_shows_that_states_screen(make_env, tmp_path: Path) -> None:
    env = make_env(QUEST)
    env.reset(seed=5, options={"state": "room2"})
    for action in (4, 4, 4, 1, 1, 2):
        env.step(action)
    path = tmp_path / "room2-moved.state"
    env.unwrapped.save_state(path)
    before, _ = env.reset(seed=0, options={"state": "room4"})
    loaded, _ = env.reset(options={"state": path})
    assert not np.array_equal(loaded, before), "not the screen from before the reset"
    assert np.array_equal(loaded, env.render()), "render() shows the same screen"
    env.close()
    fresh = make_env(QUEST, state=str(path))  # a fresh env starting from the file
    first, _ = fresh.reset()
    assert np.array_equal(loaded, first)
    # the screen is that of the state: a step later it moves on from it, as it did before
    obs_a = fresh.step(0)[0]
    fresh.reset()
    assert np.array_equal(fresh.step(0)[0], obs_a)


# ---------------------------------------------------------------------- paths
def test_save_state_into_a_missing_folder_is_refused(make_env, tmp_path: Path) -> None:
    env = make_env(QUEST)
    env.reset(seed=0)
    target = tmp_path / "no" / "such" / "x.state"
    with pytest.raises(MissingFolderError, match="folder .*such does not exist"):
        env.unwrapped.save_state(target)
    assert not (tmp_path / "no").exists(), "no folder was created"
    with pytest.raises(UnknownStateError, match="savestate file not found.*x.state"):
        env.reset(options={"state": str(target)})


@pytest.mark.net
def test_a_skyemu_png_state_given_as_str_is_a_file(make_env, tmp_path: Path) -> None:
    with PeerProcess(Integration.bundled("BonkQuest").rom_path) as peer:
        env = make_env(QUEST, backend="skyemu", skyemu_url=peer.url)
        env.reset(seed=2)
        env.step(4)
        image = tmp_path / "gui-slot.png"
        SkyEmuClient(peer.url).save(str(image))
        env.reset(options={"state": image})
        from_path = env.unwrapped.variables()
        env.reset(seed=3)
        env.reset(options={"state": str(image)})
        assert env.unwrapped.variables() == from_path
        with pytest.raises(UnknownStateError, match="savestate file not found.*other.png") as info:
            env.reset(options={"state": str(tmp_path / "other.png")})
        assert "Make a new one" not in str(info.value)
