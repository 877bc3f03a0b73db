"""`PauseToThink`: triggers, pause and async modes, timeouts, info, observations, decision log."""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from metabonk_gym.games.BonkQuest.game import quest_advice
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.follower import make_follower
from metabonk_gym.think.pause_to_think import DirectorOptions, EngineOptions, PauseToThink
from metabonk_gym.think.prompts import HistoryItem
from metabonk_gym.think.strategist import Strategist, ThinkResult
from metabonk_gym.think.testing import write_tiny_llama
from metabonk_gym.think.view import GameView
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.wrapstack import normalize_wrappers


class SlowOracle(Strategist):
    """The oracle's advice after `delay_s` seconds, from a worker thread (like a real model)."""

    name = "slow-oracle"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.pool = cf.ThreadPoolExecutor(1)
        self.asked: list[str] = []

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        self.asked.append(trigger)

        def answer() -> ThinkResult:
            time.sleep(self.delay_s)
            return ThinkResult(quest_advice(view), self.delay_s)

        return self.pool.submit(answer)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def play(env: PauseToThink, steps: int, seed: int = 0) -> tuple[list[dict], dict]:
    """Drive the wrapped env with the follower acting on info["directive"]."""
    follower = make_follower(env)
    obs, info = env.reset(seed=seed)
    infos = [info]
    for i in range(steps):
        view = GameView.capture(env, info, i, obs)
        directive = Directive(**info["directive"])
        obs, _, terminated, truncated, info = env.step(follower.act(view, directive))
        infos.append(info)
        if terminated or truncated:
            break
    return infos, info


def test_oracle_directives_win_bonkquest_through_the_wrapper(make_env, tmp_path: Path) -> None:
    env = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine="oracle", log_dir=tmp_path / "log")
    infos, last = play(env, 1200)
    assert last["won"] == 1
    think = last["think"]
    assert think["calls"] >= 8 and think["fallbacks"] == 0 and think["last_error"] is None
    assert think["success_rate"] is not None and think["success_rate"] > 0.8
    assert {"calls", "fallbacks", "last_latency_s", "last_error"} <= set(think)
    env.close()
    lines = [json.loads(x) for x in (tmp_path / "log" / "decisions.jsonl").read_text().splitlines()]
    calls = [x for x in lines if x["type"] == "call"]
    outcomes = [x for x in lines if x["type"] == "outcome"]
    assert lines[0]["type"] == "meta" and "BonkQuest" in lines[0]["system_prompt"]
    assert len(calls) == think["calls"] and len(outcomes) == len(calls)  # closing ends the last one
    assert {"start", "new_room"} <= {c["trigger"] for c in calls}
    assert all((tmp_path / "log" / c["frame"]).is_file() for c in calls)
    done = [o for o in outcomes if o["status"] == "done"]
    assert done and any(o["reward"] > 0 for o in done)


def test_observation_space_and_info(make_env) -> None:
    env = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine="oracle")
    assert isinstance(env.observation_space, gym.spaces.Dict)
    obs, info = env.reset(seed=4)
    assert env.observation_space.contains(obs)
    assert obs["directive"][env.adapter.spec.actions.index(info["directive"]["action"])] == 1.0
    obs, *_, info = env.step(0)
    assert env.observation_space.contains(obs)
    assert info["directive"]["source"] == "oracle"
    assert env.spec is not None  # RecordConstructorArgs makes the wrapper spec serialisable
    env.close()
    plain = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine="oracle", directive_in_obs=False)
    obs, _ = plain.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    plain.close()


