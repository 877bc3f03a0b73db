"""The oracle's decision log of a few BonkQuest episodes, for the tests that mix or fine-tune on
real logs.

Why: the mix, distill and fine-tune tests all need a real log written by the think agent with
the RAM-reading oracle, so the episode loop is written once.

>>> import tempfile, json
>>> from pathlib import Path
>>> folder = oracle_log(Path(tempfile.mkdtemp()) / "log", "room1", range(1), max_steps=20)
>>> json.loads((folder / "decisions.jsonl").read_text().splitlines()[0])["type"]
'meta'
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

from metabonk_gym.think.agent import make_think_agent

QUEST = "MetaBonk/BonkQuest-v0"


def oracle_log(
    folder: Path, state: str, seeds: range, max_steps: int = 120, room: int | None = None
) -> Path:
    """Play `seeds` from `state` with the oracle and the follower, logging every decision into
    `folder`; an episode ends at `max_steps`, at the game's end, or on leaving `room` if given."""
    env = gym.make(QUEST, state=state)
    agent = make_think_agent(env, model_path="oracle", log_dir=folder)
    try:
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            agent.reset(obs, info)
            for _ in range(max_steps):
                obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                if terminated or truncated or (room is not None and info["room"] != room):
                    break
    finally:
        agent.close()
        env.close()
    return folder
