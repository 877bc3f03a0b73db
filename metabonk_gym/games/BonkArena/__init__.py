"""The BonkArena game folder: its data files and `game.py` (loaded through `GameData.module()`)."""
