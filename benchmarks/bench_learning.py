"""The "proof that it learns" runs (`metabonk_gym.agents.proof`), each against a baseline
measured in the same process:

* **ppo-room1**: PPO from scratch on BonkQuest room1; target win rate >= 0.8 within 500k steps;
* **bc-room1**: BC from 200 scripted-expert episodes on 3 seeds (target >= 70% of the expert's
  mean return on the worst seed), then BC+PPO against PPO from scratch at equal env steps;
* **quest-full**: the whole BonkQuest from pixels, DAgger from the screen-only teacher, 3 seeds,
  scored by the game's own win on 50 seeds (target: median >= 0.8, worst >= 0.6);
* **arena**: BonkArena (state vector), DAgger from the scripted expert, 3 seeds, against a random
  agent on 30 seeds (target: survives 2x longer, 5:00 in >= 25% of games);
* **arena-ppo**: PPO on BonkArena for 1M steps against a random agent (target: survives 2x longer);
  **arena-bc**: the same, PPO starting from a BC clone of 16 scripted-expert episodes;
* **megabonk**: PPO on MetaBonk/Megabonk-v0 against lockstep `bonklink-sim` games it starts
  itself, then the model and a random agent on the same fresh games (target: survives longer).

Run `python benchmarks/bench_learning.py [--part ppo-room1 bc-room1 quest-full arena arena-ppo
arena-bc megabonk] [--out runs/proof] [--steps N] [--seeds N] [--small] [--json]`. Runs resume
where they stopped (same --out). On a 2-core CPU expect about 30-60 min for ppo-room1, ~20 min
for megabonk and ~25 min per arena-ppo part; TensorBoard: `tensorboard --logdir OUT`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metabonk_gym.agents.proof import PARTS, SEEDED_PARTS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", nargs="+", choices=sorted(PARTS), default=["ppo-room1", "bc-room1"]
    )
    parser.add_argument("--out", type=Path, default=Path("runs/proof"), help="folder of the runs")
    parser.add_argument(
        "--steps", type=int, default=None, help="env steps (default: each part's target)"
    )
    parser.add_argument("--seeds", type=int, default=3, help="bc-room1, quest-full, arena: seeds")
    parser.add_argument("--small", action="store_true", help="quest-full, arena: a tiny run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for part in args.part:
        kwargs: dict[str, Any] = {}
        if part in SEEDED_PARTS:
            kwargs["seeds"] = args.seeds
        if part in ("quest-full", "arena"):
            kwargs["size"] = "small" if args.small else "full"
        elif args.steps is not None:
            kwargs["finetune_steps" if part == "bc-room1" else "total_steps"] = args.steps
        results[part] = PARTS[part](args.out, **kwargs)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
