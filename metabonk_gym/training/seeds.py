"""The suite's named seeds: where held-out evaluation starts and how DAgger spreads the seeds of
its collection rounds, so no module writes these numbers itself.

Training runs use small seeds (0, 1, 2, ...); evaluation episode i is reset with `EVAL_SEED + i`,
far above them, so an evaluated game is never one the agent trained on. DAgger's round k of a
run with seed s collects from `dagger_seed(s, k)`: runs and rounds never share a game.

>>> EVAL_SEED
100000
>>> dagger_seed(2, 0), dagger_seed(2, 1)
(2000006, 2010013)
"""

from __future__ import annotations

#: Evaluation episode i is reset with seed `EVAL_SEED + i`, for every agent (the fixed seeds).
EVAL_SEED = 100_000
#: DAgger: a run's seed times this is its first collection seed (runs far apart).
DAGGER_RUN_STRIDE = 1_000_003
#: DAgger: round k collects from the run's first seed plus k times this.
DAGGER_ROUND_STRIDE = 10_007


def dagger_seed(run_seed: int, k: int) -> int:
    """The first reset seed of DAgger's collection round `k` in a run seeded `run_seed`."""
    return run_seed * DAGGER_RUN_STRIDE + k * DAGGER_ROUND_STRIDE
