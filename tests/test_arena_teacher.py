"""BonkArena's scripted expert and DAgger teacher (issue 22 item 4): the expert's survival floor,
the teacher's memoryless upgrade choice, and `RamFeatures`, which shows the menu's options to a
state-vector policy."""

from __future__ import annotations

import numpy as np
import pytest
from metabonk_gym.wrappers import RamFeatures

from metabonk_gym.agents.registry import make_agent
from metabonk_gym.games.BonkArena import game
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.dagger import teacher_class
from metabonk_gym.training.envs import make_env as make_training_env
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rollout import run_episode
from metabonk_gym.training.wrapstack import normalize_wrappers

ARENA = "MetaBonk/BonkArena-v0"
MENU = [{"name": "ram_features", "one_hot": {"menu_options": 8}}]


@pytest.mark.slow
def test_expert_survives_five_minutes_on_most_evaluation_seeds(make_env) -> None:
    """The floor under the scripted expert: the full 5:00 in at least 3 of 4 evaluation games
    (the bench's seeds 100000..100003; it survived all four when this was written)."""
    env = make_env(ARENA)
    expert = make_agent("scripted", env)
    results = [run_episode(env, expert, seed=100_000 + k) for k in range(4)]
    times = [r.variables["time_s"] for r in results]
    assert sum(r.won for r in results) >= 3, times
    assert all(t >= 120 for t in times), times


def test_teacher_takes_the_priority_upgrade_from_what_the_policy_sees() -> None:
    """In a level-up menu the teacher's buttons depend only on the cursor, HP and the options
    (all in the `ram_features` observation), and the upgrade it takes is `pick_upgrade`'s."""
    cfg = resolve_config(ARENA, overrides={"wrappers": MENU, "seed": 3})
    env = make_training_env(ARENA, cfg)
    try:
        teacher = teacher_class(env)(env)
        assert isinstance(teacher, game.BonkArenaTeacher)
        base = env.unwrapped
        obs, info = env.reset(seed=3)
        teacher.reset(obs, info)
        taken = 0
        for _ in range(3000):
            if info["menu_open"]:
                options = [int(o) for o in base.read_array("menu_options")]
                shown = obs[45:].reshape(3, 8)
                assert [int(np.argmax(row)) for row in shown] == options
                want = options[game.pick_upgrade(options, info["hp"] / max(1, info["max_hp"]))]
                before = base.read_array("upgrades").copy()
                while info["menu_open"] and base.read_array("menu_options").tolist() == options:
                    obs, _, _, _, info = env.step(teacher.act(obs, info))
                gained = base.read_array("upgrades").astype(int) - before.astype(int)
                assert gained.tolist() == [int(i == want) for i in range(8)]
                taken += 1
                if taken == 2:
                    break
            obs, _, terminated, truncated, info = env.step(teacher.act(obs, info))
            assert not (terminated or truncated)
        assert taken == 2
    finally:
        env.close()


def test_ram_features_one_hot_and_bad_input(make_env) -> None:
    env = make_env(ARENA, obs_type="state")
    wrapped = RamFeatures(env, one_hot={"menu_options": 8, "level": 4})
    assert wrapped.observation_space.shape == (45 + 24 + 4,)
    obs, _ = wrapped.reset(seed=0)
    assert obs[45 + 24 :].tolist() == [0.0, 1.0, 0.0, 0.0]  # level 1
    base = env.unwrapped
    base.write_variable("level", 9)  # outside 0..3: all zeros
    assert wrapped.observation(obs[:45])[45 + 24 :].tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="'nope' is neither a RAM array nor a variable"):
        RamFeatures(env, one_hot={"nope": 2})
    with pytest.raises(ValueError, match="1-D Box observation"):
        RamFeatures(make_env(ARENA), one_hot={"level": 2})
    with pytest.raises(ConfigError, match="wrapper ram_features has no option 'onehot'"):
        normalize_wrappers([{"name": "ram_features", "onehot": {}}])


def test_dagger_emphasis_weighs_the_menus_samples(tmp_path) -> None:
    """`DaggerSettings.emphasis` records a weight per sample (the factor while the named info
    variable is nonzero) and `fit` counts a sample's cross-entropy by it: a label on 2% of the
    samples, weighted 1000x, becomes the policy's usual prediction; unweighted it is not."""
    import torch

    from metabonk_gym.training.dagger import DaggerSettings, fit, train_dagger
    from metabonk_gym.training.envs import stacked_space

    settings = DaggerSettings(
        teacher_episodes=1,
        rounds=0,
        epochs_first=1,
        epochs_round=1,
        max_steps=1200,
        emphasis={"menu_open": 7.0},
    )
    run = tmp_path / "run"
    train_dagger(
        ARENA,
        run,
        settings=settings,
        overrides={"wrappers": MENU, "net_arch": [16], "seed": 0},
        log=lambda _: None,
    )
    with np.load(run / "data" / "round_000.npz") as data:
        obs, labels, weights = data["obs"], data["labels"], data["weights"]
    menu = obs[:, 3] > 0  # the state vector's menu_open
    assert menu.any() and (~menu).any()
    assert set(weights[menu].tolist()) == {7.0} and set(weights[~menu].tolist()) == {1.0}
    with pytest.raises(ConfigError, match="emphasis of menu_open"):
        DaggerSettings(emphasis={"menu_open": 0.0}).check()

    from stable_baselines3.common.vec_env import DummyVecEnv

    from metabonk_gym.training.policies import make_ppo
    from metabonk_gym.training.safeload import SpacesEnv

    cfg = resolve_config(ARENA, overrides={"wrappers": MENU, "net_arch": [16], "seed": 0})
    env = make_training_env(ARENA, cfg)
    space = stacked_space(env.observation_space, cfg.frame_stack)
    venv = DummyVecEnv([lambda: SpacesEnv(space, env.action_space)])
    env.close()
    rare = 9  # A: pressed in menus only
    y = labels.copy()
    y[y == rare] = 0
    few = np.random.default_rng(0).random(len(y)) < 0.02
    y[few] = rare  # the rare label on 2% of the samples, at random: only its weight can matter

    def predicted_share(sample_weights: np.ndarray | None) -> float:
        torch.manual_seed(0)
        model = make_ppo(cfg, venv)
        fit(
            model,
            space,
            obs,
            y,
            epochs=3,
            batch_size=64,
            learning_rate=1e-2,
            seed=0,
            weights=sample_weights,
        )
        with torch.no_grad():
            logits = model.policy.get_distribution(torch.as_tensor(obs)).distribution.logits
            return float((logits.argmax(dim=1) == rare).float().mean())

    heavy = np.where(few, 1000.0, 1.0).astype(np.float32)
    assert predicted_share(heavy) > 0.5 > predicted_share(None)
