"""A served `pause_to_think`'s deadline: measured ones may grow with the load, set ones stay.

`ThinkServer.timing` gives the envs' client entries the calibrated deadline (scaled by the slots
on a CPU) and, for a measured deadline only, `max_timeout_s`: the `Director` raises a deadline
that keeps running out, since the calibration ran before training loaded the machine.
"""

from __future__ import annotations

from metabonk_gym.think.calibrate import MAX_TIMEOUT_S, Calibration, Latency, think_timing
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.training.thinkserver import ThinkServer

QUEST = "MetaBonk/BonkQuest-v0"
LATENCY = Latency(cold_s=4.0, p50_s=0.8, p95_s=1.1, calls=5)


def found() -> Calibration:
    builder = PromptBuilder(adapter_for_name("BonkQuest"))
    return Calibration(think_timing(LATENCY, 4), LATENCY, cached=False, builder=builder)


def test_a_measured_deadline_may_grow_and_a_set_one_stays() -> None:
    measured = ThinkServer(QUEST, {"name": "pause_to_think", "serve": True}, n_envs=4)
    timing = measured.timing(found(), cpu_only=True)
    four_slots = Latency(cold_s=4.0, p50_s=3.2, p95_s=4.4, calls=5)
    assert timing == {
        "timeout_s": think_timing(four_slots, 4).timeout_s,  # 4 slots share the CPU
        "max_timeout_s": MAX_TIMEOUT_S,
    }
    fixed = ThinkServer(QUEST, {"name": "pause_to_think", "serve": True, "timeout_s": 5}, 4)
    assert fixed.timing(found(), cpu_only=True) == {}  # the entry's own deadline, fixed
