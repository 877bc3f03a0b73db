"""metabonk_gym.training: the functions behind `metabonk train` and `metabonk curriculum`
(evaluation, play and recording run agents: `metabonk_gym.agents`).

    train_ppo(env_id, run_dir, overrides={...}, resume=False, init_from=None)  -> TrainResult
    train_bc(env_id, dataset_id, run_dir, overrides={...})                      -> TrainResult
    run_curriculum(env_id, plan, run_dir, swarm=False)                          -> CurriculumResult
    resolve_config(env_id, config_file, overrides)                              -> TrainConfig

Names are imported on first use, so `import metabonk_gym.training` does not import torch.

>>> import metabonk_gym.training as training
>>> training.resolve_config("MetaBonk/BonkQuest-v0").state
'room1'
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "train_ppo": "metabonk_gym.training.ppo",
    "TrainResult": "metabonk_gym.training.ppo",
    "LearnLoop": "metabonk_gym.training.ppo",
    "train_bc": "metabonk_gym.training.bc",
    "run_curriculum": "metabonk_gym.training.curriculum",
    "load_plan": "metabonk_gym.training.curriculum",
    "resolve_config": "metabonk_gym.training.config",
    "TrainConfig": "metabonk_gym.training.config",
    "make_env": "metabonk_gym.training.envs",
    "make_train_venv": "metabonk_gym.training.envs",
    "load_dataset": "metabonk_gym.training.datasets",
    "DatasetWriter": "metabonk_gym.training.datasets",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'metabonk_gym.training' has no attribute {name!r}")
