"""Observation wrappers (installed as metabonk_gym.wrappers)."""
