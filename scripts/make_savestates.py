"""Write the bundled games' savestates (`savestates/<Game>/<start>.state`) from their named starts.

Each start is a host command (gba/README.md) run with game seed 0, so the files are reproducible
and match what `reset(options={"state": name})` gives for that seed. Run after rebuilding a ROM:
    python scripts/make_savestates.py
"""

from __future__ import annotations

import gc

import gymnasium as gym

import metabonk_gym  # noqa: F401
from metabonk_gym.gba.integration import Integration, bundled_gba_games, savestates_dir


def main() -> None:
    for game in bundled_gba_games():
        integration = Integration.bundled(game)
        env = gym.make(f"MetaBonk/{game}-v0")
        for name in integration.starts:
            env.reset(seed=0, options={"state": name, "game_seed": 0})
            path = savestates_dir(game) / f"{name}.state"
            env.unwrapped.save_state(path)
            print(f"wrote {path}")
        env.close()
        del env
        gc.collect()


if __name__ == "__main__":
    main()
