"""Agents: the scripted experts on the real games, make_agent, models, and the human keyboard agent."""

from __future__ import annotations

import numpy as np
import pytest

from metabonk_gym.agents.registry import agent_env_overrides, make_agent
from metabonk_gym.experts.base import AgentError, action_index
from metabonk_gym.training.rollout import run_episode


def test_bonkquest_expert_wins_the_whole_game(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", state="start", max_episode_steps=600)
    agent = make_agent("scripted", env)
    for seed in (0, 7):
        result = run_episode(env, agent, seed=seed)
        assert result.won and not result.lost, (seed, result.variables)
        # the sage was heard and every room visited on the way
        assert result.variables["talked"] >= 1 and result.variables["rooms_visited"] == 5
        assert result.length < 400


def test_bonkarena_expert_outlives_random(make_env) -> None:
    env = make_env("MetaBonk/BonkArena-v0", state="wave3", max_episode_steps=600)
    expert = make_agent("scripted", env)
    random = make_agent("random", env, seed=0)
    kept, lost = [], []
    for agent, out in ((expert, kept), (random, lost)):
        for seed in (1, 2):
            result = run_episode(env, agent, seed=seed)
            out.append(result.length if result.lost else 10_000 + result.variables["hp"])
    assert np.mean(kept) > np.mean(lost)


def test_make_agent_errors(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    with pytest.raises(AgentError, match="unknown agent 'expert'; use one of random, scripted"):
        make_agent("expert", env)
    with pytest.raises(AgentError, match="model file not found"):
        make_agent("missing/model.zip", env)
    with pytest.raises(AgentError, match="model file not found"):
        agent_env_overrides("missing/model.zip")
    assert action_index(env, {"RIGHT"}) == 4
    assert action_index(env, {"RIGHT", "B"}) == 4  # nearest combination without extra buttons
    assert action_index(env, set()) == 0


def test_human_agent_reads_the_keyboard(make_env) -> None:
    import pygame

    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0)
    human = make_agent("human", env)
    human.reset(obs, info)
    human.window.show(env.unwrapped.render(), "test")
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_RIGHT))
    assert human.act(obs, info) == 4
    pygame.event.post(pygame.event.Event(pygame.KEYUP, key=pygame.K_RIGHT))
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_x))
    assert human.act(obs, info) == 5  # X is the GBA A button
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    human.act(obs, info)
    assert human.window.closed
    human.window.close()
