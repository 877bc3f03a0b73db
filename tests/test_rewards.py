"""Reward terms, presets, and stable-retro's scenario.json semantics checked against stable-retro."""

from __future__ import annotations

import numpy as np
import pytest
from metabonk_gym.rewards import (
    Delta,
    DoneCondition,
    Event,
    Novelty,
    Penalty,
    RewardFunction,
    Survival,
    TimePenalty,
    build_reward,
    terms_from_scenario,
)

from metabonk_gym.gamedata import GameData
from metabonk_gym.gba.integration import Integration


def test_terms() -> None:
    assert Delta("x", 2.0)({"x": 1}, {"x": 4}) == 6.0
    assert Delta("x", 1.0, only="increase")({"x": 4}, {"x": 1}) == 0.0
    assert Penalty("hp", 0.5)({"hp": 10}, {"hp": 6}) == -2.0
    assert Penalty("hp", 0.5)({"hp": 6}, {"hp": 10}) == 0.0
    assert TimePenalty(0.1)({}, {}) == -0.1
    assert Survival(1.0, dead_variable="lost")({}, {"lost": 1}) == 0.0
    event = Event("keys", op="greater-or-equal", reference=2, weight=3.0)
    event.reset({"keys": 0})
    assert [event({"keys": a}, {"keys": b}) for a, b in [(0, 1), (1, 2), (2, 1), (1, 2)]] == [
        0,
        3.0,
        0,
        0,
    ]
    novelty = Novelty(("x", "y"), weight=1.0, cell_size=8)
    novelty.reset({"x": 0, "y": 0})
    assert [novelty({}, {"x": x, "y": 0}) for x in (3, 9, 12, 20)] == [0.0, 1.0, 0.0, 1.0]


def test_reward_function_reports_each_term() -> None:
    fn = RewardFunction({"d": Delta("s", 1.0), "t": TimePenalty(0.5)})
    fn.reset({"s": 0})
    assert fn.step({"s": 2}) == (1.5, {"d": 2.0, "t": -0.5})
    assert fn.step({"s": 2}) == (-0.5, {"d": 0.0, "t": -0.5})


def test_done_condition_ops() -> None:
    done = DoneCondition(
        {
            "done": {
                "condition": "all",
                "variables": {"a": {"op": "zero"}, "b": {"op": "greater-than", "reference": 3}},
            }
        }
    )
    assert not done({"a": 0, "b": 3}) and done({"a": 0, "b": 4})
    assert not DoneCondition({})({"a": 1})


@pytest.mark.parametrize("game", ["BonkQuest", "BonkArena"])
def test_presets_build_and_default_comes_from_scenario(game: str) -> None:
    integration = Integration.bundled(game)
    variables = set(integration.variables)
    presets = GameData(integration.folder).presets()
    for preset in ("default", "explore", "sparse"):
        assert build_reward(preset, game, integration.scenario, variables, presets).terms
    default = build_reward("default", game, integration.scenario, variables)
    assert set(default.terms) == set(integration.scenario["reward"]["variables"])


def test_reward_from_yaml_file(make_env, tmp_path) -> None:
    spec = tmp_path / "r.yaml"
    spec.write_text(
        "terms:\n  alive:\n    type: survival\n    weight: 0.5\n  hp:\n    type: penalty\n    variable: hp\n"
    )
    env = make_env("MetaBonk/BonkArena-v0", reward=str(spec))
    env.reset(seed=0)
    _, reward, _, _, info = env.step(0)
    assert set(info["reward_terms"]) == {"alive", "hp"}
    assert reward == pytest.approx(sum(info["reward_terms"].values()))


PENALTY_SCENARIO = {
    "reward": {
        "variables": {
            "hp": {"reward": 0.1, "penalty": 0.5},
            "kills": {"reward": 1.0},
            "level": {"reward": 2.0, "op": "greater-than", "reference": 0},
        }
    }
}


@pytest.mark.parametrize("custom", [False, True], ids=["shipped", "penalty-and-op"])
def test_scenario_reward_matches_stable_retro(tmp_path, custom: bool) -> None:
    """Our reading of scenario.json gives the reward stable-retro's own GameData computes."""
    import json

    import stable_retro as retro

    from metabonk_gym.gba.buttons import buttons_to_mask, mask_to_retro

    integration = Integration.bundled("BonkArena")
    scenario_path = integration.folder / "scenario.json"
    scenario = integration.scenario
    if custom:
        scenario = PENALTY_SCENARIO
        scenario_path = tmp_path / "scenario.json"
        scenario_path.write_text(json.dumps(scenario))
    data = retro.data.GameData()
    data.load(str(integration.folder / "data.json"), str(scenario_path))
    em = retro.RetroEmulator(str(integration.rom_path))
    try:
        em.configure_data(data)
        fn = RewardFunction(terms_from_scenario(scenario))
        names = list(fn.variables)
        rng = np.random.default_rng(0)
        combos = integration.discrete_actions
        for _ in range(30):  # boot
            em.step()
        data.update_ram()
        fn.reset({n: data.lookup_value(n) for n in names})
        ours, theirs = [], []
        for _step in range(600):
            em.set_button_mask(
                mask_to_retro(buttons_to_mask(combos[int(rng.integers(len(combos)))])), 0
            )
            for _ in range(4):
                em.step()
            data.update_ram()
            theirs.append(data.current_reward())
            ours.append(fn.step({n: data.lookup_value(n) for n in names})[0])
        assert np.allclose(ours, theirs, atol=1e-5)
        assert any(r != 0 for r in theirs), "the trajectory should earn some reward"
        if custom:
            assert any(r < 0 for r in theirs), "HP loss should be penalised"
    finally:
        del em


@pytest.mark.parametrize("preset", ["survival", "explore"])
def test_arena_survival_pays_for_play_not_for_menu_time(make_env, preset: str) -> None:
    """BonkArena's clock stops in the level-up menu: a bonus per step would pay an agent for
    sitting in menus, so the presets pay per frame of play instead."""
    env = make_env("MetaBonk/BonkArena-v0", reward=preset)
    _, info = env.reset(seed=3)
    rng = np.random.default_rng(0)
    in_menu, in_play = [], []
    for _ in range(3000):
        was_open = info["menu_open"]
        action = 0 if was_open else int(rng.integers(1, env.action_space.n))
        _, _, terminated, truncated, info = env.step(action)
        if was_open and info["menu_open"]:
            in_menu.append(info["reward_terms"]["alive"])
        elif not was_open and not info["menu_open"] and not info["lost"]:
            in_play.append(info["reward_terms"]["alive"])
        if terminated or truncated or len(in_menu) >= 5:
            break
    assert len(in_menu) >= 5, "no level-up menu reached"
    assert in_menu == [0.0] * len(in_menu)
    assert in_play and min(in_play) == pytest.approx(0.01)  # 4 frames of play x 0.0025
