"""World models: action-conditioned models of the next frames (`metabonk train world-model`,
`metabonk dream`, `TemporalStrip(predictor="world-model", model=PATH)`).

Modules: `model` (the net), `data` (episodes from Minari datasets or rollouts), `files` (weights
and JSON metadata), `train` (the run directory), `predictor` (the strip's predictor), `dream`
(imagined rollouts), `dreamer` (DreamerV3 through sheeprl: `metabonk train dreamer`). Importing
this package imports no torch; `model` and the modules that use it do.

>>> import metabonk_gym.worldmodel as wm
>>> wm.PREDICTOR_NAME
'world-model'
"""

from __future__ import annotations

#: The name `TemporalStrip(predictor=...)` knows the world-model predictor by.
PREDICTOR_NAME = "world-model"
#: Real frames a world model reads (t-1, t).
CONTEXT = 2
