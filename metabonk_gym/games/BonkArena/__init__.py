"""The BonkArena game folder: its data files and `game.py` (loaded through `GameData.module()`).

A package so that the folder installs with metabonk-gym; generic code never imports it but
reads it through `GameData` (reward presets, training defaults, milestones, `game.py`'s classes).

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> arena = GameData(bundled_game_folder("BonkArena"))
>>> sorted(arena.presets()), [m["variable"] for m in arena.milestones()]
(['explore', 'survival'], ['level'])
>>> game = arena.module()
>>> game.Adapter.__name__, game.Follower.__name__, game.Expert.__name__
('ArenaAdapter', 'ArenaFollower', 'BonkArenaExpert')
"""
