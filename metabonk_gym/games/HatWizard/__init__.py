"""The HatWizard game folder: The Hat Chooses the Wizard (MPL-2.0), a public GBA game's data.

Data only, no `game.py`: the integration (RAM variables, one start state per level, rewards,
milestones) was made with the project's own tools (`search.sh`), as a user would for any ROM.

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> hat = GameData(bundled_game_folder("HatWizard"))
>>> hat.defaults()["state"], [m["variable"] for m in hat.milestones()][:1], hat.module() is None
('level1', ['level'], True)
"""
