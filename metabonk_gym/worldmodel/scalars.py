"""`EpisodeScalars`: the game scalars `train ppo` logs, written by the env itself for trainers
that run no SB3 callbacks (sheeprl's Dreamer), into the run's `tensorboard/` folder.

sheeprl builds its envs from a hydra `_target_`; `make_logged_env` is that target, so a Dreamer
run gets `episode/return_mean`, `episode/length_mean`, `episode/win_rate`, `game/<variable>` and
`reward_terms/<term>` under the same names and in the same folder as a PPO run (sheeprl's own
losses stay in its `sheeprl/` folder). The envs run in the trainer's process (`sync_env`), so all
envs of a run share one writer and one env-step counter.

>>> import gymnasium as gym, tempfile
>>> env = EpisodeScalars(gym.make("CartPole-v1", max_episode_steps=5), tempfile.mkdtemp())
>>> _ = env.reset(seed=0)
>>> for _ in range(5): _ = env.step(0)
>>> env.log.stats.episodes, env.log.steps
(1, 5)
>>> env.close()
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from metabonk_gym.training.callbacks import EpisodeStats, episode_number, episode_scalars


class _RunLog:
    """One TensorBoard writer, episode statistics and env-step counter per log folder."""

    def __init__(self, folder: Path, start_step: int, window: int) -> None:
        from stable_baselines3.common.logger import configure

        self.logger = configure(str(folder), ["tensorboard"])
        self.stats = EpisodeStats(window=window)
        self.steps = int(start_step)
        self.users = 0
        self.lock = threading.Lock()

    def episode(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.stats.add(record["r"], record["l"], record["won"])
            for tag, value in episode_scalars([record], self.stats).items():
                self.logger.record(tag, value)
            self.logger.record("time/total_timesteps", self.steps)
            self.logger.dump(self.steps)


_LOGS: dict[Path, _RunLog] = {}
_LOGS_LOCK = threading.Lock()


class EpisodeScalars(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Logs each finished episode's return, length, `success`/`won`, game variables and reward
    terms to TensorBoard under `train ppo`'s names.

    Args:
        env: the env (its `info_names`, where it has them, are the variables logged).
        folder: the TensorBoard folder (a run's `tensorboard/`); envs given the same folder in
            one process share its writer and step counter.
        start_step: the env steps already taken (a resumed run continues its curves there).
        window: episodes in the rolling means (as `win_window` of `train ppo`).
    """

    def __init__(
        self, env: gym.Env, folder: str | Path, start_step: int = 0, window: int = 100
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, folder=str(folder), start_step=start_step, window=window
        )
        super().__init__(env)
        key = Path(folder).expanduser().resolve()
        with _LOGS_LOCK:
            if key not in _LOGS:
                _LOGS[key] = _RunLog(key, start_step, window)
            self.log = _LOGS[key]
            self.log.users += 1
        self._key = key
        self.names = list(getattr(env.unwrapped, "info_names", None) or [])
        self._return, self._length = 0.0, 0
        self._terms: dict[str, float] = defaultdict(float)
        self._closed = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._return, self._length = 0.0, 0
        self._terms = defaultdict(float)
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        with self.log.lock:
            self.log.steps += 1
        for name, value in (info.get("reward_terms") or {}).items():
            self._terms[name] += float(value)
        if terminated or truncated:
            won = info.get("success", info.get("won"))
            self.log.episode(
                {
                    "r": self._return,
                    "l": self._length,
                    "won": None if won is None else bool(won),
                    "vars": {
                        n: v for n in self.names if (v := episode_number(info.get(n))) is not None
                    },
                    "terms": dict(self._terms),
                }
            )
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with _LOGS_LOCK:
                self.log.users -= 1
                if self.log.users == 0:
                    self.log.logger.close()
                    _LOGS.pop(self._key, None)
        super().close()


def make_logged_env(  # noqa: A002  (hydra passes the env id as `id`, like gymnasium.make)
    id: str, scalars_dir: str, scalars_step: int = 0, **kwargs: Any
) -> gym.Env:
    """`gymnasium.make(id, **kwargs)` wrapped in `EpisodeScalars(env, scalars_dir, scalars_step)`:
    the `_target_` of sheeprl's env config in `metabonk train dreamer`."""
    import metabonk_gym  # noqa: F401  (registers the envs)

    return EpisodeScalars(gym.make(id, **kwargs), scalars_dir, start_step=int(scalars_step))