def test_option_objects_and_the_keyword_form_build_the_same_wrapper(make_env, tmp_path) -> None:
    keywords = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"),
        engine="oracle",
        game_card="Collect the gems.",
        profile="full",
        mode="async",
        timeout_s=3.0,
        think_every=5,
        log_dir=tmp_path / "a",
        follow_weight=1.0,
        seed=2,
        temperature=0.5,
        api_key="secret",
    )
    objects = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"),
        EngineOptions(
            "oracle", game_card="Collect the gems.", profile="full", extra={"temperature": 0.5}
        ),
        DirectorOptions(mode="async", timeout_s=3.0, think_every=5, log_dir=tmp_path / "b"),
        follow_weight=1.0,
        seed=2,
    )
    spec_a = {**keywords._saved_kwargs, "log_dir": None}
    spec_b = {**objects._saved_kwargs, "log_dir": None}
    assert spec_a == spec_b and list(spec_a) == list(spec_b)  # the keyword form, in either case
    assert spec_a["temperature"] == 0.5 and "api_key" not in spec_a  # no secret in the spec
    assert keywords.engine_options.extra["api_key"] == "secret"  # (the engine still gets it)
    for env in (keywords, objects):
        assert env.director.mode == "async" and env.director.timeout_s == 3.0
        assert env.director.think_every == 5 and env.follower is not None
    assert keywords.reset(seed=1)[1]["directive"] == objects.reset(seed=1)[1]["directive"]
    # keywords replace the objects' fields; a config lists the keyword form's names
    mixed = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"), "oracle", DirectorOptions(mode="async"), think_every=7
    )
    assert mixed.director.mode == "async" and mixed.director.think_every == 7
    assert normalize_wrappers([{"name": "pause_to_think", "timeout_s": 2, "mode": "async"}])
    with pytest.raises(ConfigError, match="did you mean 'timeout_s'"):
        normalize_wrappers([{"name": "pause_to_think", "timeout": 2}])
    for env in (keywords, objects, mixed):
        env.close()
    metas = [
        json.loads((tmp_path / d / "decisions.jsonl").read_text().splitlines()[0]) for d in "ab"
    ]
    assert metas[0]["system_prompt"] == metas[1]["system_prompt"]
    assert "Collect the gems." in metas[0]["system_prompt"]


def test_stacks_on_dict_observation_wrappers(make_env) -> None:
    from metabonk_gym.wrappers import TileTokens

    env = PauseToThink(TileTokens(make_env("MetaBonk/BonkQuest-v0")), engine="oracle")
    obs, info = env.reset(seed=0)
    assert "directive" in obs and set(obs) - {"directive"} == set(env.env.observation_space.spaces)
    assert env.observation_space.contains(obs)
    env.close()


def test_a_deadline_that_keeps_running_out_grows_up_to_its_cap(make_env) -> None:
    # a deadline calibrated on an idle machine (0.1 s) meets a model that now takes 0.25 s:
    # after half of 4 calls time out it grows 1.5x, until answers arrive (0.1 -> 0.15 -> 0.225
    # -> 0.3375), never past max_timeout_s; without a cap it stays where it was
    def run(max_timeout_s: float | None, steps: int) -> tuple[PauseToThink, list[float], dict]:
        slow = SlowOracle(delay_s=0.25)
        env = PauseToThink(
            make_env("MetaBonk/BonkQuest-v0"),
            engine=slow,
            timeout_s=0.1,
            max_timeout_s=max_timeout_s,
            think_every=1,
            cooldown_steps=1,
        )
        env.reset(seed=0)
        deadlines = []
        for _ in range(steps):
            *_, info = env.step(0)
            deadlines.append(env.director.timeout_s)
            time.sleep(0.3)  # a timed-out answer finishes before the next call (one worker)
        env.close()
        return env, deadlines, info["think"]

    env, deadlines, think = run(max_timeout_s=0.34, steps=20)
    assert deadlines == sorted(deadlines) and deadlines[0] == pytest.approx(0.1)
    # 0.1 x 1.5^3 = 0.3375, then the cap (0.34) if a loaded machine made more answers late
    assert deadlines[-1] in (pytest.approx(0.3375), pytest.approx(0.34))
    assert env.strategist.delay_s < deadlines[-1]  # answers arrive in time now
    assert think["calls"] > think["fallbacks"] >= 6
    env, deadlines, think = run(max_timeout_s=None, steps=8)
    assert set(deadlines) == {0.1} and think["fallbacks"] == think["calls"]
    with pytest.raises(ValueError, match="max_timeout_s must be >= timeout_s"):
        PauseToThink(
            make_env("MetaBonk/BonkQuest-v0"), engine="oracle", timeout_s=2, max_timeout_s=1
        )


