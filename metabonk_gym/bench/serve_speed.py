"""`metabonk bench serve`: one model server shared by many envs; what batches and what does not.

One run, every figure measured in the same process against its own baseline:

* **model**: a random llama GGUF of 20.9M parameters (the tiny test model's 260-token byte
  vocabulary, 384 wide, 10 layers), written with `gguf` at the start (or `model_path=`).
* **clients**: 1, 4, 8 and 16 concurrent clients, each like one env (its own `OpenAIEngine`),
  send BonkQuest prompts back to back for `duration_s`, answers of at most 96 tokens under the
  directive's JSON-schema grammar (the random model fills them: a throughput measure). `prompt`:
  `"state"` (default) a system prompt with a one-line game card, the actions and the schema (2.1k
  byte tokens, cached per slot) and per call the step, the trigger and the RAM state of a live
  game (about 0.2k); `"compact"` adds the goals and where things are (about 0.5k a call);
  `"full"` is the real prompt (the whole game card, 4.5k, and the 30x20 text map, 1.2k a call);
  `"profile"` the compact prompt profile that small real models get (about 0.6k real tokens).
  The model's vocabulary is bytes, so these are 3-4x the tokens a real tokenizer would make; on a
  CPU, evaluating the per-call text is compute-bound and does not gain from batching, decoding
  does. Aggregate directives/s and tokens/s,
  p50/p95 latency, and the ratios to 1 client, for `llama-server` (`parallel` slots) and the
  `python` engine (llama-cpp-python's server, one request at a time).
* **envs**: env steps/s of `n_envs` BonkQuest envs (`make_vec`, one process each) with
  `PauseToThink(engine="openai", mode="async")` against llama-server vs the same envs without it.
* **images**: llama-server with a random vision projector (a LLaVA-1.5-style CLIP tower written
  with `gguf`, 32x32 pixels in 16 patches, its output as wide as the model) at 1 and 8 clients.
* **load**: the CPU count and the load average before and after (other work on the machine
  shares the cores with the server and the envs).

>>> summary([0.5, 0.25, 1.0], tokens=[10, 10, 20], wall_s=2.0)["p50_s"]
0.5
>>> rows = figure_records({"llama_server_16_throughput_x": 1.68, "llama_server_16_p95_x": 7.9,
...     "llama_server_16_p95_s": 12.77, "llama_server_1_p95_s": 1.62})
>>> [(r["id"], r["met"]) for r in rows]
[('batching', False), ('p95-16-clients', False)]
"""

from __future__ import annotations

import functools
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.think.directive import DirectiveError, parse_directive
from metabonk_gym.think.engines import EngineError, OpenAIEngine, ThinkRequest
from metabonk_gym.think.games import adapter_for, adapter_for_name
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.serve import ServerProcess
from metabonk_gym.think.testing import TinyModelConfig, write_tiny_llama, write_tiny_mmproj
from metabonk_gym.think.view import GameView
from metabonk_gym.vector import make_vec

ENV_ID = "MetaBonk/BonkQuest-v0"
#: The benchmark model: the tiny model's vocabulary, 20.9M parameters.
BENCH_MODEL = TinyModelConfig(n_embd=384, n_head=6, n_layer=10, n_ff=1280, n_ctx=16384, seed=0)
MAX_TOKENS = 96
LEVELS = (1, 4, 8, 16)


def n_parameters(cfg: TinyModelConfig, n_vocab: int = 260) -> int:
    """Parameters of a `write_tiny_llama` model with `cfg`.

    >>> round(n_parameters(BENCH_MODEL) / 1e6, 1)
    20.9
    """
    e, f = cfg.n_embd, cfg.n_ff
    per_layer = 4 * e * e + 3 * e * f + 2 * e
    return cfg.n_layer * per_layer + 2 * n_vocab * e + e


def summary(latencies: Sequence[float], tokens: Sequence[int], wall_s: float) -> dict[str, float]:
    """Aggregate figures of one load level."""
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] if ordered else 0.0
    return {
        "directives": float(len(ordered)),
        "directives_per_s": len(ordered) / wall_s if wall_s > 0 else 0.0,
        "tokens_per_s": sum(tokens) / wall_s if wall_s > 0 else 0.0,
        "p50_s": statistics.median(ordered) if ordered else 0.0,
        "p95_s": p95,
    }


