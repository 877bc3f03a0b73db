"""Benchmark of the Megabonk env against `bonklink-sim`: the same figures as `metabonk bench bonklink`.

* lockstep env steps per second, against a bare protocol client in the same process (>= 2000);
* the latency the env adds per tick in realtime mode (p95 < 1 ms).

Run ``python benchmarks/bench_bonklink.py [--steps 6000] [--json]``; the code is in
:mod:`metabonk_gym.bench.bonklink_speed`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metabonk_gym.bench.bonklink_speed import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
