"""The BonkQuest game folder: its data files and `game.py` (loaded through `GameData.module()`).

A package so that the folder installs with metabonk-gym; generic code never imports it but
reads it through `GameData` (reward presets, training defaults, milestones, `game.py`'s classes).

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> quest = GameData(bundled_game_folder("BonkQuest"))
>>> sorted(quest.presets()), quest.defaults()["state"]
(['explore', 'room1'], 'room1')
>>> game = quest.module()
>>> game.Adapter.__name__, game.Follower.__name__, game.Expert.__name__
('QuestAdapter', 'QuestFollower', 'BonkQuestExpert')
"""
