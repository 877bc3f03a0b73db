"""Benchmarks behind `metabonk bench ...`; each reports ratios against a baseline run in the
same process, because absolute timings on shared machines are noise.

>>> import pkgutil
>>> sorted(m.name for m in pkgutil.iter_modules(__path__))[:2]
['bonklink_speed', 'distributed_speed']
"""
