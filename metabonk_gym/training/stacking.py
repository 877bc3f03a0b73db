"""The one frame stack: observations stacked on their last axis, the newest last, zeros after a
reset, exactly as SB3's `VecFrameStack(channels_order="last")` builds them.

What: `push_frame` is the one update rule (drop the oldest observation, put the new one last);
`FrameStacker` (one array) and `ObservationStacker` (a `Box` or each key of a `Dict`) apply it
online to one env, `stack_episode` to a recorded episode, and the training vector env's
`LeanFrameStack` (`metabonk_gym.training.framestack`) to a batch of envs. Why: a policy reads
the layout it was trained on, so every path that feeds one (training, a loaded model, RLlib,
behavioural cloning, DAgger) stacks with the same rule. gymnasium's `FrameStackObservation`
stacks on a new first axis, which these policies do not read.

>>> stack = push_frame(np.zeros((1, 3), np.uint8), np.array([[7]], np.uint8))
>>> push_frame(stack, np.array([[8]], np.uint8)).tolist()
[[0, 7, 8]]
>>> stack_episode(np.array([[1], [2], [3]], np.uint8), 2).tolist()
[[0, 1], [1, 2], [2, 3]]
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def push_frame(stack: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """A new stack: `stack` without its oldest `obs.shape[-1]` entries on the last axis, then
    `obs` (in the stack's dtype). Leading axes (a batch of envs, or an episode's steps) pass
    through; `stack` itself is left as it was."""
    width = obs.shape[-1]
    out = np.empty_like(stack)
    out[..., :-width] = stack[..., width:]
    out[..., -width:] = obs
    return out


def stacked_space(space: spaces.Box, frame_stack: int) -> spaces.Box:
    """The observation space after `VecFrameStack(frame_stack)` on the last axis."""
    if frame_stack <= 1:
        return space
    low = np.repeat(space.low, frame_stack, axis=-1)
    high = np.repeat(space.high, frame_stack, axis=-1)
    return spaces.Box(low=low, high=high, dtype=space.dtype)  # type: ignore[arg-type]


def stack_episode(frames: np.ndarray, frame_stack: int) -> np.ndarray:
    """Observations of one episode (T, ..., C) -> (T, ..., C * frame_stack): frames (T, H, W, C)
    or state vectors (T, N), what `FrameStacker` gives at each step (zero-padded at the start,
    the newest last)."""
    if frame_stack <= 1:
        return frames
    out = np.empty((*frames.shape[:-1], frames.shape[-1] * frame_stack), dtype=frames.dtype)
    stacker = FrameStacker(frame_stack)
    for t, frame in enumerate(frames):
        out[t] = stacker.reset(frame) if t == 0 else stacker.add(frame)
    return out


class FrameStacker:
    """Online frame stack of one array (`push_frame` from zeros after each reset).

    Args:
        frame_stack: how many observations to stack on the last axis.

    >>> stacker = FrameStacker(2)
    >>> stacker.reset(np.array([1])).tolist(), stacker.add(np.array([2])).tolist()
    ([0, 1], [1, 2])
    """

    def __init__(self, frame_stack: int) -> None:
        self.frame_stack = frame_stack
        self._stack: np.ndarray | None = None

    def reset(self, obs: np.ndarray) -> np.ndarray:
        """Start a new stack: zeros, then `obs`."""
        shape = (*obs.shape[:-1], obs.shape[-1] * self.frame_stack)
        self._stack = push_frame(np.zeros(shape, dtype=obs.dtype), obs)
        return self._stack

    def current(self) -> np.ndarray:
        """The stack as of the last reset or add."""
        if self._stack is None:
            raise RuntimeError("FrameStacker.current() before reset()")
        return self._stack

    def add(self, obs: np.ndarray) -> np.ndarray:
        """Push `obs` (the first call: a reset) and return the new stack."""
        if self._stack is None:
            return self.reset(obs)
        self._stack = push_frame(self._stack, obs)
        return self._stack


class ObservationStacker:
    """Online frame stack of one env's observations, a `Box` or each key of a `Dict` (one
    `FrameStacker` each): what a loaded policy is fed, one env at a time (`ModelAgent`, RLlib's
    `LastAxisFrameStack`).

    Args:
        space: the env's observation space (a `Box`, or a `Dict` of them).
        frame_stack: how many observations to stack (1: none).

    >>> space = spaces.Dict({"pixels": spaces.Box(0, 255, (2, 2, 1), np.uint8)})
    >>> stacker = ObservationStacker(space, 3)
    >>> stacker.space["pixels"].shape
    (2, 2, 3)
    >>> first = stacker.push({"pixels": np.ones((2, 2, 1), np.uint8)}, reset=True)
    >>> first["pixels"][0, 0].tolist(), stacker.current()["pixels"][0, 0].tolist()
    ([0, 0, 1], [0, 0, 1])
    """

    def __init__(self, space: gym.Space, frame_stack: int) -> None:
        self.frame_stack = int(frame_stack)
        if isinstance(space, spaces.Dict):
            self.keys: list[str] | None = list(space.spaces)
            self.space: gym.Space = spaces.Dict(
                {k: stacked_space(s, self.frame_stack) for k, s in space.spaces.items()}  # type: ignore[arg-type]
            )
        else:
            self.keys = None
            self.space = stacked_space(space, self.frame_stack)  # type: ignore[arg-type]
        self._stackers = {k: FrameStacker(self.frame_stack) for k in (self.keys or [""])}

    def push(self, obs: Any, reset: bool, copy: bool = False) -> Any:
        """Stack `obs` (after a reset: on zeros) and return the stacked observation (`copy`: new
        arrays, else the stacker's own, which the next push changes)."""

        def one(key: str, part: Any) -> np.ndarray:
            stacker, arr = self._stackers[key], np.asarray(part)
            stacked = stacker.reset(arr) if reset else stacker.add(arr)
            return stacked.copy() if copy else stacked

        if self.keys is None:
            return one("", obs)
        return {k: one(k, obs[k]) for k in self.keys}

    def current(self) -> Any:
        """The stacked observation as of the last push."""
        if self.keys is None:
            return self._stackers[""].current()
        return {k: self._stackers[k].current() for k in self.keys}
