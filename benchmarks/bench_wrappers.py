"""Benchmark of the observation wrappers (the same figures as `metabonk bench tiles` and
`metabonk bench predictors`, from `metabonk_gym.bench.wrappers_speed`):

* **tile tokens**: `TileTokens` per step on the VRAM path and the pixel path, as ratios to the
  env step measured in the same loop (budgets: 0.3 ms and 2 ms);
* **predictors**: PSNR / SSIM at t+1..t+3 of linear / flow (/ learned) against `copy` on
  held-out episodes of BonkQuest and BonkArena, and their cost per step.

Run `python benchmarks/bench_wrappers.py [--model predictor.pt | --train-seconds 120] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metabonk_gym.bench.wrappers_speed import DEFAULT_ENVS, run_predictors, run_tiles  # noqa: E402


def _report(title: str, result: dict[str, Any]) -> str:
    lines = [title]
    for key, value in result.items():
        lines.append(
            f"  {key:<40} {value:.3f}" if isinstance(value, float) else f"  {key:<40} {value}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="env steps of the tile benchmark")
    parser.add_argument("--episodes", type=int, default=2, help="held-out episodes per game")
    parser.add_argument("--episode-steps", type=int, default=300)
    parser.add_argument("--model", type=Path, default=None, help="learned predictor to include")
    parser.add_argument(
        "--train-seconds", type=float, default=0.0, help="train one first (no --model)"
    )
    parser.add_argument("--skip-predictors", action="store_true")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for env_id in DEFAULT_ENVS:
        results[f"tiles {env_id}"] = run_tiles(env_id, steps=args.steps)
        print(_report(f"tiles {env_id}", results[f"tiles {env_id}"]))
    if not args.skip_predictors:
        results["predictors"] = run_predictors(
            DEFAULT_ENVS,
            args.episodes,
            args.episode_steps,
            args.model,
            args.train_seconds,
            log=print,
        )
        print(_report("predictors", results["predictors"]))
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
