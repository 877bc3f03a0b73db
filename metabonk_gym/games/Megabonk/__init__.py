"""The Megabonk game folder: its data files and `game.py` (loaded through `GameData.module()`).

A package so that the folder installs with metabonk-gym; it has no ROM integration (the game runs
outside, over BonkLink) and no scripted expert: the think adapter's oracle and follower play it.

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> megabonk = GameData(bundled_game_folder("Megabonk"))
>>> sorted(megabonk.presets()), (megabonk.folder / "data.json").exists()
(['default', 'survival'], False)
>>> game = megabonk.module()
>>> game.Adapter.__name__, game.Follower.__name__, hasattr(game, "Expert")
('MegabonkAdapter', 'MegabonkFollower', False)
"""
