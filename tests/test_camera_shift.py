"""`CameraShift`: the screen's sub-pixel scroll between frames, and the weight map it learns.

Real torch, real optimisation: a smooth ground viewed through a camera moved by known
fractions of a pixel, with and without a static HUD drawn over it (which does not scroll, so it
pulls an unweighted estimate toward zero).
"""

from __future__ import annotations

import pytest
import torch

from metabonk_gym.learned.model import IdmNet
from metabonk_gym.learned.motion import CameraShift

H, W = 24, 40


def view(dy: float, dx: float, seed: int = 0) -> torch.Tensor:
    """(H, W) of a smooth ground (a sum of waves, so any sub-pixel shift is exact) whose
    content moved by (dy, dx) pixels."""
    generator = torch.Generator().manual_seed(seed)
    ys = torch.arange(H, dtype=torch.float32)[:, None] - dy
    xs = torch.arange(W, dtype=torch.float32)[None, :] - dx
    image = torch.zeros(H, W)
    for _ in range(6):
        ky, kx = (torch.rand(2, generator=generator) * 1.2 - 0.6).tolist()
        phase = float(torch.rand(1, generator=generator)) * 6.28
        image += torch.sin(ky * ys + kx * xs + phase)
    return 0.5 + 0.05 * image


def pairs(shifts: list[tuple[float, float]], hud: bool = False, seed: int = 0) -> torch.Tensor:
    """(N, 2, H, W): each pair's first view unmoved, its second moved by the shift."""
    out = torch.stack([torch.stack([view(0, 0, seed), view(dy, dx, seed)]) for dy, dx in shifts])
    if hud:  # a health bar and the player's sprite: drawn on top, they do not scroll
        out[..., 1:3, 2:20] = 1.0
        out[..., 10:14, 18:22] = 0.9
    return out


def test_a_sub_pixel_scroll_is_measured_to_a_tenth_of_a_pixel():
    shifts = [(0.0, 0.0), (0.3, -0.7), (-1.2, 0.5), (0.8, 0.8), (0.0, -1.5)]
    with torch.no_grad():
        measured = CameraShift((H, W))(pairs(shifts))[:, 0]
    error = (measured - torch.tensor(shifts)).abs().max().item()
    assert error < 0.1, measured


def test_the_weight_map_learns_to_ignore_a_static_hud():
    # trained on many grounds (a game's ground changes as it scrolls; the HUD stays), then
    # measured on a ground it never saw
    torch.manual_seed(0)
    shift = CameraShift((H, W))
    train = [(float(a), float(b)) for a, b in torch.empty(64, 2).uniform_(-1.2, 1.2).tolist()]
    truth = torch.tensor(train)
    frames = torch.cat([pairs(train[i : i + 8], hud=True, seed=10 + i) for i in range(0, 64, 8)])
    test = [(0.4, -0.9), (-0.6, 0.2), (1.0, 1.0)]

    def test_error() -> float:
        with torch.no_grad():
            measured = shift(pairs(test, hud=True, seed=1))[:, 0]
        return (measured - torch.tensor(test)).abs().mean().item()

    before = test_error()
    assert before > 0.3  # the HUD, which does not move, drags the estimate toward zero
    optimizer = torch.optim.Adam(shift.parameters(), lr=0.1)
    for _ in range(100):
        loss = ((shift(frames)[:, 0] - truth) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = test_error()
    weights = torch.sigmoid(shift.weight_logits)
    assert after < before / 4, (before, after)
    assert weights[1:3, 4:18].mean() < 0.5 * weights[16:22, 25:38].mean()  # the bar
    assert weights[10:14, 18:22].mean() < 0.2 * weights[16:22, 25:38].mean()  # the sprite


def test_idm_net_reads_the_shift_only_when_asked():
    frames = torch.randint(0, 255, (2, 4, 3, H, W), dtype=torch.uint8)
    plain = IdmNet(4, 3, 10, width=8)
    moving = IdmNet(4, 3, 10, width=8, motion=True, frame_size=(H, W))
    assert "shift.weight_logits" in moving.state_dict()
    assert not any(k.startswith("shift.") for k in plain.state_dict())
    assert moving(frames).shape == plain(frames).shape == (2, 10)
    with pytest.raises(ValueError, match="frame_size"):
        IdmNet(4, 3, 10, motion=True)
