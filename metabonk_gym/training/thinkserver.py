"""One model server for all envs of a training run: `pause_to_think` with `serve: true`.

What: a `wrappers:` entry `{name: pause_to_think, engine: llama_cpp, model_path: M, serve: true}`
asks the SB3 trainers (`make_train_venv`) to start one llama.cpp `llama-server` for the GGUF M
(None: the default model) on loopback, with one slot per env (`ServerProcess`, a child that dies
with the trainer; each slot's prompt cache filled with the game's system prompt before the
envs start), and to point every env of the vector env at it (`engine: openai`). Unless
the entry sets them, the think deadline and (in async mode) the cooldown come from the model's
latency measured on this machine (`metabonk_gym.think.calibrate`, cached per model, game and
machine), scaled by the slots on a CPU-only server (`ThinkServer.timing`). `close_venv` stops the server with the envs. The run's `config.yaml` keeps the entry
as written (no port), so a resume starts a new server; where no trainer serves it (`eval`,
`play`, a probe) the entry is an in-process model in each env (`serve` is dropped).
Why: each env worker loading its own copy would hold n models and n prompt caches on the same
cores; one server batches the envs' requests over its slots (docs/thinking.md, "One model,
many envs").

>>> served_entry([{"name": "pause_to_think", "engine": "oracle"}]) is None
True
>>> served_entry([{"name": "pause_to_think", "engine": "llama_cpp", "serve": True}])["engine"]
'llama_cpp'
>>> client_entry({"name": "pause_to_think", "serve": True, "model_path": "m.gguf", "n_ctx": 2048,
...               "mode": "async"}, "http://127.0.0.1:9/v1", timeout_s=2.5, cooldown_steps=12)
{'name': 'pause_to_think', 'mode': 'async', 'engine': 'openai', 'base_url': 'http://127.0.0.1:9/v1', 'timeout_s': 2.5, 'cooldown_steps': 12}
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.think.calibrate import (
    MAX_TIMEOUT_S,
    Calibration,
    calibrate_model,
    think_timing,
    warm_up_slots,
)
from metabonk_gym.think.engines import OpenAIEngine
from metabonk_gym.think.models import resolve_model
from metabonk_gym.think.serve import ServerProcess
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.wrapstack import SERVE, THINK, WrapperSpec, normalize_wrappers

#: Options of a served entry that belong to the in-process model, not to the envs' client.
MODEL_OPTIONS = ("model_path", "n_ctx", "n_threads", "n_gpu_layers", "chat_handler", SERVE)
#: Context per server slot: the choice prompt is about 430 tokens, an answer at most 256.
SLOT_CTX = 2048
#: Loading the model (and a cold CPU) may take this long before the server answers.
STARTUP_S = 300.0

log = logging.getLogger(__name__)


def served_entry(specs: Sequence[WrapperSpec] | None) -> WrapperSpec | None:
    """The stack's `pause_to_think` entry with `serve: true` (None: there is none)."""
    for spec in specs or ():
        if spec.get("name") == THINK and spec.get(SERVE):
            return spec
    return None


def client_entry(spec: WrapperSpec, base_url: str, **timing: Any) -> WrapperSpec:
    """`spec` as the envs' client of the server at `base_url`: the model's own options dropped,
    `timing` (`timeout_s`, `cooldown_steps`) added where `spec` does not set it."""
    out = {k: v for k, v in spec.items() if k not in MODEL_OPTIONS and k != "engine"}
    out.update(engine="openai", base_url=base_url)
    for key, value in timing.items():
        out.setdefault(key, value)
    return out


