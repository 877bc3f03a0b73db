"""`EgoCellCNN`: the locator learns to find the agent's code, and features depend on where it is."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from metabonk_gym.training.dagger import grid_cell
from metabonk_gym.training.egocells import EgoCellCNN, locator_loss

ROWS, COLS = 6, 8
PLAYER = 77  # the code byte of the "player" picture; the floor is 3, walls 9


def boards(n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` 2-frame, 1-byte boards (floor, a wall row, decoy pictures and the player somewhere)
    and the player cells."""
    obs = np.full((n, 2, ROWS, COLS), 3, dtype=np.uint8)
    obs[:, :, 0, :] = 9
    for decoy in (40, 50, 60, 70, 80, 90):
        spots = rng.integers(COLS, ROWS * COLS, size=n)
        obs[np.arange(n), 1, spots // COLS, spots % COLS] = decoy
    cells = rng.integers(COLS, ROWS * COLS, size=n)
    obs[np.arange(n), 1, cells // COLS, cells % COLS] = PLAYER  # the newest frame only
    return torch.as_tensor(obs), torch.as_tensor(cells)


def test_locator_learns_the_players_cell() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    space = gym.spaces.Box(0, 255, (2, ROWS, COLS), np.uint8)
    net = EgoCellCNN(space, features_dim=16, frame_stack=2, channels=8, layers=2)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    test_obs, test_cells = boards(64, rng)
    with torch.no_grad():
        before = float(locator_loss(net, test_obs, test_cells))
    for _ in range(60):
        obs, cells = boards(32, rng)
        loss = locator_loss(net, obs, cells)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = float(locator_loss(net, test_obs, test_cells))
        found = float((net.locate(test_obs).argmax(1) == test_cells).float().mean())
    assert before > 2.0  # about log(cells): it starts out not knowing where to look
    assert after < 0.2 * before
    assert found == 1.0


def test_features_follow_the_located_player() -> None:
    torch.manual_seed(1)
    space = gym.spaces.Box(0, 255, (2, ROWS, COLS), np.uint8)
    net = EgoCellCNN(space, features_dim=16, frame_stack=2, channels=8, layers=2)
    obs, _ = boards(2, np.random.default_rng(2))
    with torch.no_grad():
        net.locator.weight.zero_()
        net.locator.bias.zero_()
        first = net(obs[:1])
        # point the locator at another cell: the offsets change, so the features do too
        net.embedding.weight[PLAYER + 256] += 5.0
        net.locator.weight.fill_(1.0)
        second = net(obs[:1])
    assert not torch.allclose(first, second)


def test_frame_stack_must_split_the_planes() -> None:
    space = gym.spaces.Box(0, 255, (3, ROWS, COLS), np.uint8)
    with pytest.raises(ValueError, match="do not split"):
        EgoCellCNN(space, frame_stack=2)


def test_locator_loss_is_zero_without_a_locator() -> None:
    assert float(locator_loss(torch.nn.Linear(2, 2), torch.zeros(1, 2), torch.zeros(1))) == 0.0


def test_grid_cell_off_grid_or_missing_is_minus_one() -> None:
    assert grid_cell({"y": 1, "x": 2}, ["y", "x"], (ROWS, COLS)) == 1 * COLS + 2
    assert grid_cell({"y": 1}, ["y", "x"], (ROWS, COLS)) == -1
    assert grid_cell({"y": 1, "x": COLS}, ["y", "x"], (ROWS, COLS)) == -1
