"""Go-Explore (issue 34): the explorer on the real core finds BonkQuest's room 2 and resumes; its
archive is data only, checksummed and tied to its ROM; bad input is one line and overwrites
nothing; Ctrl-C keeps the archive; the backward curriculum moves its start back on a toy; the
explorer and the robustifier run with no game code importable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import typer
from metabonk_gym.cli.errors import guard_commands
from metabonk_gym.cli.explore import register
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.training.backward import BackwardCallback, BackwardSettings
from metabonk_gym.training.backward_demo import Demo, load_demo_archive
from metabonk_gym.training.errors import RunDirError
from metabonk_gym.training.explore import ExploreSettings, open_explorer, run_explore
from metabonk_gym.training.explore_archive import Archive, ArchiveError
from metabonk_gym.training.explore_cells import cells_from_dict

QUEST = "MetaBonk/BonkQuest-v0"
REPO = Path(__file__).resolve().parents[1]


def cli() -> typer.Typer:
    """The explore commands as `metabonk` has them (errors guarded: one line, exit code 2)."""
    app = typer.Typer()
    register(app)
    guard_commands(app)
    return app


def room2_frame(archive: Archive) -> int | None:
    """The frames explored when the first cell in room 2 was found (cells: room first)."""
    found = [f for key, f in zip(archive.keys, archive.found_frame) if key[0] == 2]
    return min(found) if found else None


def test_explorer_finds_room_2_within_a_few_thousand_frames_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "quest"
    first = run_explore(QUEST, out, ExploreSettings(n_envs=2, max_frames=16_000, seed=0))
    archive = Archive.load(out / "archive.npz")
    frame = room2_frame(archive)
    assert frame is not None and frame <= 16_000, (first, archive.keys)
    assert first.best_score >= 2  # the quest stage (cells.yaml score): the sage's hall entered
    assert (out / "explore.json").is_file()
    scalars = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    tags = set(scalars.Tags()["scalars"])
    assert {"explore/cells", "explore/best_score", "explore/frames"} <= tags, tags
    assert scalars.Scalars("explore/best_score")[-1].value == first.best_score
    # the best cell's actions replay to it: they are the path from the start
    best = archive.best()
    assert len(archive.actions[best]) == archive.lengths[best] > 0

    again = run_explore(QUEST, out, ExploreSettings(n_envs=2, max_frames=3_200), resume=True)
    resumed = Archive.load(out / "archive.npz")
    assert again.frames >= first.frames + 3_200
    assert len(resumed) >= len(archive) and resumed.meta["rounds"] > archive.meta["rounds"]
    assert resumed.keys[: len(archive)] == archive.keys  # the old cells, in their order


def chosen_by_room(archive: Archive) -> dict[int, int]:
    """How often the cells of each room were chosen (cells: room first)."""
    counts: dict[int, int] = {}
    for key, chosen in zip(archive.keys, archive.chosen):
        counts[key[0]] = counts.get(key[0], 0) + chosen
    return counts


def test_a_level_variable_sends_the_explorer_to_the_furthest_level(tmp_path: Path) -> None:
    cells = tmp_path / "cells.yaml"
    cells.write_text(
        "variables: {room: 1, player_x: 3, player_y: 3, keys: 1}\nscore: score\n"
        "repeat_prob: 0.75\nlevel: room\nlevel_weight: 0.0\n"  # 0: only the furthest room
    )
    out = tmp_path / "quest"
    settings = ExploreSettings(n_envs=2, max_frames=16_000, seed=0, cells_file=str(cells))
    run_explore(QUEST, out, settings)
    archive = Archive.load(out / "archive.npz")
    assert room2_frame(archive) is not None, archive.keys  # room 2 found: now the furthest
    assert archive.meta["cells"]["level"] == "room"
    before = chosen_by_room(archive)
    settings = ExploreSettings(n_envs=1, max_frames=3_200, seed=1, cells_file=str(cells))
    run_explore(QUEST, out, settings, resume=True)
    after = chosen_by_room(Archive.load(out / "archive.npz"))
    furthest = max(after)
    assert furthest >= 2 and after[furthest] > before.get(furthest, 0), (before, after)
    # every return since went to the furthest room: no cell behind it was chosen again
    assert all(after[room] == before.get(room, 0) for room in after if room < furthest), (
        before,
        after,
    )


def test_past_won_explores_on_from_a_level_up(tmp_path: Path) -> None:
    """HatWizard's `won` is "the level went up": with `past_won` (its cells.yaml) the explorer
    goes on from the next level's first frame; without, a won cell is never chosen."""
    import yaml

    folder = bundled_game_folder("HatWizard")
    spec = yaml.safe_load((folder / "cells.yaml").read_text())
    assert spec["past_won"] is True
    ended = tmp_path / "ended.yaml"
    ended.write_text(yaml.safe_dump({**spec, "past_won": False}))
    beyond = {}
    for name, cells in (("on", None), ("ended", str(ended))):
        settings = ExploreSettings(n_envs=2, max_frames=12_800, seed=0, cells_file=cells)
        run_explore("MetaBonk/HatWizard-v0", tmp_path / name, settings)
        archive = Archive.load(tmp_path / name / "archive.npz")
        assert any(archive.won), name  # level 1-1 finished within a few rounds
        beyond[name] = [w for key, w in zip(archive.keys, archive.won) if key[0] >= 1]
    assert beyond["on"].count(False) > 0, beyond  # cells of level 1-2 that are not the win
    assert all(beyond["ended"]), beyond  # only the level-up itself: never explored from


