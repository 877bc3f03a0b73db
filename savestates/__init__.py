"""Bundled savestates: `<Game>/<start>.state`, a stable-retro file for each named start of a game.

Package data: `Integration.bundled(game)` looks in `<Game>/` for the names `state=` accepts; each
file is a gzipped mGBA state taken at game seed 0 (`python scripts/make_savestates.py` remakes them).

>>> import gzip
>>> from metabonk_gym.gba.integration import Integration
>>> quest = Integration.bundled("BonkQuest")
>>> files = quest.savestate_files()
>>> sorted(files) == sorted(quest.starts), files["room3"].parent.parent.name
(True, 'savestates')
>>> len(gzip.decompress(files["room3"].read_bytes()))  # an mGBA state, uncompressed
397312
"""