class ThinkServer:
    """The server of one training run's served `pause_to_think`; `start` returns the config
    whose wrappers point the envs at it, `stop` ends it (safe twice).

    Args:
        env_id: the env the run trains on (its game's prompts are timed).
        spec: the served `pause_to_think` entry (`served_entry`).
        n_envs: envs that will ask it (one slot each).
        frameskip: game frames per env step (the async cooldown is in env steps).
        log_path: keep the server's output there (default: a temp file, quoted in errors).
    """

    def __init__(
        self,
        env_id: str,
        spec: WrapperSpec,
        n_envs: int,
        frameskip: int = 4,
        log_path: str | Path | None = None,
    ) -> None:
        if spec.get("engine", "llama_cpp") != "llama_cpp":
            raise ConfigError(
                f"pause_to_think serve: true serves a GGUF to the envs; it needs engine: "
                f"llama_cpp, not {spec.get('engine')!r} [config]"
            )
        self.env_id = env_id
        self.spec = spec
        self.model_path = Path(resolve_model(spec.get("model_path"))).expanduser()
        self.n_envs = max(1, int(n_envs))
        self.frameskip = int(frameskip)
        self.log_path = log_path
        self.process: ServerProcess | None = None

    def calibrate(self) -> Calibration:
        """The model's latency here on the game's prompts (cached per model, game, machine)."""
        env = gym.make(self.env_id)
        try:
            return calibrate_model(env, self.model_path, frameskip=self.frameskip)
        finally:
            env.close()

    def timing(self, found: Calibration, cpu_only: bool = True) -> dict[str, Any]:
        """`timeout_s` and (async mode) `cooldown_steps` for the keys the entry leaves out: the
        calibration's rule (`think_timing`) on its latency, times the slots when the server
        decodes on the CPU (`cpu_only`): there one answer shares the cores with up to n-1
        others, and decoding n sequences in one pass costs nearly n times one
        (docs/thinking.md, "Benchmark"); measured here, 4 BonkQuest envs on one server
        answered in 9 s at a p50 of 1.3-3.2 s alone, and a third of the calls missed the
        single-stream deadline."""
        wanted = ["timeout_s"] + (["cooldown_steps"] if self.spec.get("mode") == "async" else [])
        scale = self.n_envs if cpu_only else 1
        latency = dataclasses.replace(
            found.latency, p50_s=found.latency.p50_s * scale, p95_s=found.latency.p95_s * scale
        )
        log.info(
            "think server: %s p50 %.2f s alone (%s), x%d slots -> %s",
            self.model_path.name,
            found.latency.p50_s,
            "cached" if found.cached else "measured",
            scale,
            think_timing(latency, self.frameskip),
        )
        timing = dataclasses.asdict(think_timing(latency, self.frameskip))
        if "timeout_s" not in self.spec:  # measured before training loads the machine: the
            # envs may let it grow (a deadline the entry sets stays as set)
            timing["max_timeout_s"] = max(MAX_TIMEOUT_S, timing["timeout_s"])
            wanted.append("max_timeout_s")
        return {key: timing[key] for key in wanted if key not in self.spec}

    def start(self, cfg: Any) -> Any:
        """Calibrate, start the server, wait until it answers and fill each slot's prompt cache
        with the game's system prompt (outside any think deadline, as `warm_up` does in
        process); returns `cfg` with the served entry replaced by the envs' client entry."""
        found = self.calibrate()
        threads = 1 if (os.cpu_count() or 1) <= 4 else None  # spin-waiting threads, see serve
        self.process = ServerProcess(
            self.model_path,
            engine="llama-server",
            startup_timeout_s=STARTUP_S,
            log_path=self.log_path,
            parallel=self.n_envs,
            n_ctx=int(self.spec.get("n_ctx") or SLOT_CTX),
            n_threads=threads,
            n_threads_batch=threads,
            n_gpu_layers=self.spec.get("n_gpu_layers"),
        )
        cmd = self.process.cmd
        cpu_only = cmd[cmd.index("--n-gpu-layers") + 1] == "0"
        timing = self.timing(found, cpu_only)
        try:
            url = self.process.start()
            client = OpenAIEngine(url, response_format=self.process.response_format)
            try:
                seconds = warm_up_slots(client, found.builder, self.n_envs)
            finally:
                client.close()
        except BaseException:
            self.stop()
            raise
        log.info("think server: %d slots warmed up in %.1f s at %s", self.n_envs, seconds, url)
        wrappers = [
            client_entry(spec, url, **timing) if spec is self.spec else spec
            for spec in cfg.wrappers
        ]
        return dataclasses.replace(cfg, wrappers=normalize_wrappers(wrappers))

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        child = self.process.child if self.process is not None else None
        return child.pid if child is not None else None

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.process is not None:
            self.process.stop()
        self.process = None


def start_think_server(env_id: str, cfg: Any, n_envs: int) -> tuple[Any, ThinkServer | None]:
    """`(cfg, None)` for a stack without a served `pause_to_think`; else the started server and
    the config that points the envs at it."""
    spec = served_entry(cfg.wrappers)
    if spec is None:
        return cfg, None
    server = ThinkServer(env_id, spec, n_envs, frameskip=int(cfg.frameskip))
    return server.start(cfg), server
