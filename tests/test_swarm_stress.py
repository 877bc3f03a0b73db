"""Swarm-mode resets and state loads on a user's game folder, hundreds of them, in a child process.

An env worker of `metabonk curriculum --swarm` on a game folder made by `metabonk integrate new`
died once by SIGSEGV in the emulator core (one CI run in five); the loop here does what a swarm
worker does, many times over, and never reproduced it. It is kept so that a crash of that kind
fails a test with its signal: a child process built the way `curriculum` builds its envs
(`training.envs.probe_env` in the process first, then several envs, each core on its own copy of
stable-retro, wrapped by `training.envs.make_env`), that plays a few frames, saves a milestone
state with `save_start_state`, makes it every env's start with `set_start` and resets (the state
file loaded), and in between resets to power-on, to the folder's own savestate start, to
`save_state()` bytes, and closes an env and opens another on the freed core. Then a short
`metabonk curriculum --swarm` run whose milestone (the frame counter) is beaten at nearly every
step, so every env restarts from a freshly saved state at each episode. Each child has a
deadline; a signal shows as a negative return code (SIGSEGV: -11).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GBA = "MetaBonk/GBA-v0"
#: Rounds of the in-process loop: each saves one milestone state and resets every env from it.
ROUNDS = 600
#: Envs in the loop's process (a swarm worker holds several: one core per copy of stable-retro).
LOOP_ENVS = 3
#: Seconds each child may run (the loop and the CLI run take a few seconds each when idle).
DEADLINE_S = 240


def swarm_loop(folder: Path, rounds: int = ROUNDS, n_envs: int = LOOP_ENVS) -> int:
    """What a swarm worker does to its envs, `rounds` times: steps, a milestone state saved by
    one env and made every env's start, resets from it, from power-on, from the folder's start
    and from `save_state()` bytes; every 40 rounds an env is closed and another opened on its
    core. Returns the number of resets."""
    from metabonk_gym.training.config import resolve_config
    from metabonk_gym.training.envs import make_env, probe_env

    overrides = {
        "env_kwargs": {"integration": str(folder)},
        "max_episode_steps": 6,
        "downscale": 8,
        "n_envs": n_envs,
    }
    cfg = resolve_config(GBA, overrides=overrides)
    probe_env(GBA, cfg)  # as curriculum does before its workers: a core opened and closed first
    swarm = folder.parent / "swarm"
    swarm.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    envs = [make_env(GBA, cfg, i) for i in range(n_envs)]
    resets = 0
    try:
        for env in envs:
            env.reset(seed=int(rng.integers(1 << 30)))
        for round_ in range(rounds):
            for env in envs:  # play; a finished episode restarts from the current start
                for _ in range(int(rng.integers(1, 8))):
                    *_, terminated, truncated, _ = env.step(env.action_space.sample())
                    if terminated or truncated:
                        env.reset()
                        resets += 1
            # SwarmCallback: env i beat the milestone; its state becomes every env's start
            path = swarm / f"frame_{round_:04d}.state"
            envs[round_ % n_envs].get_wrapper_attr("save_start_state")(str(path))
            for env in envs:
                env.get_wrapper_attr("set_start")(str(path))
                env.reset()
                resets += 1
            other = envs[(round_ + 1) % n_envs]
            kind = round_ % 3
            if kind == 0:
                other.reset(options={"state": None})  # power-on
            elif kind == 1:
                other.reset(options={"state": "play"})  # the folder's savestate start
            else:
                snapshot = other.unwrapped.save_state()  # type: ignore[attr-defined]
                other.step(other.action_space.sample())
                other.reset(options={"state": snapshot})
            resets += 1
            if round_ % 40 == 39:  # a core freed and taken again
                k = round_ % n_envs
                envs[k].close()
                envs[k] = make_env(GBA, cfg, k)
                envs[k].reset(options={"state": str(path)})
                resets += 1
    finally:
        for env in envs:
            env.close()
    return resets


@pytest.fixture(scope="module")
def game(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder made by `metabonk integrate new` from the bundled BonkQuest ROM, with the frame
    counter and `player_x` as variables, a savestate start `play` (its default) and the frame
    counter as its milestone (beaten at nearly every step of a swarm run)."""
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    from metabonk_gym.gamedata import bundled_game_folder

    folder = tmp_path_factory.mktemp("user") / "Mine"
    rom = str(bundled_game_folder("BonkQuest") / "rom.gba")
    runner = CliRunner()
    for args in (
        ["integrate", "new", rom, str(folder), "--name", "Mine"],
        ["ram", "add", str(folder), "frame", "0x02000004", "u32"],
        ["ram", "add", str(folder), "player_x", "0x02000011", "u8"],
        ["integrate", "state", str(folder), "play", "--inputs", "wait 120; START 5", "--default"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    (folder / "milestones.yaml").write_text("- variable: frame\n")
    return folder


def _run_child(args: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run a child to its end (or kill it at `DEADLINE_S`); assert it exited 0, else say how
    (a signal: its negative number) with the end of its output."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{what} ran past {DEADLINE_S} s: {str(exc.stderr or '')[-2000:]}")
    print(f"{what}: return code {done.returncode}")
    assert done.returncode == 0, (
        f"{what} exited with {done.returncode} (-11: SIGSEGV)\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    return done


@pytest.mark.slow
def test_hundreds_of_swarm_resets_and_state_loads_never_crash_the_core(game: Path) -> None:
    done = _run_child(
        [sys.executable, "-X", "faulthandler", __file__, str(game)], "the swarm reset loop"
    )
    resets = int(done.stdout.split("resets ")[-1])
    states = list((game.parent / "swarm").glob("frame_*.state"))
    print(f"{resets} resets, {len(states)} milestone states saved")
    assert resets >= (LOOP_ENVS + 1) * ROUNDS, done.stdout  # every env, every round, and one more
    assert len(states) == ROUNDS


@pytest.mark.slow
def test_a_short_swarm_curriculum_on_the_folder_exits_cleanly(game: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [sys.executable, "-X", "faulthandler", "-m", "metabonk_gym.cli.main", "curriculum"]
    args += [GBA, "--integration", str(game), "--swarm", "--run-dir", str(run), "--n-envs", "4"]
    args += ["--total-steps", "2048", "--no-progress"]
    for key, value in {
        "n_steps": 32,
        "batch_size": 64,
        "n_epochs": 1,
        "features_dim": 32,
        "downscale": 8,
        "max_episode_steps": 6,
        "video_every": 0,
        "checkpoint_every": 0,
    }.items():
        args += ["--set", f"{key}={value}"]
    _run_child(args, "metabonk curriculum --swarm")
    saved = list((run / "swarm").glob("frame_*.state"))
    print(f"{len(saved)} milestone states saved, each every env's next start")
    assert len(saved) > 100, "the milestone was beaten, and its states loaded, many times"


if __name__ == "__main__":  # the child of the first test
    print(f"resets {swarm_loop(Path(sys.argv[1]))}")