#: The bench's one-line game card (prompts other than "full").
SHORT_CARD = "Find the key of each room (k), open the door (D) with it, avoid the enemies (E)."


PROMPTS = ("state", "compact", "full", "profile")


def bonkquest_requests(
    count: int = 16, seed: int = 0, vision: bool = False, prompt: str = "state"
) -> list[ThinkRequest]:
    """Think requests for `count` live BonkQuest states of a random walk (`prompt`: see the
    module docstring)."""
    if prompt not in PROMPTS:
        raise ValueError(f"prompt must be one of {', '.join(PROMPTS)}, not {prompt!r}")
    env = gym.make(ENV_ID)
    try:
        adapter = adapter_for(env)
        game_data = getattr(env.unwrapped, "game_data", None)
        card = game_data.game_card() if game_data is not None else None
        builder = PromptBuilder.for_env(
            env,
            adapter,
            card,
            max_tokens=MAX_TOKENS,
            profile="compact" if prompt == "profile" else "full",
        )
        if prompt not in ("full", "profile"):
            builder = PromptBuilder(
                adapter, SHORT_CARD, text_map=lambda view: None, max_tokens=MAX_TOKENS
            )
        rng = np.random.default_rng(seed)
        obs, info = env.reset(seed=seed)
        requests = []
        for step in range(count * 25):
            if step % 25 == 0:
                view = GameView.capture(env, info, step, obs)
                request = builder.build(view, [], "benchmark", vision)
                if prompt == "state":  # the step, the trigger and the RAM state line
                    request = replace(request, user=request.user.split("\n## Goals")[0])
                requests.append(request)
            obs, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))  # type: ignore[attr-defined]
            if terminated or truncated:
                obs, info = env.reset()
        return requests
    finally:
        env.close()


def client_load(
    base_url: str,
    requests: Sequence[ThinkRequest],
    clients: int,
    duration_s: float,
    vision: bool = False,
    timeout_s: float = 300.0,
) -> dict[str, float]:
    """`clients` threads, each with its own engine, send `requests` back to back until
    `duration_s` has passed (the last ones finish); aggregate throughput and latency."""
    latencies: list[float] = []
    tokens: list[int] = []
    failures, valid = [0], [0]
    lock = threading.Lock()
    start = time.monotonic()
    end = start + duration_s

    def client(index: int) -> None:
        engine = OpenAIEngine(base_url, vision=vision)
        try:
            i, first = index, True
            while first or time.monotonic() < end:  # every client asks at least once
                first = False
                t0 = time.monotonic()
                try:
                    answer = engine.complete(requests[i % len(requests)], t0 + timeout_s)
                except EngineError:
                    with lock:
                        failures[0] += 1
                    continue
                finally:
                    i += clients
                ok = _schema_valid(answer.text)
                with lock:
                    latencies.append(time.monotonic() - t0)
                    tokens.append(answer.completion_tokens or 0)
                    valid[0] += int(ok)
        finally:
            engine.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    figures = summary(latencies, tokens, time.monotonic() - start)
    figures["failures"] = float(failures[0])
    figures["schema_valid"] = valid[0] / len(latencies) if latencies else 0.0
    figures["tokens_per_directive"] = float(np.mean(tokens)) if tokens else 0.0
    return figures


def sweep(
    base_url: str,
    requests: Sequence[ThinkRequest],
    levels: Sequence[int],
    duration_s: float,
    prefix: str,
    progress: Callable[[str], None],
    vision: bool = False,
    warm_clients: int = 1,
) -> dict[str, float]:
    """`client_load` at every level, with the throughput and p95 ratios against 1 client."""
    # put the constant system prompt in every slot's cache first (not timed)
    client_load(base_url, requests, warm_clients, 0.0, vision)
    out: dict[str, float] = {}
    base: dict[str, float] | None = None
    for level in levels:
        figures = client_load(base_url, requests, level, duration_s, vision)
        base = base or figures
        progress(
            f"{prefix} {level} clients: {figures['directives_per_s']:.2f} directives/s, "
            f"p50 {figures['p50_s']:.2f} s, p95 {figures['p95_s']:.2f} s"
        )
        for key, value in figures.items():
            out[f"{prefix}_{level}_{key}"] = value
        if level != levels[0] and base["directives_per_s"] > 0 and base["p95_s"] > 0:
            ratio = figures["directives_per_s"] / base["directives_per_s"]
            out[f"{prefix}_{level}_throughput_x"] = ratio
            out[f"{prefix}_{level}_p95_x"] = figures["p95_s"] / base["p95_s"]
    return out


