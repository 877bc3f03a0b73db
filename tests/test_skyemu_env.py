"""GBA envs on SkyEmu (`backend="skyemu"`): the backend against the embedded core, named starts,
exact savestates, starting SkyEmu ourselves, and clear errors.

The embedded env runs in the test process; the SkyEmu side is the test peer in a subprocess
and, when SKYEMU_BINARY names a SkyEmu program, a real headless SkyEmu started by the backend.
Against the peer (the project's own stand-in, the embedded core behind SkyEmu's HTTP protocol)
the "parity" tests below are protocol conformance: they show the backend drives SkyEmu's HTTP
API correctly, not that SkyEmu's emulation matches mGBA. Only a run with SKYEMU_BINARY shows
emulator parity.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import metabonk_gym
from metabonk_gym.errors import CorruptSavestateError, MetabonkError
from metabonk_gym.gba.backends import skyemu as backend_module
from metabonk_gym.gba.backends.skyemu import SkyEmuBackend
from metabonk_gym.gba.integration import Integration
from metabonk_gym.gba.skyemu_peer import PeerProcess
from metabonk_gym.process import ChildProcess, free_port
from metabonk_gym.skyemu.client import SkyEmuClient
from metabonk_gym.skyemu.errors import (
    SkyEmuCommandFailedError,
    SkyEmuError,
    SkyEmuRomMismatchError,
    SkyEmuStateError,
    SkyEmuUnreachableError,
)

pytestmark = pytest.mark.net

SKYEMU_BINARY = os.environ.get("SKYEMU_BINARY")
# The real-SkyEmu variant exists only when a binary is given: SkyEmu cannot be installed on CI
# machines, and a permanently skipped test would only hide that the peer carries the suite.
SERVERS = ["peer", "skyemu"] if SKYEMU_BINARY else ["peer"]
QUEST = "MetaBonk/BonkQuest-v0"
QUEST_ROM = Integration.bundled("BonkQuest").rom_path


@pytest.fixture(scope="module")
def quest_peer() -> Iterator[PeerProcess]:
    with PeerProcess(QUEST_ROM) as peer:
        yield peer


@pytest.fixture(params=SERVERS)
def sky(request: pytest.FixtureRequest) -> dict[str, Any]:
    """backend kwargs for a SkyEmu running BonkQuest: the shared peer, or a real SkyEmu per env."""
    if request.param == "peer":
        return {"backend": "skyemu", "skyemu_url": request.getfixturevalue("quest_peer").url}
    return {"backend": "skyemu", "skyemu_binary": SKYEMU_BINARY}


def rollout(env: gym.Env, seed: int, actions: list[int], **reset: Any) -> list[dict[str, int]]:
    """Every data.json variable after reset and after each step."""
    env.reset(seed=seed, **reset)
    out = [env.unwrapped.variables()]
    for action in actions:
        env.step(action)
        out.append(env.unwrapped.variables())
    return out


def by_frame(trajectory: list[dict[str, int]]) -> dict[int, dict[str, int]]:
    return {variables["frame"]: variables for variables in trajectory}


# ------------------------------------- parity (protocol conformance against the test peer)
def test_same_seed_and_actions_give_the_same_ram_trajectories(
    make_env, sky: dict[str, Any]
) -> None:
    actions = [int(a) for a in np.random.default_rng(7).integers(0, 6, 300)]
    embedded = rollout(make_env(QUEST), 11, actions)
    skyemu = rollout(make_env(QUEST, **sky), 11, actions)
    # Backends are aligned on the game's own frame counter after boot; compare keyed on it.
    a, b = by_frame(embedded), by_frame(skyemu)
    common = sorted(set(a) & set(b))
    assert len(common) >= 0.9 * len(actions)
    mismatched = [f for f in common if a[f] != b[f]]
    assert not mismatched, (
        f"first mismatch at frame {mismatched[0]}: {a[mismatched[0]]} vs {b[mismatched[0]]}"
    )
    if sky.get("skyemu_url"):  # the peer is the same core: identical step by step
        assert embedded == skyemu


def test_boot_is_aligned_on_the_game_frame_counter(
    make_env, quest_peer: PeerProcess, monkeypatch
) -> None:
    """An emulator whose frames end at another scanline sees the booted game a game frame later;
    the env sets the game's clock to the embedded core's boot value, and trajectories line up."""
    step = SkyEmuBackend.step

    def late_boundary(self: SkyEmuBackend, frames: int, buttons: int) -> None:
        step(self, frames, buttons)
        if not getattr(self, "seen_magic", False) and self.read(0x02000000, "<u4") == 0x4B4E4F42:
            self.seen_magic = True  # type: ignore[attr-defined]
            step(self, 1, buttons)  # this emulator's first boundary after boot falls a frame later

    monkeypatch.setattr(SkyEmuBackend, "step", late_boundary)
    actions = [int(a) for a in np.random.default_rng(3).integers(0, 6, 60)]
    embedded = rollout(make_env(QUEST), 5, actions, options={"state": "room2"})
    assert (
        rollout(
            make_env(QUEST, backend="skyemu", skyemu_url=quest_peer.url),
            5,
            actions,
            options={"state": "room2"},
        )
        == embedded
    )
    monkeypatch.setattr(SkyEmuBackend, "aligns_frame_counter", False)
    unaligned = rollout(
        make_env(QUEST, backend="skyemu", skyemu_url=quest_peer.url),
        5,
        actions,
        options={"state": "room2"},
    )
    assert [v["frame"] for v in unaligned] == [v["frame"] + 1 for v in embedded], (
        "the test simulates a late boot"
    )


def test_observation_action_and_info_contract_match_embedded(make_env, sky: dict[str, Any]) -> None:
    for kwargs in (
        {},
        {"obs_type": "grayscale", "downscale": 2, "action_space": "multibinary", "frameskip": 2},
    ):
        embedded = make_env(QUEST, **kwargs)
        skyemu = make_env(QUEST, **sky, **kwargs)
        assert skyemu.observation_space == embedded.observation_space
        assert skyemu.action_space == embedded.action_space
        obs_e, info_e = embedded.reset(seed=3)
        obs_s, info_s = skyemu.reset(seed=3)
        assert skyemu.observation_space.contains(obs_s)
        assert info_s == info_e
        action = embedded.action_space.sample()
        for _ in range(20):
            out_e = embedded.step(action)
            out_s = skyemu.step(action)
        assert out_s[1:] == out_e[1:]
        assert out_s[0].shape == out_e[0].shape and out_s[0].dtype == out_e[0].dtype
        if sky.get("skyemu_url"):  # same core behind HTTP: the same pixels
            assert np.array_equal(out_s[0], out_e[0])
        embedded.close()
        skyemu.close()


def test_reading_ram_matches_embedded(make_env, sky: dict[str, Any]) -> None:
    embedded, skyemu = make_env(QUEST), make_env(QUEST, **sky)
    for env in (embedded, skyemu):
        env.reset(seed=5)
        for _ in range(10):
            env.step(4)
    for name in ("room_tiles", "enemy_x"):
        assert np.array_equal(
            skyemu.unwrapped.read_array(name), embedded.unwrapped.read_array(name)
        )
    assert skyemu.unwrapped.read_memory(0x02000000, 0x200) == embedded.unwrapped.read_memory(
        0x02000000, 0x200
    )
    skyemu.unwrapped.write_variable("hp", 2)
    assert skyemu.unwrapped.read_variable("hp") == 2


# ---------------------------------------------------------------------- starts and states
@pytest.mark.parametrize("start", ["room1", "room3", "room5"])
def test_named_starts_work_on_skyemu(make_env, sky: dict[str, Any], start: str) -> None:
    embedded, skyemu = make_env(QUEST), make_env(QUEST, **sky)
    _, info_e = embedded.reset(seed=0, options={"state": start, "game_seed": 9})
    _, info_s = skyemu.reset(seed=0, options={"state": start, "game_seed": 9})
    assert info_s == info_e
    assert skyemu.unwrapped.read_memory(0x02000000, 0x200) == embedded.unwrapped.read_memory(
        0x02000000, 0x200
    )


def test_named_starts_of_the_arena(make_env) -> None:
    arena = Integration.bundled("BonkArena")
    with PeerProcess(arena.rom_path) as peer:
        embedded = make_env("MetaBonk/BonkArena-v0")
        skyemu = make_env("MetaBonk/BonkArena-v0", backend="skyemu", skyemu_url=peer.url)
        for start in ("start", "wave5"):
            _, info_e = embedded.reset(options={"state": start, "game_seed": 4})
            _, info_s = skyemu.reset(options={"state": start, "game_seed": 4})
            assert info_s == info_e
        skyemu.close()


def test_savestates_restore_the_exact_moment(make_env, sky: dict[str, Any], tmp_path: Path) -> None:
    env = make_env(QUEST, **sky)
    env.reset(seed=4)
    for action in [4, 4, 2, 2, 4, 5]:  # the last action is still held when saving
        env.step(action)
    saved_vars = env.unwrapped.variables()
    state = env.unwrapped.save_state(tmp_path / "mine.state")
    expected = [env.step(a) for a in (1, 3, 3, 0, 5, 5)]
    env.unwrapped.load_state(state)
    assert env.unwrapped.variables() == saved_vars, (
        "SkyEmu's one-frame /load offset is accounted for"
    )
    again = [env.step(a) for a in (1, 3, 3, 0, 5, 5)]
    for (obs_a, *rest_a), (obs_b, *rest_b) in zip(expected, again):
        assert np.array_equal(obs_a, obs_b) and rest_a == rest_b
    _, info = env.reset(options={"state": tmp_path / "mine.state"})
    assert env.unwrapped.variables() == saved_vars
    replay = [env.step(a)[0] for a in (1, 3, 3, 0, 5, 5)]
    assert all(np.array_equal(a[0], b) for a, b in zip(expected, replay))


def test_savestates_after_long_runs_and_log_cuts(
    make_env, sky: dict[str, Any], monkeypatch
) -> None:
    monkeypatch.setattr(backend_module, "CHECKPOINT_EVERY", 7)
    env = make_env(QUEST, **sky)
    env.reset(seed=8)
    rng = np.random.default_rng(1)
    for action in rng.integers(0, 6, 40):
        env.step(int(action))
    state = env.unwrapped.save_state()
    tail = [int(a) for a in rng.integers(0, 6, 15)]
    expected = [env.step(a)[4] for a in tail]
    env.unwrapped.write_variable("hp", 1)
    env.unwrapped.load_state(state)
    assert [env.step(a)[4] for a in tail] == expected


def test_a_failed_save_leaves_the_game_where_it_was(
    make_env, quest_peer: PeerProcess, monkeypatch
) -> None:
    env = make_env(QUEST, backend="skyemu", skyemu_url=quest_peer.url)
    env.reset(seed=6)
    for action in (4, 4, 1):
        env.step(action)
    before = env.unwrapped.variables()
    client = env.unwrapped.backend.client

    def refuse(path: str) -> None:
        client.text("/save", [("path", "/no/such/folder/x.png")])
        raise SkyEmuCommandFailedError("SkyEmu replied 'failed' to /save")

    monkeypatch.setattr(client, "save", refuse)
    # save_state() never touches the game; a /save happens when a step cuts the replay log
    monkeypatch.setattr(backend_module, "CHECKPOINT_EVERY", 1)
    with pytest.raises(SkyEmuError, match="could not write a savestate"):
        env.step(0)
    assert env.unwrapped.variables()["frame"] == before["frame"] + 4, "the step ran whole"
    monkeypatch.undo()
    before = env.unwrapped.variables()
    state = env.unwrapped.save_state()
    env.step(2)
    env.unwrapped.load_state(state)
    assert env.unwrapped.variables() == before


def test_mgba_state_files_give_a_clear_error(make_env, sky: dict[str, Any], tmp_path: Path) -> None:
    embedded = make_env(QUEST)
    embedded.reset(seed=1)
    embedded.unwrapped.save_state(tmp_path / "embedded.state")
    embedded.close()
    skyemu = make_env(QUEST, **sky)
    with pytest.raises(SkyEmuStateError, match="named start") as info:
        skyemu.reset(options={"state": tmp_path / "embedded.state"})
    assert isinstance(info.value, CorruptSavestateError)
    skyemu.reset(options={"state": "room2"})  # the env is still usable


def test_bare_skyemu_state_images_load_one_frame_late(
    make_env, quest_peer: PeerProcess, tmp_path: Path
) -> None:
    env = make_env(QUEST, backend="skyemu", skyemu_url=quest_peer.url)
    env.reset(seed=2)
    client = SkyEmuClient(quest_peer.url)
    client.save(str(tmp_path / "gui-slot.png"))
    frame = env.unwrapped.read_variable("frame")
    env.unwrapped.load_state((tmp_path / "gui-slot.png").read_bytes())
    assert env.unwrapped.read_variable("frame") == frame + 1


# ---------------------------------------------------------------------- SkyEmu we start
@pytest.fixture
def peer_binary(tmp_path: Path) -> str:
    """An executable taking SkyEmu's command line (`http_server PORT ROM`) that runs the peer."""
    script = tmp_path / "SkyEmu"
    script.write_text(
        f'#!/bin/sh\necho $$ > "{tmp_path}/pid"\nexec "{sys.executable}" -m metabonk_gym.gba.skyemu_peer "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited too
        return stat.read().split(")")[-1].split()[0] == "Z"


def test_skyemu_binary_starts_its_own_server_and_ends_it_on_close(
    peer_binary: str, tmp_path: Path
) -> None:
    env = gym.make(QUEST, backend="skyemu", skyemu_binary=peer_binary)
    backend = env.unwrapped.backend
    folder, proc = backend.process.folder, backend.process.proc
    assert (folder / "rom.gba").read_bytes() == QUEST_ROM.read_bytes(), "its own ROM copy"
    assert backend.process.port != 8080
    _, info = env.reset(seed=1, options={"state": "room2"})
    assert info["room"] == 2
    env.close()
    assert not proc.alive and not folder.exists()


def test_skyemu_binary_is_ended_at_interpreter_exit(peer_binary: str, tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import gymnasium as gym, metabonk_gym
        env = gym.make("{QUEST}", backend="skyemu", skyemu_binary={peer_binary!r})
        env.reset(seed=0)
        print(env.unwrapped.backend.process.folder)
        """
    )  # exits without close()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    pid = int((tmp_path / "pid").read_text())
    assert _gone(pid), "the SkyEmu process outlived the interpreter"
    assert not Path(out.stdout.strip()).exists()


def test_two_envs_get_their_own_skyemu(peer_binary: str) -> None:
    envs = [gym.make(QUEST, backend="skyemu", skyemu_binary=peer_binary) for _ in range(2)]
    try:
        ports = {env.unwrapped.backend.process.port for env in envs}
        assert len(ports) == 2
        infos = [env.reset(seed=0, options={"state": "room3"})[1] for env in envs]
        assert infos[0] == infos[1]
    finally:
        for env in envs:
            env.close()


def test_vectorised_envs_each_start_their_own_skyemu(peer_binary: str) -> None:
    envs = metabonk_gym.make_vec(QUEST, 2, backend="skyemu", skyemu_binary=peer_binary)
    try:
        envs.reset(seed=0)
        for _ in range(5):
            obs, _, _, _, infos = envs.step(np.array([4, 2]))
        assert obs.shape == (2, 160, 240, 3)
        assert infos["room"].tolist() == [1, 1]
    finally:
        envs.close()


# ---------------------------------------------------------------------- errors
def test_unreachable_skyemu_is_a_clear_error() -> None:
    with pytest.raises(
        SkyEmuUnreachableError,
        match=r"cannot reach SkyEmu at http://127\.0\.0\.1:\d+.*skyemu_binary",
    ):
        gym.make(QUEST, backend="skyemu", skyemu_url=f"http://127.0.0.1:{free_port()}")


def test_missing_or_bad_backend_arguments_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(SkyEmuError, match="skyemu_url=.*skyemu_binary="):
        gym.make(QUEST, backend="skyemu")
    with pytest.raises(SkyEmuError, match="not an executable"):
        gym.make(QUEST, backend="skyemu", skyemu_binary=str(tmp_path / "nope"))
    with pytest.raises(TypeError):
        gym.make(QUEST, backend="skyemu", skyemu_url="http://127.0.0.1:1", skyemu_typo=1)


def test_a_skyemu_that_exits_at_start_is_a_clear_error(tmp_path: Path) -> None:
    script = tmp_path / "SkyEmu"
    script.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(SkyEmuUnreachableError, match="exited with code 3.*cannot open display"):
        gym.make(QUEST, backend="skyemu", skyemu_binary=str(script))


def test_a_different_rom_is_refused(tmp_path: Path) -> None:
    other = bytearray(QUEST_ROM.read_bytes())
    other[0xA0:0xAC] = b"OTHERGAME\0\0\0"
    rom = tmp_path / "other.gba"
    rom.write_bytes(bytes(other))
    with (
        PeerProcess(rom) as peer,
        pytest.raises(SkyEmuRomMismatchError, match=r"different ROM.*OTHERGAME.*rom\.gba"),
    ):
        gym.make(QUEST, backend="skyemu", skyemu_url=peer.url)


def test_no_rom_loaded_is_refused(tmp_path: Path) -> None:
    with PeerProcess(QUEST_ROM) as peer:
        client = SkyEmuClient(peer.url)
        assert (
            client.text("/load_rom", [("path", str(tmp_path / "missing.gba"))])
            == "Failed to load ROM"
        )
        assert client.status()["rom-loaded"] is False
        with pytest.raises(SkyEmuRomMismatchError, match="no ROM loaded"):
            gym.make(QUEST, backend="skyemu", skyemu_url=peer.url)


def test_skyemu_dying_mid_episode_is_a_clear_error() -> None:
    peer = PeerProcess(QUEST_ROM)
    env = gym.make(QUEST, backend="skyemu", skyemu_url=peer.url)
    try:
        env.reset(seed=0)
        peer.stop()
        with pytest.raises(SkyEmuUnreachableError, match="SkyEmu at"):
            for _ in range(3):
                env.step(1)
        assert isinstance(SkyEmuUnreachableError("x"), MetabonkError)
    finally:
        env.close()
        peer.stop()


# ---------------------------------------------------------------------- CLI and benchmark
def test_skyemu_peer_command_serves_the_protocol() -> None:
    port = free_port()
    argv = [sys.executable, "-m", "metabonk_gym.cli.main", "skyemu-peer", "--port", str(port)]
    with ChildProcess.start(argv, name="skyemu-peer") as peer:
        peer.wait_ready(lambda: f"http://localhost:{port}" in peer.log_tail(), timeout_s=60)
        client = SkyEmuClient(f"http://127.0.0.1:{port}")
        client.ping()
        assert Path(client.status()["rom-path"]).name == "rom.gba"


def test_bench_skyemu_reports_a_ratio() -> None:
    from metabonk_gym.bench.skyemu_speed import run

    result = run(QUEST, steps=30, rounds=1)
    assert result["frameskip"] == 4 and result["skyemu_steps_per_s"] > 0
    assert result["skyemu_vs_embedded"] == pytest.approx(
        result["skyemu_steps_per_s"] / result["embedded_steps_per_s"]
    )
    assert 2 <= result["http_requests_per_step"] <= 4
    assert metabonk_gym  # registered envs


def test_the_peer_ends_when_its_parent_is_killed() -> None:
    """A test run killed mid-way runs no teardown; its peers must not outlive it holding ports."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "from metabonk_gym.gba.skyemu_peer import PeerProcess\n"
        f"peer = PeerProcess({str(QUEST_ROM)!r})\n"
        "print(peer.proc.pid, flush=True)\n"
        "import time; time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    assert Path(f"/proc/{pid}").exists()
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def running() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state != "Z"

    deadline = time.monotonic() + 15
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(), "the SkyEmu peer outlived its killed parent"


def test_input_is_sent_only_when_the_buttons_change(make_env, sky: dict[str, Any]) -> None:
    env = make_env(QUEST, **sky)
    env.reset(seed=0)
    client = env.unwrapped.backend.client
    before = client.requests_by_endpoint["/input"]
    for _ in range(10):
        env.step(4)  # the same buttons held: no new /input
    held = client.requests_by_endpoint["/input"] - before
    for i in range(10):
        env.step(3 if i % 2 == 0 else 4)  # alternating buttons: one /input per change
    changing = client.requests_by_endpoint["/input"] - before - held
    assert held <= 1 and changing == 10
    assert client.requests_by_endpoint["/step"] >= 20


def test_any_rom_env_runs_on_skyemu(make_env, quest_peer: PeerProcess) -> None:
    """MetaBonk/GBA-v0 (a user's ROM and integration) takes the SkyEmu backend too."""
    folder = Integration.bundled("BonkQuest").folder
    env = make_env(
        "MetaBonk/GBA-v0",
        rom=str(QUEST_ROM),
        integration=str(folder),
        backend="skyemu",
        skyemu_url=quest_peer.url,
    )
    obs, info = env.reset(seed=3)
    assert obs.shape == (160, 240, 3) and "room" in info
    embedded = make_env("MetaBonk/GBA-v0", rom=str(QUEST_ROM), integration=str(folder))
    _, reference = embedded.reset(seed=3)
    assert {k: info[k] for k in ("room", "player_x", "player_y", "hp")} == {
        k: reference[k] for k in ("room", "player_x", "player_y", "hp")
    }