def won_cells(archive: Archive) -> list[int]:
    return [i for i, w in enumerate(archive.won) if w]


def test_after_win_frames_explores_on_and_the_best_path_wins_with_the_most_hp(
    tmp_path: Path,
) -> None:
    """From room 5 the treasure is a few seconds away: exploring on past the first win finds
    won cells at other HP (HP is a cell variable), and the best path, the one robustify learns,
    is the won one with the most HP (the bundled cells' `prefer: hp`), then the shortest."""
    out = tmp_path / "quest"
    settings = ExploreSettings(n_envs=2, state="room5", after_win_frames=40_000, max_frames=400_000)
    result = run_explore(QUEST, out, settings)
    archive = Archive.load(out / "archive.npz")
    assert archive.meta["cells"]["prefer"] == "hp"
    won = won_cells(archive)
    first = min(archive.found_frame[i] for i in won)
    assert result.won and first + 40_000 <= result.frames < first + 40_000 + 8_000, result
    assert max(archive.found_frame) > first  # cells found after the win: it explored on
    hp = archive.prefer_column()
    assert hp == 4  # the cells: room, player_x, player_y, keys, hp
    best = archive.best()
    most = max(archive.keys[i][hp] for i in won)
    assert archive.won[best] and archive.keys[best][hp] == most, [archive.keys[i] for i in won]
    shortest = min(archive.lengths[i] for i in won if archive.keys[i][hp] == most)
    assert archive.lengths[best] == shortest
    assert result.best["won"] and result.best["cell"]["hp"] == 2 * most
    assert load_demo_archive(out)[1] == best  # robustify starts from this path


def test_a_preferred_variable_ranks_won_paths_and_an_archive_without_it_resumes(
    tmp_path: Path,
) -> None:
    cells = {"kind": "ram", "variables": {"room": 1, "hp": 2}, "score": None}
    archive = Archive(meta={"env_id": QUEST, "rom_sha1": "ab" * 20, "cells": cells})
    archive.update((5, 0), 10.0, 3, b"a", np.zeros(3, np.uint8), True, 8)  # won at 0-1 HP
    archive.update((5, 1), 10.0, 9, b"b", np.zeros(9, np.uint8), True, 16)  # won at 2-3 HP
    archive.update((5, 2), 9.0, 2, b"c", np.zeros(2, np.uint8), False, 24)  # not won
    assert archive.best() == 0  # no preference: the shorter won path
    archive.meta["cells"] = {**cells, "prefer": "hp"}
    assert archive.best() == 1  # HP first, then length
    # an archive explored without `prefer` resumes with cells that add it, and records it
    plain = tmp_path / "plain.yaml"
    spec = (bundled_game_folder("BonkQuest") / "cells.yaml").read_text()
    assert "\nprefer: hp\n" in spec
    plain.write_text(spec.replace("\nprefer: hp\n", "\n"))
    out = tmp_path / "quest"
    run_explore(QUEST, out, ExploreSettings(n_envs=1, max_frames=1_600, cells_file=str(plain)))
    assert "prefer" not in Archive.load(out / "archive.npz").meta["cells"]
    run_explore(QUEST, out, ExploreSettings(n_envs=1, max_frames=1_600), resume=True)
    resumed = Archive.load(out / "archive.npz")
    assert resumed.meta["cells"]["prefer"] == "hp" and resumed.prefer_column() == 4


