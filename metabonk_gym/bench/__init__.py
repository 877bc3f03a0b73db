"""Benchmarks behind `metabonk bench ...`; each reports ratios against a baseline run in the
same process, because absolute timings on shared machines are noise."""
