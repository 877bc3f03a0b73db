"""`ExploreWorker`: Go-Explore's "return, then explore" inside each worker of the vector engine.

The explorer (`metabonk_gym.training.explore`) hands each env a job: cells to start from (their
compressed savestates), a step budget and the archive's changes since its last job. The worker
returns to each cell by loading its state (a `reset(options={"state": bytes})`, so the reward
and the time limit start over), explores with repeated random actions (each step keeps the last
action with probability `repeat_prob`, Go-Explore's exploration), and reports every cell it
reached that is new or better than its copy of the archive, with the savestate of that moment.
A whole job runs in the worker, so exploring costs the main process one message per job, not
one per step, and every env steps as fast as its core.

States are saved raw during a burst (10 us) and compressed once per cell at its end; a lost
game (`info["lost"]`) ends the burst and is never kept.

>>> import gymnasium as gym, metabonk_gym
>>> env = ExploreWorker(gym.make("MetaBonk/BonkQuest-v0", obs_type="grayscale", downscale=4))
>>> env.explore_describe()["n_actions"]
6
>>> env.explore_setup({"kind": "ram", "variables": {"room": 1, "player_x": 4}, "score": "score"})
>>> result = env.explore_run({"starts": [(-1, None, 0.0, 0)], "budget": 20, "seed": 0})
>>> result["steps"], result["bursts"][0]["cell"]
(20, -1)
>>> env.close()
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.errors import CorruptSavestateError, MetabonkError
from metabonk_gym.training.explore_archive import better
from metabonk_gym.training.explore_cells import Cells, RamCells, cells_from_dict

#: zlib level for savestates (mGBA's 388 KiB compress to ~4 KiB at level 1 in ~1 ms).
STATE_COMPRESSION = 1
#: A root start: no state, the env's own start with the archive's game seed.
ROOT = -1


def decompress_state(blob: bytes, max_bytes: int) -> bytes:
    """A compressed savestate, inflating at most `max_bytes` (a bigger one is refused).

    >>> decompress_state(zlib.compress(b"abc"), 10)
    b'abc'
    """
    inflater = zlib.decompressobj()
    try:
        state = inflater.decompress(blob, max_bytes)
    except zlib.error as exc:
        raise CorruptSavestateError(f"an archived savestate does not inflate: {exc}") from None
    if inflater.unconsumed_tail:
        raise CorruptSavestateError(f"an archived savestate inflates past {max_bytes} bytes")
    return state


class ExploreWorker(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Runs explorer jobs on the env it wraps (see the module docstring).

    Args:
        env: a GBA env (its `unwrapped` saves and loads states and reads RAM variables).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        base: Any = env.unwrapped
        if not (hasattr(base, "save_state") and hasattr(base, "integration")):
            raise MetabonkError(
                f"{type(base).__name__} cannot save and load states; the explorer runs on GBA "
                "envs (MetaBonk/BonkQuest-v0, MetaBonk/GBA-v0 with your integration, ...)"
            )
        self._base = base
        self.cells: Cells | None = None
        self.repeat_prob = 0.95
        self.burst_steps = 100
        self.start_state: str | None = None
        self.game_seed = 0
        self.known: dict[tuple[int, ...], tuple[float, int]] = {}
        self.explore_job: dict[str, Any] | None = None
        self._specs: list[tuple[int, str]] = []
        self._names: list[str] | None = None
        self._width = 0

    # ------------------------------------------------------------------ set-up
    def explore_describe(self) -> dict[str, Any]:
        """What the explorer must know about this env: RAM variables, ROM, actions, folder."""
        space = self.env.action_space
        if not isinstance(space, gym.spaces.Discrete) or not 1 <= int(space.n) <= 256:
            raise MetabonkError(
                "the explorer takes discrete actions (at most 256); make the env with "
                "action_space='discrete'"
            )
        integration = self._base.integration
        return {
            "variables": list(integration.variables),
            "rom_sha1": hashlib.sha1(self._base.rom_path.read_bytes()).hexdigest(),
            "n_actions": int(space.n),
            "frameskip": int(self._base.frameskip),
            "folder": str(integration.folder),
            "default_state": self._base.state_name,
            "max_state_bytes": int(self._base.backend.max_state_bytes),
        }

    def explore_setup(
        self,
        cells: dict[str, Any],
        repeat_prob: float = 0.95,
        burst_steps: int = 100,
        start_state: str | None = None,
        game_seed: int = 0,
    ) -> None:
        """Set the cells (`to_dict()` form), the exploration and the root start."""
        self.cells = cells_from_dict(cells)
        self.repeat_prob = float(repeat_prob)
        self.burst_steps = int(burst_steps)
        self.start_state = start_state
        self.game_seed = int(game_seed)
        variables = self._base.integration.variables
        names = list(self.cells.names)
        self._width = len(names)
        if self.cells.score is not None:
            names.append(self.cells.score)
        self._specs = [(variables[n].address, variables[n].type) for n in names]
        # the env reads its info variables every step anyway: take them from there when it has all
        self._names = names if set(names) <= set(self._base.info_names) else None
        self.known = {}

    # ------------------------------------------------------------------ jobs
    def explore_run(self, job: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a job (or the one set as `explore_job`): bursts from its starts, in order, until
        its step budget is spent. Returns the bursts (start cell, actions, cells found), the
        visit counts of every cell reached, and the steps taken."""
        job = job if job is not None else self.explore_job
        if job is None or self.cells is None:
            raise MetabonkError("explore_run before explore_setup and a job")
        if job.get("reset_known"):
            self.known = {}
        for key, score, length in job.get("updates", ()):
            self.known[tuple(key)] = (float(score), int(length))
        rng = np.random.default_rng(job.get("seed"))
        budget = int(job["budget"])
        seen: dict[tuple[int, ...], int] = {}
        bursts = []
        steps = 0
        for start in job["starts"]:
            if steps >= budget:
                break
            burst = self._burst(start, min(self.burst_steps, budget - steps), rng, seen)
            steps += len(burst["actions"])
            bursts.append(burst)
        return {"bursts": bursts, "seen": seen, "steps": steps}

    def _return(self, start: Sequence[Any]) -> tuple[Any, float]:
        """Load a start (a cell's state, or the root) as a new episode; its observation and
        score."""
        _, blob, score, _ = start
        if blob is None:
            options: dict[str, Any] = {"game_seed": self.game_seed}
            if self.start_state is not None:
                options["state"] = self.start_state
        else:
            options = {"state": decompress_state(blob, self._base.backend.max_state_bytes)}
        obs, _ = self.env.reset(options=options)
        if self.cells is not None and self.cells.score is not None:
            score = float(self._base.backend.read_many(self._specs)[-1])
        return obs, float(score)

    def _key(self, values: Sequence[int], obs: Any) -> tuple[int, ...]:
        cells = self.cells
        if isinstance(cells, RamCells):
            return cells.key(values[: self._width])
        assert cells is not None
        return cells.key(obs)

    def _burst(
        self,
        start: Sequence[Any],
        steps: int,
        rng: np.random.Generator,
        seen: dict[tuple[int, ...], int],
    ) -> dict[str, Any]:
        """Return to `start`, then explore for at most `steps` steps."""
        cell, _, _, length = start
        length = int(length)
        obs, score = self._return(start)
        read_many, specs, names = self._base.backend.read_many, self._specs, self._names
        summed = self.cells is None or self.cells.score is None
        found: dict[tuple[int, ...], tuple[float, int, int, bytes, bool]] = {}
        if cell == ROOT:  # the start itself is a cell
            key = self._key(read_many(specs), obs)
            self.known[key] = (score, length)
            found[key] = (score, length, 0, self._base.save_state(), False)
        n = int(self.env.action_space.n)  # type: ignore[attr-defined]
        actions: list[int] = []
        action = int(rng.integers(n))
        repeat = self.repeat_prob
        ended = "budget"
        for t in range(steps):
            if t and rng.random() >= repeat:
                action = int(rng.integers(n))
            obs, reward, terminated, truncated, info = self.env.step(action)
            actions.append(action)
            length += 1
            values = [info[n] for n in names] if names is not None else read_many(specs)
            score = score + float(reward) if summed else float(values[-1])
            if info.get("lost"):
                ended = "lost"
                break
            key = self._key(values, obs)
            seen[key] = seen.get(key, 0) + 1
            best = self.known.get(key)
            if best is None or better(score, length, best[0], best[1]):
                self.known[key] = (score, length)
                won = bool(info.get("won"))
                found[key] = (score, length, t + 1, self._base.save_state(), won)
            if terminated or truncated:
                ended = "won" if info.get("won") else "ended"
                break
        return {
            "cell": cell,
            "actions": np.asarray(actions, np.uint8),
            "found": [
                (key, s, n_steps, prefix, zlib.compress(state, STATE_COMPRESSION), won)
                for key, (s, n_steps, prefix, state, won) in found.items()
            ],
            "ended": ended,
        }

    # ------------------------------------------------------------------ demonstrations
    def explore_replay(
        self, actions: Sequence[int], every: int, game_seed: int, start_state: str | None
    ) -> dict[str, Any]:
        """Replay `actions` from the root start; the savestates and scores every `every` steps
        (and at the end), whether the game was won and, with RAM cells, the cell key at every
        step: a demonstration for the backward curriculum."""
        options: dict[str, Any] = {"game_seed": int(game_seed)}
        if start_state is not None:
            options["state"] = start_state
        self.env.reset(options=options)
        score_var = self.cells.score if self.cells is not None else None
        spec = self._specs[-1:] if score_var is not None else []
        states, scores, steps = [self._base.save_state()], [0.0], [0]
        total, won = 0.0, False
        ram = isinstance(self.cells, RamCells)
        keys = [self._ram_key()] if ram else []
        if spec:
            scores[0] = float(self._base.backend.read_many(spec)[0])
        for t, action in enumerate(actions, start=1):
            _, reward, terminated, truncated, info = self.env.step(int(action))
            total += float(reward)
            won = won or bool(info.get("won"))
            if ram:
                keys.append(self._ram_key())
            if t % every == 0 or t == len(actions):
                states.append(self._base.save_state())
                scores.append(float(self._base.backend.read_many(spec)[0]) if spec else total)
                steps.append(t)
            if (terminated or truncated) and t < len(actions):
                raise MetabonkError(
                    f"the demonstration's episode ended at step {t} of {len(actions)}: the replay "
                    "diverged from the archive (another ROM, start or game seed?)"
                )
        return {"states": states, "scores": scores, "steps": steps, "won": won, "keys": keys}

    def _ram_key(self) -> list[int]:
        """The RAM cell key of the state now."""
        values = self._base.backend.read_many(self._specs)
        return [int(v) for v in self._key(values, None)]
