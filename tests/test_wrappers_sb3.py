"""The wrappers together: every key through make_vec's subprocess envs, and SB3's
MultiInputPolicy learning on the Dict observation."""

from __future__ import annotations

from functools import partial

import numpy as np
from metabonk_gym.wrappers import ButtonHistory, GridOverlay, TemporalStrip, TextMap, TileTokens

import metabonk_gym

ALL_WRAPPERS = [
    TileTokens,
    partial(TemporalStrip, past=2, future=1, predictor="flow"),
    TextMap,
    partial(GridOverlay, scale=1),
    partial(ButtonHistory, n=4),
]


def test_every_wrapper_in_subprocess_envs() -> None:
    envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2, wrappers=ALL_WRAPPERS)
    try:
        obs, infos = envs.reset(seed=[1, 2])
        expected = {
            "pixels": (2, 160, 240, 3),
            "tiles": (2, 20, 30),
            "sprites": (2, 64, 9),
            "sprite_map": (2, 20, 30),
            "classes": (2, 20, 30),
            "strip": (2, 4, 160, 240, 3),
            "ascii": (2, 20, 30),
            "overlay": (2, 160, 240, 3),
            "buttons": (2, 4, 10),
        }
        assert {k: v.shape for k, v in obs.items()} == expected
        assert all("@" in text for text in infos["text_map"])
        obs, _, _, _, infos = envs.step(np.array([4, 5]))
        assert obs["buttons"][:, -1].tolist() == [
            [0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ]
    finally:
        envs.close()


def test_ppo_multi_input_policy_learns(make_env) -> None:
    import torch
    from stable_baselines3 import PPO

    env = make_env("MetaBonk/BonkQuest-v0", downscale=4)
    env = ButtonHistory(
        TemporalStrip(TileTokens(env, buckets=512), past=1, future=1, predictor="flow"), n=4
    )
    model = PPO(
        "MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu"
    )
    before = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
    model.learn(256)
    assert model.num_timesteps >= 256
    # it learned through every input: the gradient steps moved both heads and the weights of
    # each observation key's extractor (flattened keys, tiles and buttons here, have none)
    after = model.policy.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert {"action_net.weight", "value_net.weight"} <= moved
    learned = [
        key for key in env.observation_space.spaces if f"extractors.{key}." in str(list(before))
    ]
    assert "pixels" in learned, learned  # the image key has a CNN; the others are flattened
    for key in learned:
        assert any(f"extractors.{key}." in k for k in moved), key
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(int(action))