def test_once_a_cell_has_won_the_explorer_returns_to_cells_with_more_hp(tmp_path: Path) -> None:
    """After a win the aim is a better one: cells with no more of the preferred variable (HP)
    than the best won cell weigh 0.1 (`below_best_win`), so returns go to cells above it."""
    explorer, _ = open_explorer(QUEST, ExploreSettings(n_envs=1, max_frames=400), tmp_path / "q")
    try:
        a = explorer.archive
        for hp in (0, 1, 2):  # room 5, ten places at each HP bucket, one score
            for x in range(10):
                a.update((5, x, 3, 0, hp), 9.0, 100, b"s", np.zeros(100, np.uint8), False, 0)

        def share_above() -> float:
            picks = explorer._choose(4000)
            return sum(a.keys[i][4] >= 1 for i in picks) / len(picks)

        assert abs(share_above() - 2 / 3) < 0.05  # no win yet: every HP alike
        a.update((5, 8, 3, 0, 0), 10.0, 120, b"w", np.zeros(120, np.uint8), True, 0)  # 0-1 HP
        assert share_above() > 0.9  # 20 cells above the win's HP weigh 1, 10 weigh 0.1
    finally:
        explorer.envs.close()


def test_until_prefer_stops_at_a_won_cell_with_that_much_hp(tmp_path: Path) -> None:
    out = tmp_path / "quest"
    settings = ExploreSettings(n_envs=2, state="room5", until_prefer=2, max_frames=400_000)
    result = run_explore(QUEST, out, settings)
    archive = Archive.load(out / "archive.npz")
    assert result.frames < 400_000 and result.best["won"], result
    assert result.best["cell"]["hp"] >= 2
    assert any(archive.keys[i][4] >= 1 for i in won_cells(archive))
    # the preference must be declared: otherwise one line, nothing written
    plain = tmp_path / "plain.yaml"
    plain.write_text("variables: {room: 1, hp: 2}\nscore: quest_stage\n")
    bad = tmp_path / "bad"
    result = run_cli(
        "explore", QUEST, "--out", str(bad), "--until-prefer", "2", "--cells", str(plain)
    )
    one_line_error(result, "until_prefer", "prefer")
    plain.write_text("variables: {room: 1, hp: 2}\nprefer: keys\n")
    result = run_cli("explore", QUEST, "--out", str(bad), "--frames", "400", "--cells", str(plain))
    one_line_error(result, "prefer 'keys'", "one of the cell variables")
    assert not bad.exists()


def test_reset_returns_to_save_state_bytes_and_refuses_other_bytes(make_env) -> None:
    from metabonk_gym.errors import CorruptSavestateError

    env = make_env(QUEST)
    env.reset(seed=0)
    for action in (4, 4, 4, 1):
        env.step(action)
    state, where = env.unwrapped.save_state(), env.unwrapped.variables()
    env.reset(seed=1)
    _, info = env.reset(options={"state": state})  # a new episode from the snapshot
    assert (info["player_x"], info["player_y"]) == (where["player_x"], where["player_y"])
    _, reward, *_ = env.step(0)
    assert reward == 0.0  # the reward starts over from the loaded state
    for bad in (b"\0" * 100, state + b"\0" * 8192):
        with pytest.raises(CorruptSavestateError):
            env.reset(options={"state": bad})


def test_every_bundled_cells_file_names_its_games_variables() -> None:
    from metabonk_gym.gba.integration import Integration
    from metabonk_gym.training.explore_cells import RamCells, load_cells

    for game in ("BonkQuest", "BonkArena", "HatWizard", "MeteoRain", "uCity"):
        folder = bundled_game_folder(game)
        cells = load_cells(folder, list(Integration.bundled(game).variables))
        assert isinstance(cells, RamCells) and cells.width >= 2, game


