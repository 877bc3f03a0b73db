"""`obs_type="state"`: the integration's RAM state vector, on the real core, checked against RAM
read independently of the spec's own code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.errors import IntegrationError, MetabonkError
from metabonk_gym.gba.integration import Integration, games_dir
from metabonk_gym.gba.state_vector import StateVectorSpec

ARENA = "MetaBonk/BonkArena-v0"


def _expected_arena_vector(game) -> np.ndarray:
    """BonkArena's declared vector, computed by hand from RAM reads (not by StateVectorSpec)."""
    v = {n: game.read_variable(n) for n in ("player_x", "player_y", "hp", "max_hp")}
    v |= {n: game.read_variable(n) for n in ("menu_open", "menu_cursor")}
    me = np.array([v["player_x"], v["player_y"]], dtype=np.float64)
    head = [(me[0] - 120) / 120, (me[1] - 80) / 80, v["hp"] / max(1, v["max_hp"])]
    head += [float(v["menu_open"])] + [float(v["menu_cursor"] == k) for k in range(3)]

    def nearest(prefix: str, present: np.ndarray, k: int, kinds: np.ndarray | None) -> list[float]:
        xs = game.read_array(f"{prefix}_x")[present].astype(np.float64) - me[0]
        ys = game.read_array(f"{prefix}_y")[present].astype(np.float64) - me[1]
        order = sorted(range(len(xs)), key=lambda i: (np.hypot(xs[i], ys[i]), i))[:k]
        width = 3 if kinds is None else 4
        out = [0.0] * (k * width)
        for slot, i in enumerate(order):
            cell = [xs[i] / 64, ys[i] / 64, 1.0]
            if kinds is not None:
                cell.append(float(kinds[present][i] == 2))
            out[slot * width : (slot + 1) * width] = cell
        return out

    alive = game.read_array("enemy_active") != 0
    gems = game.read_array("gem_value") != 0
    vec = head + nearest("enemy", alive, 8, game.read_array("enemy_kind"))
    vec += nearest("gem", gems, 2, None)
    return np.clip(np.array(vec, dtype=np.float32), -10, 10)


def test_arena_state_vector_matches_ram(make_env) -> None:
    env = make_env(ARENA, obs_type="state", state="wave5")
    assert env.observation_space.shape == (45,) and env.observation_space.dtype == np.float32
    obs, _ = env.reset(seed=4)
    rng = np.random.default_rng(0)
    seen_enemies = 0
    for _ in range(300):
        np.testing.assert_allclose(obs, _expected_arena_vector(env.unwrapped), atol=1e-6)
        assert env.observation_space.contains(obs)
        seen_enemies = max(seen_enemies, int(obs[7:39].reshape(8, 4)[:, 2].sum()))
        obs, _, terminated, _, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated:
            obs, _ = env.reset()
    assert seen_enemies == 8  # wave 5 fills every enemy slot, so the nearest-8 cut is exercised
    labels = env.unwrapped.state_vector.labels()
    assert len(labels) == 45 and labels[7] == "enemies[0].dx" and labels[-1] == "gems[1].present"


def test_state_vector_is_deterministic_and_passes_the_checkers(make_env) -> None:
    import warnings

    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = make_env(ARENA, obs_type="state")
    runs = []
    for _ in range(2):
        obs, _ = env.reset(seed=11)
        trace = [obs]
        for t in range(120):
            trace.append(env.step(t % 9)[0])
        runs.append(np.stack(trace))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.abs(runs[0][:, 7:39]).sum() > 0  # enemies appear within 120 steps
    check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(env.unwrapped, warn=True)
    # the screen even with state observations and no render_mode (what the recorders read)
    frame = env.render()
    assert frame is not None and frame.shape == (160, 240, 3) and frame.dtype == np.uint8


def test_rgb_render_still_works_with_state_observations(make_env) -> None:
    env = make_env(ARENA, obs_type="state", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (160, 240, 3) and frame.std() > 0


def test_a_game_without_a_state_vector_says_so(make_env) -> None:
    with pytest.raises(
        MetabonkError, match=r"BonkQuest declares no state_vector in .*metabonk\.json"
    ):
        make_env("MetaBonk/BonkQuest-v0", obs_type="state")
    with pytest.raises(ValueError, match="obs_type must be 'rgb', 'grayscale' or 'state'"):
        make_env(ARENA, obs_type="ram")


def _arena_copy(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "Arena"
    shutil.copytree(games_dir() / "BonkArena", folder)
    path = folder / "metabonk.json"
    data = json.loads(path.read_text())
    edit(data["state_vector"])
    path.write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda sv: sv["variables"].append({"name": "mana"}), r"reads \['mana'\], not variables"),
        (lambda sv: sv["entities"][0].update(x="boss_x"), r"reads \['boss_x'\], not arrays"),
        (lambda sv: sv["entities"][0].update(y="menu_options"), "1-D arrays of one length"),
        (lambda sv: sv["variables"][0].update(scale=0), "a scale of 0"),
        (lambda sv: sv.pop("origin"), "entities need an origin"),
        (lambda sv: sv.update(colour=1), r"unknown keys \['colour'\]"),
        (lambda sv: sv["entities"][1].pop("present"), "malformed entry"),
    ],
)
def test_malformed_state_vector_names_the_file(tmp_path: Path, edit, message: str) -> None:
    folder = _arena_copy(tmp_path, edit)
    with pytest.raises(IntegrationError, match=message) as caught:
        Integration.from_folder(folder)
    assert "metabonk.json" in str(caught.value)


def test_spec_one_hot_out_of_range_and_clip() -> None:
    spec = StateVectorSpec.parse(
        {"variables": [{"name": "a", "one_hot": 2}, {"name": "b", "scale": 0.5}], "clip": 3}
    )
    assert spec.compute({"a": 7, "b": 100}, {}).tolist() == [0.0, 0.0, 3.0]
    with pytest.raises(ValueError, match="declares no variables"):
        StateVectorSpec.parse({})
