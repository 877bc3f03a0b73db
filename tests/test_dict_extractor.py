"""`DictExtractor` (issue 22's training speed with a wrapper stack): the frame-stacked image keys
go whole through the CNN, every other key is read at its newest frame only, scaled by its bounds;
the config's frame stack reaches it through `policy_kwargs`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.policies import DictExtractor, policy_kwargs

STACK = 4
SPACE = gym.spaces.Dict(
    {
        "pixels": gym.spaces.Box(0, 255, (STACK, 20, 30), np.uint8),  # channel-first, as SB3 gives
        "tiles": gym.spaces.Box(0, 2**31 - 1, (20, 30 * STACK), np.int32),
        "sprites": gym.spaces.Box(-512, 511, (64, 9 * STACK), np.int32),
    }
)


def _batch(seed: int) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return {
        "pixels": torch.as_tensor(rng.integers(0, 256, (2, STACK, 20, 30)) / 255.0).float(),
        "tiles": torch.as_tensor(rng.integers(0, 2**31 - 1, (2, 20, 30 * STACK))).float(),
        "sprites": torch.as_tensor(rng.integers(-512, 512, (2, 64, 9 * STACK))).float(),
    }


def test_other_keys_are_read_at_their_newest_frame() -> None:
    torch.manual_seed(0)
    ext = DictExtractor(SPACE, cnn_output_dim=16, vector_dim=8, frame_stack=STACK)
    assert ext.widths == {"tiles": 30, "sprites": 9}
    assert ext.features_dim == 16 + 8
    obs = _batch(0)
    with torch.no_grad():
        base = ext(obs)
        older = {k: v.clone() for k, v in obs.items()}
        older["tiles"][..., :-30] = 0  # older frames of a token key: no effect
        older["sprites"][..., :-9] = 511
        assert torch.equal(ext(older), base)
        newer = {k: v.clone() for k, v in obs.items()}
        newer["tiles"][..., -30:] = 0  # the newest frame: the vector features change
        assert not torch.equal(ext(newer)[:, 16:], base[:, 16:])
        assert torch.equal(ext(newer)[:, :16], base[:, :16])
        frames = {k: v.clone() for k, v in obs.items()}
        frames["pixels"][:, 0] = 0  # the image's oldest frame still counts
        assert not torch.equal(ext(frames)[:, :16], base[:, :16])


def test_numbers_reach_the_layer_scaled_into_0_1() -> None:
    ext = DictExtractor(SPACE, cnn_output_dim=16, vector_dim=8, frame_stack=STACK)
    seen: list[torch.Tensor] = []
    ext.vector[0].register_forward_hook(lambda _m, args, _out: seen.append(args[0]))  # type: ignore[index]
    obs = _batch(1)
    obs["tiles"][..., -30:] = 2**31 - 1
    obs["sprites"][..., -9:] = -512
    with torch.no_grad():
        ext(obs)
    (inputs,) = seen
    assert inputs.shape == (2, 20 * 30 + 64 * 9)
    # the Dict's key order (gymnasium sorts it): sprites at their bottom bound, tiles at the top
    assert torch.allclose(inputs[:, :576], torch.zeros(2, 576))
    assert torch.allclose(inputs[:, 576:], torch.ones(2, 600))


def test_without_a_frame_stack_every_entry_counts() -> None:
    space = gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (1, 20, 30), np.uint8),
            "buttons": gym.spaces.Box(0, 1, (12,), np.int8),
        }
    )
    assert DictExtractor(space, frame_stack=1).widths == {"buttons": 12}
    assert DictExtractor(space, frame_stack=5).widths == {"buttons": 12}  # 12 is no stack of 5


def test_policy_kwargs_pass_the_configs_frame_stack() -> None:
    cfg = resolve_config(
        "MetaBonk/BonkQuest-v0", overrides={"wrappers": ["tile_tokens"], "frame_stack": 3}
    )
    kwargs = policy_kwargs(cfg)
    assert kwargs["features_extractor_class"] is DictExtractor
    assert kwargs["features_extractor_kwargs"]["frame_stack"] == 3


def test_the_rollout_buffer_keeps_newest_frames_and_the_features_match() -> None:
    """PPO's buffer (`NewestFrameBuffer`) stores only what the extractor reads: features of its
    minibatches equal those of the whole stacked observations."""
    from metabonk_gym.training.newest import NewestFrameBuffer, newest_widths

    widths = newest_widths(SPACE, STACK)
    assert widths == {"tiles": 30, "sprites": 9}
    buffer = NewestFrameBuffer(3, SPACE, gym.spaces.Discrete(4), n_envs=2, widths=widths)
    assert buffer.observations["tiles"].shape == (3, 2, 20, 30)
    assert buffer.observations["pixels"].shape == (3, 2, STACK, 20, 30)
    rng = np.random.default_rng(2)
    whole = []
    for _ in range(3):
        obs = {k: np.stack([s.sample() for _ in range(2)]) for k, s in SPACE.spaces.items()}
        obs["tiles"] = rng.integers(0, 2**20, (2, 20, 30 * STACK)).astype(np.int32)
        whole.append(obs)
        zeros = torch.zeros(2)
        buffer.add(obs, np.zeros((2, 1)), np.zeros(2), np.zeros(2), zeros, zeros)
    buffer.compute_returns_and_advantage(torch.zeros(2), np.zeros(2))
    torch.manual_seed(0)
    ext = DictExtractor(SPACE, cnn_output_dim=16, vector_dim=8, frame_stack=STACK)
    (batch,) = list(buffer.get(batch_size=6))
    order = buffer_order(batch.observations["pixels"], whole)
    full = {k: torch.as_tensor(np.stack([whole[t][k][e] for t, e in order])).float() for k in SPACE}
    with torch.no_grad():
        got = ext({k: v.float() for k, v in batch.observations.items()})
        assert torch.allclose(got, ext(full))
    assert batch.observations["tiles"].shape == (6, 20, 30)


def buffer_order(pixels: torch.Tensor, whole: list[dict[str, np.ndarray]]) -> list[tuple[int, int]]:
    """(step, env) of each sample in a minibatch, found by its pixels."""
    found = []
    for sample in pixels.numpy():
        found.extend(
            (t, e)
            for t, obs in enumerate(whole)
            for e in range(2)
            if np.array_equal(obs["pixels"][e], sample)
        )
    return found