def env_steps_per_s(
    n_envs: int, seconds: float, base_url: str | None, timeout_s: float = 30.0
) -> dict[str, float]:
    """Env steps/s of `n_envs` BonkQuest envs (one process each) with random actions for
    `seconds`, with `PauseToThink(engine="openai", mode="async")` (the bench's short game card)
    when `base_url` is given; also the directives the envs got from the model meanwhile."""
    wrappers: list[Any] = []
    if base_url is not None:
        wrappers.append(
            functools.partial(
                PauseToThink,
                engine="openai",
                base_url=base_url,
                mode="async",
                timeout_s=timeout_s,
                think_every=30,
                max_tokens=MAX_TOKENS,
                game_card=SHORT_CARD,
            )
        )
    envs = make_vec(ENV_ID, n_envs, wrappers=wrappers)
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        n_actions = int(envs.single_action_space.n)  # type: ignore[attr-defined]
        for _ in range(10):  # warm-up (process start, first think calls)
            envs.step(rng.integers(n_actions, size=n_envs))
        start = time.perf_counter()
        steps, calls = 0, 0.0
        while time.perf_counter() - start < seconds:
            _, _, _, _, infos = envs.step(rng.integers(n_actions, size=n_envs))
            steps += 1
        elapsed = time.perf_counter() - start
        think = infos.get("think")
        if isinstance(think, dict) and "calls" in think:
            calls = float(np.sum(think["calls"]) - np.sum(think["fallbacks"]))
    finally:
        envs.close()
    return {"env_steps_per_s": n_envs * steps / elapsed, "model_directives": calls}


def _schema_valid(text: str) -> bool:
    try:
        parse_directive(text, adapter_for_name("BonkQuest").spec)
    except DirectiveError:
        return False
    return True


def _load() -> float:
    return float(os.getloadavg()[0])