def test_pause_mode_never_waits_longer_than_timeout(make_env) -> None:
    slow = SlowOracle(delay_s=2.0)
    env = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"), engine=slow, timeout_s=0.3, cooldown_steps=2
    )
    started = time.monotonic()
    _, info = env.reset(seed=0)
    assert time.monotonic() - started < 1.0
    assert info["directive"]["source"] == "fallback"
    assert info["think"]["fallback_reasons"] == {"timeout": 1}
    assert "no answer within 0.3 s" in info["think"]["last_error"]
    worst = 0.0
    for _ in range(30):
        t0 = time.monotonic()
        *_, info = env.step(0)
        worst = max(worst, time.monotonic() - t0)
    assert worst < 0.8  # each step waits at most timeout_s for a new directive
    assert info["think"]["fallbacks"] == info["think"]["calls"] >= 2
    env.close()


def test_async_mode_keeps_stepping_and_records_the_delay_in_frames(make_env) -> None:
    slow = SlowOracle(delay_s=2.0)
    env = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine=slow, mode="async", timeout_s=10)
    obs, info = env.reset(seed=0)
    assert info["think"]["pending"] and info["directive"]["source"] == "fallback"
    worst, steps = 0.0, 0
    while info["directive"]["source"] != "oracle":
        t0 = time.monotonic()
        obs, _, _, _, info = env.step(0)
        worst = max(worst, time.monotonic() - t0)
        steps += 1
        time.sleep(0.005)
        assert steps < 100_000
    assert worst < 1.0  # no step waited for the model's 2 s (a generous bound on a loaded CPU)
    assert info["think"]["latency_frames_p50"] == steps * 4  # frameskip 4
    assert info["think"]["calls"] == 1 and info["think"]["fallbacks"] == 0
    env.close()


def test_periodic_trigger_and_cooldown(make_env) -> None:
    slow = SlowOracle(delay_s=0.0)
    env = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"), engine=slow, think_every=10, cooldown_steps=10
    )
    env.reset(seed=0)
    for _ in range(50):
        env.step(0)  # standing still: the oracle's directive never completes
    assert slow.asked[0] == "start" and slow.asked.count("periodic") == 5
    env.close()


@pytest.mark.llm
def test_tiny_gguf_end_to_end_in_the_wrapper(make_env, tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    env = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"),
        engine="llama_cpp",
        model_path=model,
        game_card="Pick up the key, open the door.",
        timeout_s=60,
        log_dir=tmp_path / "log",
    )
    _, info = env.reset(seed=0)
    assert info["think"]["calls"] == 1 and info["think"]["fallbacks"] == 0, info["think"][
        "last_error"
    ]
    assert info["directive"]["source"] == "model"
    for _ in range(6):
        *_, info = env.step(0)
    env.close()
    record = [
        json.loads(x) for x in (tmp_path / "log" / "decisions.jsonl").read_text().splitlines()
    ][1]
    # BonkQuest's default (choice) profile: the answer is the number of an option
    assert record["raw"].strip().isdigit() and record["directive"]["source"] == "model"
    assert record["prompt_tokens"] > 100 and record["latency_s"] > 0


def test_model_that_cannot_load_raises_at_construction(make_env, tmp_path: Path) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "missing.gguf")):
        PauseToThink(env, engine="llama_cpp", model_path=tmp_path / "missing.gguf")
    with pytest.raises(ValueError, match="mode must be 'pause' or 'async'"):
        PauseToThink(env, engine="oracle", mode="later")


def test_hp_drop_triggers_a_new_directive(make_env) -> None:
    slow = SlowOracle(delay_s=0.0)
    env = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine=slow, cooldown_steps=1)
    env.reset(seed=0)
    env.step(0)
    env.unwrapped.write_variable("hp", 3)  # type: ignore[attr-defined]
    env.step(0)
    env.step(0)
    assert slow.asked == ["start", "hp_drop"]
    env.close()


