"""The uCity game folder: µCity Advance 1.0.1 (AntonioND, GPL-3.0), a city builder, unmodified.

A package so that the folder installs with metabonk-gym. It holds data only (no `game.py`:
nothing in the training path runs game code): the ROM and its licences (`LICENSE`,
`LICENSE-art.txt`, `LICENSE-music.txt`, `AUTHORS.md` with the source at the v1.0.1 tag), the
RAM map found with `metabonk ram ...` (`search.sh` re-finds it), start states past the menus
made with `metabonk integrate state` (`starts.sh` rebuilds them), the default reward (population
growth), presets, training defaults, milestones, the game card and the teacher-free figure's
spec (`learning.yaml`).

>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> city = GameData(bundled_game_folder("uCity"))
>>> city.defaults()["state"], sorted(city.presets())[:2]
('random_map', ['growth', 'thrift'])
>>> city.milestones()[0]["variable"]
'population'
"""
