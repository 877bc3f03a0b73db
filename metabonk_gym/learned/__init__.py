"""Learned models of the screen: the network, its weights-only files, scoring frames, binding.

The video trainers (`metabonk_gym.video`) write these models and `make_env`
(`metabonk_gym.training.envs`) binds `learned` reward terms to them, so they live below both:
`model` (`IdmNet`, `NAME.pt` + `NAME.json` files read with `weights_only=True`), `scorer`
(`RewardModel`), `bind` (`bind_learned_terms(env)`); their error is `metabonk_gym.errors.ModelFileError`.

>>> from metabonk_gym.errors import ModelFileError
>>> issubclass(ModelFileError, ValueError)
True
"""
