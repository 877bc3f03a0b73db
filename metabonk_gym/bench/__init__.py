"""Benchmarks behind `metabonk bench ...`; each reports ratios against a baseline run in the
same process, because absolute timings on shared machines are noise.

>>> import pkgutil
>>> names = {m.name for m in pkgutil.iter_modules(__path__)}
>>> {"vector_speed", "env_speed", "serve_speed"} <= names
True
"""