def test_close_is_safe_with_a_request_in_flight(make_env) -> None:
    """A real engine (OpenAI over HTTP) with its request in flight to a server that reads it and
    never answers: the wrapper's close returns long before the request's deadline. (A test
    double's close would be non-blocking by construction and prove nothing.)"""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    arrived = threading.Event()
    held: list[socket.socket] = []

    def hold() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)  # the request arrived; no answer is ever sent
        held.append(conn)
        arrived.set()

    threading.Thread(target=hold, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    env = PauseToThink(
        make_env("MetaBonk/BonkQuest-v0"), engine="openai", base_url=url, mode="async",
        timeout_s=120,
    )  # fmt: skip
    try:
        env.reset(seed=0)
        assert arrived.wait(60), "the request never reached the server"
        t0 = time.monotonic()
        env.close()
        assert time.monotonic() - t0 < 30  # a quarter of the request's 120 s deadline
        assert threading.active_count() < 50
    finally:
        env.close()
        for conn in held:
            conn.close()
        listener.close()


@pytest.mark.llm
def test_async_mode_shows_the_model_the_temporal_strip(make_env, tmp_path: Path) -> None:
    from metabonk_gym.wrappers import TemporalStrip, strip_image

    from metabonk_gym.think.testing import write_tiny_pair

    model, proj = write_tiny_pair(tmp_path)
    inner = TemporalStrip(make_env("MetaBonk/BonkQuest-v0"), past=1, future=1, predictor="copy")
    env = PauseToThink(
        inner,
        engine="llama_cpp",
        model_path=model,
        mmproj_path=proj,
        mode="async",
        game_card="Find the key.",
        timeout_s=60,
        log_dir=tmp_path / "log",
    )
    obs, info = env.reset(seed=0)
    strategist = env.strategist
    view = GameView.capture(env, info, 0, obs)
    assert view.strip is not None and view.strip[1] == 1
    request = strategist.builder.build(view, [], "start", vision=True)  # type: ignore[attr-defined]
    import io

    from PIL import Image

    shown = np.asarray(Image.open(io.BytesIO(request.image_png)))
    assert shown.shape == strip_image(obs["strip"], past=1, columns=3).shape
    while info["think"]["pending"]:
        obs, *_, info = env.step(0)
        time.sleep(0.01)
    assert info["think"]["calls"] == 1 and info["think"]["latency_frames_p50"] is not None
    env.close()


def test_screen_text_map_from_the_wrappers(make_env) -> None:
    from metabonk_gym.think.prompts import screen_text_map

    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0)
    text_map = screen_text_map(env)
    assert text_map is not None
    text = text_map(GameView.capture(env, info, 0, obs))
    assert text is not None and "@" in text and "Player at" in text


def test_low_confidence_asks_again_after_the_cooldown(make_env) -> None:
    class Unsure(SlowOracle):
        def request(self, view, history, trigger, note=None):  # type: ignore[no-untyped-def]
            self.asked.append(trigger)
            d = quest_advice(view)
            unsure = Directive(d.goal, d.reasoning, d.action, d.target, d.duration_frames, 0.1)
            return self.pool.submit(lambda: ThinkResult(unsure, 0.0))

    unsure = Unsure(0.0)
    env = PauseToThink(make_env("MetaBonk/BonkQuest-v0"), engine=unsure, cooldown_steps=5)
    env.reset(seed=0)
    for _ in range(11):
        env.step(0)
    assert unsure.asked == ["start", "low_confidence", "low_confidence"]
    env.close()


def test_the_spec_records_engine_keyword_arguments_and_rebuilds_the_engine(
    tmp_path: Path,
) -> None:
    """Extra engine kwargs (here llama.cpp's n_ctx) are part of the wrapper's spec, so
    `gym.make(env.spec)` builds the same engine. (Megabonk: making it connects nowhere.)"""
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    env = PauseToThink(
        gym.make("MetaBonk/Megabonk-v0", port=1),
        engine="llama_cpp",
        model_path=model,
        n_ctx=1024,
        temperature=0.5,
    )
    assert env.strategist.engine.llm.n_ctx() == 1024  # type: ignore[attr-defined]
    assert env.spec is not None
    wrapper = env.spec.additional_wrappers[-1]
    assert wrapper.name == "PauseToThink"
    assert wrapper.kwargs["n_ctx"] == 1024 and wrapper.kwargs["temperature"] == 0.5
    assert wrapper.kwargs["model_path"] == str(model)
    env.close()
    rebuilt = gym.make(env.spec)
    try:
        assert isinstance(rebuilt, PauseToThink)
        engine = rebuilt.strategist.engine  # type: ignore[attr-defined]
        assert engine.llm.n_ctx() == 1024 and engine.temperature == 0.5
    finally:
        rebuilt.close()
