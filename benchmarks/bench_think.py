"""Benchmark of System 2 (`metabonk_gym.think`): the same figures as `metabonk bench think`.

* **ceiling**: the oracle strategist (reads RAM) with the `DirectiveFollower` wins BonkQuest in at
  least 90% of seeds: the most thinking can add with this System 1.
* **latency**: think calls per backend (in-process llama-cpp-python, text and vision; its server
  over loopback HTTP) on live game prompts, as p50/p95 seconds and as env steps per call against
  the env step time measured in the same process.

Run ``python benchmarks/bench_think.py [--seeds 50] [--calls 8] [--model M.gguf --mmproj F]`` or
call :func:`metabonk_gym.bench.think_speed.run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metabonk_gym.bench.think_speed import run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="BonkQuest seeds for the win rate")
    parser.add_argument("--calls", type=int, default=8, help="think calls per backend (0: skip)")
    parser.add_argument("--model", type=Path, default=None, help="GGUF to time (default: tiny)")
    parser.add_argument("--mmproj", type=Path, default=None, help="its vision projector")
    parser.add_argument("--no-server", action="store_true", help="skip the HTTP server")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    figures = run(args.seeds, args.calls, args.model, args.mmproj, server=not args.no_server)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        from metabonk_gym.utils import atomic_write_text

        atomic_write_text(args.out, text)
    return 0 if figures["oracle_win_rate"] >= 0.9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
