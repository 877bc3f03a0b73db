"""Learning from gameplay video: videos to datasets, an inverse dynamics model, labels, rewards.

The chain (docs/video.md): `to_dataset` turns videos into frame sequences at the env's step rate
and screen; `train_idm` learns the action between two frames from Minari datasets with actions;
`label` writes a Minari dataset of a video dataset with the IDM's actions, which `train bc`
clones.

>>> from metabonk_gym.video.decode import parse_crop
>>> parse_crop("0,0,240,160").w
240
"""
