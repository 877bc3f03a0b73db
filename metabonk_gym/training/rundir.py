"""Run directories live in `metabonk_gym.rundir` (the lowest layer, so the fine-tune in `think`
uses the same class as the trainers); this module keeps the old import path working.

>>> RunDir.__module__
'metabonk_gym.rundir'
"""

from __future__ import annotations

from metabonk_gym.rundir import METADATA_KEY as METADATA_KEY
from metabonk_gym.rundir import RunDir as RunDir
from metabonk_gym.rundir import check_state_field as check_state_field
from metabonk_gym.rundir import check_zip_sizes as check_zip_sizes
from metabonk_gym.rundir import model_metadata as model_metadata
from metabonk_gym.rundir import read_model_data as read_model_data
from metabonk_gym.rundir import read_model_metadata as read_model_metadata
from metabonk_gym.rundir import save_model as save_model