def test_a_game_without_cells_explores_by_its_screen(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "NoCells"
    shutil.copytree(
        bundled_game_folder("BonkQuest"),
        folder,
        ignore=shutil.ignore_patterns("cells.yaml", "game.py", "__init__.py", "__pycache__"),
    )
    settings = ExploreSettings(n_envs=1, max_frames=1600, env_kwargs={"integration": str(folder)})
    result = run_explore("MetaBonk/GBA-v0", tmp_path / "out", settings)
    archive = Archive.load(tmp_path / "out" / "archive.npz")
    assert archive.meta["cells"] == {"kind": "screen", "width": 11, "height": 8, "levels": 8}
    assert result.cells > 1 and all(len(key) == 88 for key in archive.keys)
    assert all(0 <= v < 8 for key in archive.keys for v in key)
    # a resume from another start is refused: the cells' paths begin at the archive's
    settings = ExploreSettings(
        max_frames=400, state="room2", env_kwargs={"integration": str(folder)}
    )
    with pytest.raises(RunDirError, match="explores from"):
        run_explore("MetaBonk/GBA-v0", tmp_path / "out", settings, resume=True)


def small_archive(rom_sha1: str = "ab" * 20) -> Archive:
    archive = Archive(meta={"env_id": QUEST, "rom_sha1": rom_sha1, "cells": {"kind": "screen"}})
    archive.update((1, 2), 10.0, 2, b"state", np.array([1, 4], np.uint8), False, 8)
    archive.update((2, 2), 50.0, 3, b"other", np.array([1, 4, 4], np.uint8), True, 16)
    return archive


def test_the_archive_is_data_only_checksummed_and_refuses_another_rom(tmp_path: Path) -> None:
    path = tmp_path / "archive.npz"
    small_archive().save(path)
    with zipfile.ZipFile(path) as bundle:  # plain .npy arrays, none of them objects
        assert all(name.endswith(".npy") for name in bundle.namelist())
    with np.load(path, allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)
    loaded = Archive.load(path, rom_sha1="ab" * 20)
    assert loaded.keys == [(1, 2), (2, 2)] and loaded.won == [False, True]
    assert loaded.best() == 1
    with pytest.raises(ArchiveError, match="made on the ROM"):
        Archive.load(path, rom_sha1="cd" * 20)
    # a byte flipped on disk: the zip's CRC refuses it
    raw = bytearray(path.read_bytes())
    raw[raw.find(b"other")] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError, match="not a readable archive"):
        Archive.load(path)
    path.write_bytes(bytes(raw[: len(raw) // 2]))  # cut short
    with pytest.raises(ArchiveError, match="not a readable archive"):
        Archive.load(path)
    # edited and zipped again (a valid file): the archive's own checksum refuses it
    small_archive().save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["scores"] = arrays["scores"] * 10
    np.savez(path, **arrays)
    with pytest.raises(ArchiveError, match="checksum"):
        Archive.load(path)


def test_an_archive_keeps_the_order_of_its_cell_variables(tmp_path: Path) -> None:
    """A key's numbers follow the cells file's order: a resume with the variables reordered
    would file states under the wrong cells, so it is refused."""
    cells = {"kind": "ram", "variables": {"room": 1, "player_x": 3}, "score": None}
    archive = Archive(meta={"env_id": QUEST, "rom_sha1": "ab" * 20, "cells": cells})
    archive.update((1, 2), 10.0, 2, b"state", np.array([1, 4], np.uint8), False, 8)
    path = tmp_path / "archive.npz"
    archive.save(path)
    loaded = Archive.load(path, cells=cells)
    assert list(loaded.meta["cells"]["variables"]) == ["room", "player_x"]
    assert cells_from_dict(loaded.meta["cells"]).names == ["room", "player_x"]
    swapped = {**cells, "variables": {"player_x": 3, "room": 1}}
    with pytest.raises(ArchiveError, match="other cells"):
        Archive.load(path, cells=swapped)


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli(), list(args))


def one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for word in words:
        assert word in lines[0], result.output


def test_bad_cells_files_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("variables: {room: 1, player_z: 3}\n")
    zero = tmp_path / "zero.yaml"
    zero.write_text("variables: {room: 1, player_x: 0}\n")
    out = tmp_path / "out"
    result = run_cli(
        "explore", QUEST, "--out", str(out), "--frames", "400", "--cells", str(unknown)
    )
    one_line_error(result, "player_z", "not a RAM variable", "player_x")  # the nearest name
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400", "--cells", str(zero))
    one_line_error(result, "bucket of 'player_x'", ">= 1")
    level = tmp_path / "level.yaml"
    level.write_text("variables: {room: 1, player_x: 3}\nlevel: keys\n")
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400", "--cells", str(level))
    one_line_error(result, "level 'keys'", "one of the cell variables")
    level.write_text("variables: {room: 1, player_x: 3}\nlevel: room\nlevel_weight: 2\n")
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400", "--cells", str(level))
    one_line_error(result, "level_weight", "[0, 1]")
    assert not out.exists()


def test_a_corrupt_or_foreign_archive_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    path = out / "archive.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    before = path.read_bytes()
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400", "--resume")
    one_line_error(result, "not a readable archive")
    assert path.read_bytes() == before
    # an archive made on another ROM (its header says so): refused, untouched
    small_archive(rom_sha1="00" * 20).save(path)
    before = path.read_bytes()
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400", "--resume")
    one_line_error(result, "made on the ROM")
    assert path.read_bytes() == before
    # without --resume an archive is never overwritten
    result = run_cli("explore", QUEST, "--out", str(out), "--frames", "400")
    one_line_error(result, "--resume")
    assert path.read_bytes() == before


def explore_then_signal(
    out: Path, save_every: int, ready: Callable[[], bool], settle: float, group: bool, sig: int
) -> tuple[int, str]:
    """Run `metabonk explore` on BonkQuest in a session of its own until `ready()`, wait
    `settle` seconds, send `sig` (to the whole process group with `group`); its exit code and
    output. Every wait has a deadline, and the group is killed if it outlives the test."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "metabonk_gym.cli.main", "explore", QUEST, "--out", str(out),
         "--seconds", "300", "--save-every", str(save_every)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not ready():
            assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "the explorer was not ready within 180 s"
            time.sleep(0.2)
        time.sleep(settle)
        (os.killpg if group else os.kill)(proc.pid, sig)
        output = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, output


def test_ctrl_c_ends_the_round_and_keeps_the_archive(tmp_path: Path) -> None:
    path = tmp_path / "out" / "archive.npz"
    saved: list[Archive] = []

    def first_save() -> bool:
        if path.is_file() and not saved:
            saved.append(Archive.load(path))
        return bool(saved)

    code, output = explore_then_signal(tmp_path / "out", 1, first_save, 1.5, False, signal.SIGINT)
    assert code == 130, output
    assert "stopped by SIGINT" in output and "archive saved" in output, output
    kept = Archive.load(path)  # whole, checksummed, at least what the first save had
    first = saved[0]
    assert kept.meta["frames"] >= first.meta["frames"] and len(kept) >= len(first)


class Corridor(gym.Env):
    """A toy for the backward curriculum: walk right from a start to the end of a corridor.

    A start is a "state" whose file name is the position (as the demonstration's points are)."""

    LENGTH = 12

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.start = 0
        self.position = 0
        self.steps = 0
        self._max_episode_steps = 100

    def set_start(self, state: str | None, game_seeds: Any = None) -> None:
        self.start = int(Path(state).name) if state else 0

    def _obs(self) -> np.ndarray:
        return np.array([self.position / self.LENGTH], np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.position, self.steps = self.start, 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        success = self.position >= self.LENGTH
        truncated = self.steps >= self._max_episode_steps
        return self._obs(), float(success), success, truncated, {"success": success}


def backward_run(env: type[gym.Env], steps: int, **settings: Any) -> BackwardCallback:
    """PPO with the backward curriculum on a toy; its callback after `steps` steps."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    points = list(range(0, Corridor.LENGTH + 1, 2))  # a demo walking right, a point per 2 steps
    demo = Demo(
        paths=[Path(str(p)) for p in points],
        steps=points,
        scores=[float(p == Corridor.LENGTH) for p in points],
        won=True,
        goal=None,
        state="0",
        game_seed=0,
    )
    knobs = BackwardSettings(threshold=0.6, window=8, **settings)
    callback = BackwardCallback(demo, knobs, lambda _: None)
    venv = DummyVecEnv([env, env])
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=4, seed=0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a busy 2-core machine: threads fight (minutes instead of seconds)
    try:
        model.learn(steps, callback=callback)
    finally:
        torch.set_num_threads(threads)
    return callback


class Blocked(Corridor):
    """The corridor with its end walled off: no episode ever succeeds."""

    LENGTH = 12

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        obs, _, _, truncated, _ = super().step(action)
        self.position = min(self.position, self.LENGTH - 1)
        return obs, 0.0, False, truncated, {"success": False}


def test_the_backward_curriculum_moves_its_start_back_on_a_toy() -> None:
    callback = backward_run(Corridor, 3_000)
    start = len(callback.demo.paths) - 2  # the point before the end
    assert callback.point < start or callback.fresh_seeds, callback.history
    assert callback.history and all(h["success_rate"] >= 0.6 for h in callback.history)
    points = [h["point"] for h in callback.history if not h["fresh_seeds"]]
    assert points == list(range(start, start - len(points), -1))  # one point back at a time
    # where nothing succeeds, the start stays where it began
    stuck = backward_run(Blocked, 1_000)
    assert stuck.point == start and not stuck.history and not stuck.fresh_seeds


class Starts(Corridor):
    """The corridor that remembers every start it was reset at (one list per process)."""

    seen: list[int] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        Starts.seen.append(self.start)
        return super().reset(seed=seed, options=options)


def test_a_uniform_share_starts_episodes_all_along_the_path() -> None:
    Starts.seen.clear()
    callback = backward_run(Starts, 1_500, uniform_share=1.0)
    start = len(callback.demo.paths) - 2
    assert not callback.history and callback.point == start  # no curriculum: nothing moves
    assert len(callback.uniform_results) > 0 and not callback.results
    assert set(Starts.seen) >= {0, 2, 4, 6, 8, 10}  # every point of the path (point 0: fresh)
    Starts.seen.clear()
    half = backward_run(Starts, 1_500, uniform_share=0.5)
    assert half.results or half.history  # the curriculum's share still decides moves
    assert half.uniform_results and len(set(Starts.seen)) >= 4


NO_GAME_CODE = """
import sys, shutil, json
from pathlib import Path
from metabonk_gym.gamedata import BUNDLED_GAMES
for game in BUNDLED_GAMES:  # any import of a game's code fails
    sys.modules[f"metabonk_gym.games.{game}.game"] = None
from metabonk_gym.training.explore import ExploreSettings, run_explore
from metabonk_gym.training.backward import BackwardSettings, run_robustify

tmp = Path(sys.argv[1])
folder = tmp / "BonkQuestCopy"
shutil.copytree(sys.argv[2], folder, ignore=shutil.ignore_patterns("game.py", "__init__.py", "__pycache__"))
assert not (folder / "game.py").exists()
env_kwargs = {"integration": str(folder)}
explored = run_explore("MetaBonk/GBA-v0", tmp / "explore",
    ExploreSettings(n_envs=1, max_frames=3200, env_kwargs=env_kwargs))
robust = run_robustify(tmp / "explore", tmp / "robust", BackwardSettings(every=10, total_steps=128,
    overrides={"n_envs": 2, "n_steps": 32, "batch_size": 32, "n_epochs": 1}))
loaded = [name for name, module in sys.modules.items() if module and (
    name.startswith("metabonk_gym._game_folders.")  # a folder's game.py, imported by path
    or (name.startswith("metabonk_gym.games.") and name.endswith(".game")))]
print(json.dumps({"cells": explored.cells, "steps": robust.num_timesteps, "loaded": loaded}))
"""


def test_the_explorer_and_the_robustifier_run_without_game_code(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NO_GAME_CODE), str(tmp_path),
         str(bundled_game_folder("BonkQuest"))],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import json

    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["cells"] > 1 and result["steps"] >= 128 and result["loaded"] == []
    assert (tmp_path / "robust" / "model.zip").is_file()


def test_sigterm_to_the_whole_process_group_keeps_the_archive(tmp_path: Path) -> None:
    """The workers die with the explorer's own stop signal: the rounds done are kept anyway,
    though no periodic save has come yet."""
    out = tmp_path / "out"

    def started() -> bool:
        return (out / "tensorboard").is_dir() and any((out / "tensorboard").iterdir())

    # a few rounds, far from the first periodic save
    code, output = explore_then_signal(out, 600, started, 3.0, True, signal.SIGTERM)
    assert code == 143, output
    assert "archive saved" in output, output
    kept = Archive.load(out / "archive.npz")
    assert kept.meta["frames"] > 0 and len(kept) > 1
