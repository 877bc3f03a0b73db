"""Training configs, preprocessing that must match the env bit for bit, and A* (no training here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.experts.pathfinding import astar
from metabonk_gym.gamedata import GameData
from metabonk_gym.training.config import (
    TrainConfig,
    config_to_yaml,
    load_config_file,
    parse_set_options,
    resolve_config,
)
from metabonk_gym.training.envs import FrameStacker, convert_frames, make_env, stack_episode
from metabonk_gym.training.errors import ConfigError, DatasetError

QUEST = "MetaBonk/BonkQuest-v0"


def test_defaults_per_env_and_state() -> None:
    room1 = resolve_config(QUEST)
    assert (room1.state, room1.reward, room1.goal["variable"], room1.max_episode_steps) == (
        "room1",
        "room1",
        "rooms_visited",
        200,
    )
    assert room1.shaping is not None and room1.downscale == 8
    later = resolve_config(QUEST, overrides={"state": "room3"})
    assert later.goal is None and later.shaping is None and later.reward == "explore"
    arena = resolve_config("MetaBonk/BonkArena-v0")
    assert arena.reward == "survival" and arena.total_steps == 1_000_000
    assert (arena.obs_type, arena.policy, arena.frame_stack) == ("state", "MlpPolicy", 1)


def test_unknown_key_names_the_nearest(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match="unknown config key 'learning_rat' \\(did you mean 'learning_rate'"
    ):
        resolve_config(QUEST, overrides={"learning_rat": 1e-3})
    bad = tmp_path / "bad.yaml"
    bad.write_text("MetaBonk/BonkQuest-v0:\n  n_env: 2\n")
    with pytest.raises(ConfigError, match="n_envs.*bad.yaml"):
        resolve_config(QUEST, config_file=bad)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"n_envs": "four"}, "must be int"),
        ({"downscale": 3}, "must be one of 1, 2, 4, 8"),
        ({"n_envs": 0}, ">= 1"),
        ({"batch_size": 4096, "n_steps": 8, "n_envs": 2}, "larger than one rollout"),
        ({"goal": {"variable": "keys", "op": "bigger"}}, "goal op 'bigger' is unknown"),
    ],
)
def test_bad_values(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config(QUEST, overrides=overrides)


def test_file_sections_yaml_and_toml(tmp_path: Path) -> None:
    yaml_file = tmp_path / "hp.yaml"
    yaml_file.write_text(
        "default:\n  gamma: 0.9\nMetaBonk/BonkQuest-v0:\n  n_envs: 3\n  net_arch: [32, 32]\n"
    )
    cfg = resolve_config(QUEST, config_file=yaml_file, overrides={"n_envs": 2})
    assert (cfg.gamma, cfg.n_envs, cfg.net_arch) == (0.9, 2, [32, 32])  # flags win over the file
    yaml_file.write_text("MetaBonk/BonkQuest-v0:\n  n_envs: 3\n")
    with pytest.raises(ConfigError, match="no section for MetaBonk/BonkArena-v0"):
        load_config_file(yaml_file, "MetaBonk/BonkArena-v0")
    toml_file = tmp_path / "hp.toml"
    toml_file.write_text('reward = "sparse"\nlearning_rate = 1\n')
    cfg = resolve_config(QUEST, config_file=toml_file)
    assert (
        cfg.reward == "sparse" and cfg.learning_rate == 1.0 and isinstance(cfg.learning_rate, float)
    )
    with pytest.raises(ConfigError, match="config file not found"):
        resolve_config(QUEST, config_file=tmp_path / "missing.yaml")


def test_round_trip_and_set_options() -> None:
    cfg = resolve_config(
        QUEST, overrides=parse_set_options(["gamma=0.97", "net_arch=[8]", "goal=null"])
    )
    assert cfg.goal is None and cfg.net_arch == [8]
    import yaml

    again = TrainConfig.from_dict(yaml.safe_load(config_to_yaml(cfg)))
    assert again == cfg
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_set_options(["gamma"])
    with pytest.raises(ConfigError, match="did you mean 'gamma'"):
        parse_set_options(["gama=0.9"])


def test_convert_frames_matches_the_env(make_env) -> None:
    rgb = make_env(QUEST, obs_type="rgb", downscale=1, state="room1")
    obs_rgb, _ = rgb.reset(seed=3)
    frames = [obs_rgb]
    for action in (4, 4, 2):
        frames.append(rgb.step(action)[0])
    rgb.close()
    small = make_env(QUEST, obs_type="grayscale", downscale=4, state="room1")
    obs_small, _ = small.reset(seed=3)
    expected = [obs_small] + [small.step(a)[0] for a in (4, 4, 2)]
    converted = convert_frames(np.stack(frames), ("rgb", 1), ("grayscale", 4))
    assert np.array_equal(converted, np.stack(expected))
    with pytest.raises(DatasetError, match="only full-size RGB"):
        convert_frames(converted, ("grayscale", 4), ("grayscale", 8))


def test_stacking_matches_vecframestack() -> None:
    from gymnasium import spaces
    from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

    frames = np.random.default_rng(0).integers(0, 255, (5, 4, 6, 1), dtype=np.uint8)
    reference = StackedObservations(1, 3, spaces.Box(0, 255, (4, 6, 1), np.uint8), "last")
    expected = [reference.reset(frames[:1])[0].copy()]
    for t in range(1, 5):
        expected.append(reference.update(frames[t : t + 1], np.array([False]), [{}])[0][0].copy())
    assert np.array_equal(stack_episode(frames, 3), np.stack(expected))
    stacker = FrameStacker(3)
    online = [stacker.reset(frames[0]).copy()] + [stacker.add(f).copy() for f in frames[1:]]
    assert np.array_equal(np.stack(online), np.stack(expected))


def test_goal_wrapper_ends_the_episode_on_success() -> None:
    cfg = resolve_config(
        QUEST, overrides={"goal": {"variable": "player_x", "op": "greater-than", "reference": 9}}
    )
    env = make_env(QUEST, cfg)
    try:
        _, info = env.reset(seed=0)
        assert info["success"] is False and info["player_x"] == 9
        _, _, terminated, _, info = env.step(4)  # RIGHT: x 9 -> 10
        assert terminated and info["success"]
    finally:
        env.close()
    bad = resolve_config(QUEST, overrides={"goal": {"variable": "treasure_count", "reference": 1}})
    with pytest.raises(ConfigError, match="goal variable 'treasure_count'"):
        make_env(QUEST, bad)


def test_astar_avoids_costly_cells() -> None:
    free = np.ones((3, 5), bool)
    cost = np.ones((3, 5))
    cost[0, 2] = cost[1, 2] = 50.0
    path = astar(free, (0, 0), {(0, 4)}, cost)
    assert path is not None and (2, 2) in path and (0, 2) not in path
    free[:, 2] = False
    assert astar(free, (0, 0), {(0, 4)}) is None


def test_approach_shaping_pays_for_progress_towards_the_objective() -> None:
    cfg = resolve_config(QUEST, overrides={"shaping": {"weight": 1.0}, "reward": {}, "goal": None})
    env = make_env(QUEST, cfg)
    try:
        _, info = env.reset(seed=1)
        assert (info["player_x"], info["player_y"], info["key_x"], info["key_y"]) == (9, 10, 10, 13)
        _, reward, _, _, info = env.step(4)  # RIGHT: one tile closer to the key
        assert reward == 1.0 and info["reward_terms"]["shaping"] == 1.0
        _, reward, _, _, info = env.step(3)  # LEFT: one tile away again
        assert reward == -1.0
    finally:
        env.close()
    bad = resolve_config(QUEST, overrides={"shaping": {"targets": [["chest_x", "chest_y"]]}})
    with pytest.raises(ConfigError, match="shaping reads \\['chest_x', 'chest_y'\\]"):
        make_env(QUEST, bad)
    with pytest.raises(ConfigError, match="shaping takes position"):
        resolve_config(QUEST, overrides={"shaping": {"wieght": 1}})


def test_defaults_are_the_game_folders_data() -> None:
    from metabonk_gym.gamedata import DEFAULTS_SECTIONS, bundled_game_folder
    from metabonk_gym.training.config import env_defaults

    for game in ("BonkQuest", "BonkArena", "Megabonk"):
        data = GameData(bundled_game_folder(game)).defaults()
        keys = {k: v for k, v in data.items() if k not in DEFAULTS_SECTIONS}
        states = data.get("states") or {}
        expected = {**keys, **states.get(keys.get("state"), {})}
        cfg = resolve_config(f"MetaBonk/{game}-v0")
        assert {k: getattr(cfg, k) for k in expected} == expected
        for state, extra in states.items():
            assert env_defaults(f"MetaBonk/{game}-v0", state) == {**keys, **extra}


def test_env_traits_and_game_data_decide_what_an_env_takes() -> None:
    mega = "MetaBonk/Megabonk-v0"
    cfg = resolve_config(mega, overrides={"base_port": 7000})
    assert cfg.env_kwargs_for_make(mega, index=3)["port"] == 7003  # a port per env
    assert "port" not in resolve_config(QUEST).env_kwargs_for_make(QUEST, index=3)
    with pytest.raises(ConfigError, match="state is not supported for MetaBonk/Megabonk-v0"):
        resolve_config(mega, overrides={"state": "room1"})
    with pytest.raises(ConfigError, match="sticky_action_prob is not supported"):
        resolve_config(mega, overrides={"sticky_action_prob": 0.25})
    # Megabonk's defaults.yaml: frames come as Dict(pixels, state), so they need MultiInputPolicy
    with pytest.raises(ConfigError, match="obs_type grayscale needs policy MultiInputPolicy"):
        resolve_config(mega, overrides={"obs_type": "grayscale"})
    with pytest.raises(ConfigError, match="obs_type rgb needs policy CnnPolicy or MlpPolicy"):
        resolve_config(QUEST, overrides={"obs_type": "rgb", "policy": "MultiInputPolicy"})
    with pytest.raises(ConfigError, match="set base_port instead"):
        resolve_config(mega, overrides={"env_kwargs": {"port": 1}})
    assert resolve_config(QUEST, overrides={"sticky_action_prob": 0.25}).env_kwargs_for_make(QUEST)[
        "sticky_action_prob"
    ] == pytest.approx(0.25)
