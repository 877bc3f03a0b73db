"""metabonk_gym.training."""