def run(
    levels: Sequence[int] = LEVELS,
    duration_s: float = 15.0,
    engines: Sequence[str] = ("llama-server", "python"),
    n_envs: int = 16,
    env_seconds: float = 60.0,
    images: bool = True,
    prompt: str = "state",
    model_path: str | Path | None = None,
    mmproj_path: str | Path | None = None,
    n_gpu_layers: int | None = None,
    n_threads: int | None = None,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """All parts (see the module docstring); `n_envs=0` or `images=False` skip those parts.
    `model_path` (and `mmproj_path` for the image part) time a model of your own instead.
    `n_threads` (decoding and prompts) defaults to 1 on machines of up to 4 CPUs: the engines'
    default of one thread per core spin-waits at every layer, and on a machine busy with other
    work each step then waits for descheduled threads (measured here: 95 s instead of 6.9 s for
    one directive; llama.cpp uses its batch threads for any batch of more than one token, so
    this holds for batched decoding too)."""
    cpus = os.cpu_count() or 1
    if n_threads is None and cpus <= 4:
        n_threads = 1
    figures: dict[str, Any] = {"cpus": cpus, "load_before": _load(), "server_threads": n_threads}
    with tempfile.TemporaryDirectory(prefix="metabonk-bench-serve-") as tmp:
        if model_path is None:
            progress(f"writing a random {n_parameters(BENCH_MODEL) / 1e6:.1f}M-parameter llama")
            model_path = write_tiny_llama(Path(tmp) / "bench.gguf", BENCH_MODEL)
            figures["model_parameters"] = n_parameters(BENCH_MODEL)
            if images and mmproj_path is None:
                mmproj_path = write_tiny_mmproj(
                    Path(tmp) / "mmproj.gguf", text_n_embd=BENCH_MODEL.n_embd
                )
        figures["model"] = str(model_path)
        requests = bonkquest_requests(prompt=prompt)
        figures["prompt"] = prompt
        figures["prompt_system_bytes"] = len(requests[0].system.encode())
        figures["prompt_user_bytes"] = int(np.mean([len(r.user.encode()) for r in requests]))
        parallel = max(levels)
        for engine in engines:
            progress(f"{engine}: starting")
            with ServerProcess(
                model_path,
                engine=engine,
                parallel=parallel,
                n_ctx=8192,
                n_gpu_layers=n_gpu_layers,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                startup_timeout_s=300,
            ) as url:
                prefix = engine.replace("-", "_")
                warm = parallel if engine == "llama-server" else 1
                figures.update(
                    sweep(url, requests, levels, duration_s, prefix, progress, warm_clients=warm)
                )
                if engine == "llama-server" and n_envs > 0:
                    progress(f"{n_envs} envs with PauseToThink (async) against llama-server")
                    think = env_steps_per_s(n_envs, env_seconds, url)
                    progress(f"{n_envs} envs without PauseToThink")
                    plain = env_steps_per_s(n_envs, env_seconds, None)
                    figures["envs"] = n_envs
                    figures["envs_plain_steps_per_s"] = plain["env_steps_per_s"]
                    figures["envs_think_steps_per_s"] = think["env_steps_per_s"]
                    figures["envs_think_model_directives"] = think["model_directives"]
                    figures["envs_think_vs_plain_x"] = (
                        think["env_steps_per_s"] / plain["env_steps_per_s"]
                    )
        if images and mmproj_path is not None and "llama-server" in engines:
            progress("llama-server with the vision projector")
            vision_requests = bonkquest_requests(8, vision=True, prompt=prompt)
            image_levels = [1, 8]
            with ServerProcess(
                model_path,
                mmproj_path,
                engine="llama-server",
                parallel=8,
                n_ctx=8192,
                n_gpu_layers=n_gpu_layers,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                startup_timeout_s=300,
            ) as url:
                figures.update(
                    sweep(
                        url, vision_requests, image_levels, duration_s, "image", progress, True, 8
                    )
                )
    figures["load_after"] = _load()
    return figures


#: Targets: throughput at the most clients as a multiple of 1 client's, p95 latency there as a
#: multiple of 1 client's, and env steps/s of envs thinking async as a fraction of plain envs'.
THROUGHPUT_TARGET = Target(">=", 4.0, "x")
P95_TARGET = Target("<=", 3.0, "x")
ENVS_TARGET = Target(">=", 0.9, "x")


def _top(result: dict[str, Any], prefix: str) -> int | None:
    levels = [
        int(k.split("_")[-3])
        for k in result
        if k.startswith(prefix) and k.endswith("_throughput_x")
    ]
    return max(levels) if levels else None


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/serve.json` (ids as there)."""
    rows: list[dict[str, Any]] = []
    top = _top(result, "llama_server_")
    if top is not None:
        ratio = result[f"llama_server_{top}_throughput_x"]
        text = f"{ratio:.2f}x"
        if f"python_{top}_directives_per_s" in result:
            serial = result[f"python_{top}_directives_per_s"]
            text += f" ({result[f'llama_server_{top}_directives_per_s'] / serial:.1f}x llama-cpp-python's serial server at the same load)"
        name = f"llama-server's continuous batching at {top} concurrent clients vs one client, directives/s"
        rows.append({"id": "batching", "name": name, "value": round(ratio, 3), "unit": "x"})
        rows[-1] |= {
            "text": text,
            **THROUGHPUT_TARGET.record(ratio),
        }
        p95 = result[f"llama_server_{top}_p95_x"]
        text = f"{result[f'llama_server_{top}_p95_s']:.2f} s vs {result['llama_server_1_p95_s']:.2f} s = {p95:.1f}x"
        name = f"llama-server p95 latency at {top} clients vs 1 client"
        rows.append({"id": "p95-16-clients", "name": name, "value": round(p95, 2), "unit": "x"})
        rows[-1] |= {"text": text} | P95_TARGET.record(p95)
    if "envs_think_vs_plain_x" in result:
        ratio, n = result["envs_think_vs_plain_x"], result["envs"]
        name = f"{n} BonkQuest envs thinking in async mode: steps/s kept while the server shares their cores"
        text = f"{ratio:.2f}x ({result['envs_think_steps_per_s']:,.0f} vs {result['envs_plain_steps_per_s']:,.0f} env steps/s)"
        rows.append(
            {"id": "env-steps-thinking", "name": name, "value": round(ratio, 3), "unit": "x"}
        )
        rows[-1] |= {"text": text} | ENVS_TARGET.record(ratio)
    if "image_8_throughput_x" in result:
        ratio = result["image_8_throughput_x"]
        name = "image path (random projector, 16 image tokens a call), 8 clients vs 1, directives/s"
        rows.append({"id": "images", "name": name, "value": round(ratio, 3), "unit": "x"})
        rows[-1] |= {"target": None, "met": None}
    return rows
