"""metabonk_gym.think."""
