"""metabonk_gym.experts."""
