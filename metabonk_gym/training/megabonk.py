"""Training against games reached over TCP, one port per env (`EnvTraits.port_per_env`):
reachability checks and lockstep stand-in games (`bonklink-sim`) for Megabonk.

Such an env is a TCP client of its game (Megabonk's BonkLink plugin, or `metabonk bonklink-sim`),
so training env `i` connects to `base_port + i` (as `metabonk_gym.make_vec(..., base_port=)`
does), and all envs live in the trainer's process. Everything else (frameskip, obs_type,
downscale, reward, max_episode_steps) is the env's own contract options.

>>> free_port_block(2) > 0
True
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING, Any

from metabonk_gym.bonklink.sim import SimProcess
from metabonk_gym.bonklink.transport import connect_with_backoff
from metabonk_gym.training.errors import GameUnreachableError

if TYPE_CHECKING:
    from metabonk_gym.training.config import TrainConfig

SIM_HINT = "metabonk bonklink-sim --lockstep --instances {n} --port {base}"


def unreachable_message(host: str, port: int, index: int, n_envs: int, base_port: int) -> str:
    """What to do when no game answers on `host:port`."""
    where = f"env {index} of {n_envs} uses base_port + {index}" if n_envs > 1 else "base_port"
    return (
        f"no BonkLink game is listening on {host}:{port} ({where}); start the stand-in game "
        f"first: `{SIM_HINT.format(n=n_envs, base=base_port)}` (or Megabonk with the BonkLink "
        f"plugin on port {port}), or point at a running one with --base-port / --set base_port=PORT"
    )


def check_reachable(cfg: TrainConfig, n_envs: int | None = None, timeout: float = 5.0) -> None:
    """Connect once to each of the `n_envs` games (retrying for up to `timeout` s each), so that a
    missing game fails at once with `GameUnreachableError`, not after an env's long retries."""
    count = cfg.n_envs if n_envs is None else n_envs
    host = str(cfg.env_kwargs.get("host", "127.0.0.1"))
    wait = min(timeout, float(cfg.env_kwargs.get("connect_timeout", timeout)))
    for i in range(count):
        port = cfg.base_port + i
        try:
            sock = connect_with_backoff(host, port, wait)
        except (ConnectionError, OSError) as exc:
            raise GameUnreachableError(
                unreachable_message(host, port, i, count, cfg.base_port)
            ) from exc
        with contextlib.suppress(OSError):
            sock.close()


# ---------------------------------------------------------------------- lockstep sims


def free_port_block(n: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """The first of `n` consecutive ports that are free now (env i uses base + i)."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = int(probe.getsockname()[1])
        if base + n > 65536:
            continue
        held: list[socket.socket] = []
        try:
            for i in range(n):
                sock = socket.socket()
                held.append(sock)
                sock.bind((host, base + i))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return base
    raise OSError(f"found no {n} consecutive free ports on {host}")


class SimSwarm:
    """`n` lockstep `bonklink-sim` games in child processes on consecutive free ports (game i:
    seed `seed + i`), for training and evaluating without a game; `start()` returns the base
    port, `stop()` (idempotent) ends them all.

    `sim_kwargs` go to every `BonkLinkSim` (e.g. `jpeg_hz=0`: no frames, for state policies).
    """

    def __init__(self, n: int, seed: int | None = None, **sim_kwargs: Any) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.n = n
        self.seed = seed
        self.sim_kwargs = {"mode": "lockstep", **sim_kwargs}
        self.base_port: int | None = None
        self.procs: list[SimProcess] = []

    def start(self, attempts: int = 5) -> int:
        host = str(self.sim_kwargs.get("host", "127.0.0.1"))
        error: OSError | None = None
        for _ in range(attempts):
            base = free_port_block(self.n, host)
            try:
                for i in range(self.n):
                    seed = None if self.seed is None else self.seed + i
                    proc = SimProcess(port=base + i, seed=seed, **self.sim_kwargs)
                    self.procs.append(proc)
                    proc.start()
            except OSError as exc:  # a port taken in between: try another block
                error = exc
                self.stop()
                continue
            self.base_port = base
            return base
        raise OSError(f"could not start {self.n} bonklink-sim games: {error}")

    def stop(self) -> list[dict[str, Any]]:
        """Stop every game; returns their stats."""
        procs, self.procs = self.procs, []
        return [proc.stop() for proc in procs]

    def __enter__(self) -> SimSwarm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
