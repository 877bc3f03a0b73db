"""How much of a Megabonk step's move two frames of the stand-in show, with no learning at all.

A scripted person plays a realtime `bonklink-sim` (frameskip 4, a frame each step) watched by the
env; for each moving step the background's shift from frame t to t+1 is found by brute force
(the bilinear shift of frame t that best matches frame t+1, HUD and player masked), and its
direction is compared with the stick's. The share within 22.5 degrees bounds what an IDM can learn
from a frame pair: the plain look's faint grid, scrolled by whole capture pixels, gives 0.79 at
90x160 and 0.54 at 45x80; the detailed look 1.00 and 0.98 (docs/video.md).

    python scripts/megabonk_motion_bound.py [--look plain|detailed] [--steps 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import ndimage

from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.sim import SimProcess

LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def record(look: str, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(frames (T+1, 90, 160) luma, stick (T, 2), episode ends (T,)) of the scripted person."""
    with SimProcess(
        port=0, human="scripted", input_snapshot=True, seed=seed, speed=8, jpeg_hz=15, look=look
    ) as sim:
        assert sim.port is not None
        env = MegabonkEnv(port=sim.port, frameskip=4, obs_type="rgb", send_actions=False)
        try:
            obs, _ = env.reset()
            frames, sticks, ends = [obs["pixels"] @ LUMA], [], []
            for _ in range(steps):
                obs, _, terminated, truncated, info = env.step(env.action_space.sample())
                frames.append(obs["pixels"] @ LUMA)
                sticks.append(np.asarray(info["human_action"], np.float32)[:2])
                ends.append(terminated or truncated)
                if terminated or truncated:
                    break
        finally:
            env.close()
    return np.asarray(frames, np.float32), np.asarray(sticks), np.asarray(ends)


def best_shift(
    before: np.ndarray, after: np.ndarray, reach: float, step: float
) -> tuple[float, float]:
    """The (dx, dy) shift of `before` that best matches `after` (mean squared error)."""
    h, w = before.shape
    mask = np.zeros((h, w), bool)
    mask[int(h * 0.13) : int(h * 0.93), :] = True  # without the health and XP bars
    r = max(2, h // 15)
    mask[h // 2 - r : h // 2 + r + 1, w // 2 - r : w // 2 + r + 1] = False  # nor the player
    best, best_err = (0.0, 0.0), math.inf
    for dy in np.arange(-reach, reach + 1e-6, step):
        for dx in np.arange(-reach, reach + 1e-6, step):
            moved = ndimage.shift(before, (dy, dx), order=1, mode="nearest")
            err = float(((moved - after)[mask] ** 2).mean())
            if err < best_err:
                best, best_err = (float(dx), float(dy)), err
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--look", default="detailed", choices=("plain", "detailed"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    frames, sticks, ends = record(args.look, args.steps, args.seed)
    for downscale in (1, 2):
        small = frames
        if downscale > 1:
            n, h, w = frames.shape
            small = frames.reshape(n, h // downscale, downscale, w // downscale, downscale)
            small = small.mean(axis=(2, 4))
        errors = []
        for t in range(len(sticks)):
            if ends[t] or np.hypot(*sticks[t]) < 0.5:
                continue
            dx, dy = best_shift(small[t], small[t + 1], 3.0 / downscale, 0.25 / downscale)
            # the camera follows the player: the ground moves against it (+z is up the screen)
            seen = math.atan2(dy, -dx)
            true = math.atan2(float(sticks[t][1]), float(sticks[t][0]))
            errors.append(abs(math.degrees((seen - true + math.pi) % (2 * math.pi) - math.pi)))
        within = float(np.mean(np.asarray(errors) <= 22.5)) if errors else float("nan")
        h, w = small.shape[1:]
        print(
            f"look {args.look}, {h}x{w}: {len(errors)} moving steps, direction within 22.5 deg "
            f"{within:.3f}, median error {float(np.median(errors)):.1f} deg"
        )


if __name__ == "__main__":
    main()
