"""Reward presets of the bundled games (`default` always comes from the game's scenario.json)."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "BonkQuest": {
        # Explore: new cells and rooms, keys, chests; HP loss hurts; winning pays most.
        "explore": {
            "novelty": {
                "type": "novelty",
                "keys": ["room", "player_x", "player_y"],
                "weight": 0.02,
            },
            "rooms": {
                "type": "delta",
                "variable": "rooms_visited",
                "weight": 1.0,
                "only": "increase",
            },
            "keys": {"type": "delta", "variable": "keys", "weight": 0.5, "only": "increase"},
            "chests": {"type": "delta", "variable": "chests", "weight": 0.3, "only": "increase"},
            "hp": {"type": "penalty", "variable": "hp", "weight": 0.1},
            "won": {"type": "event", "variable": "won", "weight": 10.0},
        },
        # Sparse: 1 for winning, -1 for losing, nothing else.
        "sparse": {
            "won": {"type": "event", "variable": "won", "weight": 1.0},
            "lost": {"type": "event", "variable": "lost", "weight": -1.0},
        },
        # Room 1: take the key, leave through the door; used by the PPO benchmark.
        "room1": {
            "key": {
                "type": "event",
                "variable": "keys",
                "op": "greater-or-equal",
                "reference": 1,
                "weight": 1.0,
            },
            "leave": {
                "type": "event",
                "variable": "rooms_visited",
                "op": "greater-or-equal",
                "reference": 2,
                "weight": 2.0,
            },
            "novelty": {
                "type": "novelty",
                "keys": ["room", "player_x", "player_y"],
                "weight": 0.01,
            },
            "hp": {"type": "penalty", "variable": "hp", "weight": 0.1},
            "time": {"type": "time_penalty", "weight": 0.001},
        },
    },
    "BonkArena": {
        "explore": {
            "novelty": {
                "type": "novelty",
                "keys": ["player_x", "player_y"],
                "cell_size": 16,
                "weight": 0.01,
            },
            # Paid per frame of play (the game's clock), not per step: the clock stops in the
            # level-up menu, so lingering in a menu earns nothing (a per-step bonus taught PPO to
            # sit in menus).
            "alive": {
                "type": "delta",
                "variable": "time_frames",
                "weight": 0.0025,
                "only": "increase",
            },
            "kills": {"type": "delta", "variable": "kills", "weight": 0.1, "only": "increase"},
            "hp": {"type": "penalty", "variable": "hp", "weight": 0.05},
            "won": {"type": "event", "variable": "won", "weight": 10.0},
        },
        "sparse": {
            "won": {"type": "event", "variable": "won", "weight": 1.0},
            "lost": {"type": "event", "variable": "lost", "weight": -1.0},
        },
        "survival": {
            # Paid per frame of play (the game's clock), not per step: the clock stops in the
            # level-up menu, so lingering in a menu earns nothing (a per-step bonus taught PPO to
            # sit in menus).
            "alive": {
                "type": "delta",
                "variable": "time_frames",
                "weight": 0.0025,
                "only": "increase",
            },
            # A light HP penalty: a whole bar is lost by every death anyway, and at 0.05 per HP
            # (-5 a run) play was worth about nothing, so PPO stalled in the (safe) menus.
            "hp": {"type": "penalty", "variable": "hp", "weight": 0.01},
            "level": {"type": "delta", "variable": "level", "weight": 0.2, "only": "increase"},
            "lost": {"type": "event", "variable": "lost", "weight": -1.0},
        },
    },
}
