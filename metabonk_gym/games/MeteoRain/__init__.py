"""The MeteoRain game folder: a public GBA game (Dr. Ludos, MIT) and its integration data.

MeteoRain is nobody's game here: the ROM ships unmodified (`AUTHORS.md`, `LICENSE`) and the
folder holds data only (no `game.py`: nothing in the training path knows the game's code). Its
RAM variables were found with `metabonk ram ...` and `search.sh` finds them again; the game is
Lua on BPCore-Engine, so each variable is a 32-bit Lua integer in the interpreter's heap.

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> meteo = GameData(bundled_game_folder("MeteoRain"))
>>> sorted(meteo.presets()), meteo.defaults()["state"], meteo.defaults()["reward"]
(['score', 'survival'], 'any', 'survival')
>>> import json
>>> info = json.loads((meteo.folder / "data.json").read_text())["info"]
>>> sorted(name for name, var in info.items() if var["type"] == "<i4")
['game_state', 'gameover_timer', 'player_x', 'score', 'ticks']
"""
