"""`GBAEnv`: a GBA game as a Gymnasium env, on the embedded mGBA core or on SkyEmu.

Observations are screens (RGB or grayscale, optionally downscaled) or, with `obs_type="state"`,
the float vector the integration declares (`metabonk_gym.gba.state_vector`); actions are discrete button
combinations or the 10 buttons as MultiBinary; `info` holds the game's RAM variables, read one
by one (never a copy of all memory) so a step costs little more than emulating its frames.

Every env of the suite speaks one contract: the core options `frameskip`, `obs_type`,
`downscale`, `reward`, `max_episode_steps` (gym.make's) and `render_mode`, and the info names
`hp`, `max_hp`, `won`, `lost` (None / False when the integration has no such variable) and
`reward_terms`, the game's own variables beside them.

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0")
>>> obs, info = env.reset(seed=1)
>>> obs.shape, info["room"]
((160, 240, 3), 1)
>>> env.close()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabonk_gym.contract import check_downscale, check_frameskip, check_obs_type
from metabonk_gym.errors import (
    CorruptSavestateError,
    EnvClosedError,
    InvalidActionError,
    MetabonkError,
    UnknownStateError,
)
from metabonk_gym.gamedata import GameData
from metabonk_gym.gba.backends import (
    SCREEN_SHAPE,
    EmulatorBackend,
    open_backend,
    write_state_file,
)
from metabonk_gym.gba.buttons import BUTTONS, buttons_to_mask, multibinary_to_mask
from metabonk_gym.gba.integration import ArraySpec, Integration, Start
from metabonk_gym.gba.memory import Memory
from metabonk_gym.gba.statefile import read_state
from metabonk_gym.gba.window import close_window, show_frame
from metabonk_gym.preprocess import screen
from metabonk_gym.rewards import DoneCondition, VariableCheck, build_reward

BONK_MAGIC = 0x4B4E4F42
COMMANDS = {"new_game": 1, "warp": 2}
BOOT_FRAME_LIMIT = 600
COMMAND_FRAME_LIMIT = 120
#: Info names backed by RAM variables (`won`/`lost` False, `hp`/`max_hp` None when there are none).
RAM_INFO = ("hp", "max_hp", "won", "lost")


def _integration(
    game: str | None, folder: str | Path | None, rom: str | Path | None, check_hash: bool
) -> Integration:
    """A bundled game's integration, or the one in `folder`."""
    if game is not None:
        return Integration.bundled(game, rom=rom, check_hash=check_hash)
    if folder is not None:
        return Integration.from_folder(folder, rom=rom, check_hash=check_hash)
    raise MetabonkError(
        "MetaBonk/GBA-v0 needs integration=FOLDER (stable-retro format: data.json, "
        "scenario.json, metadata.json) and rom=PATH to your .gba file; see docs/integrations.md"
    )


class GBAEnv(gym.Env[np.ndarray, Any]):
    """A GBA game; see the module docstring and README for every option.

    Args:
        game: a bundled game (`BonkQuest`, `BonkArena`); or `integration` for your own.
        rom: the ROM file (default: the integration's `rom.gba`).
        integration: a stable-retro-format integration folder (docs/integrations.md).
        state: the start: a named start, a savestate name or a `.state` file.
        frameskip: emulator frames per step, the action held for all of them.
        action_space: `"discrete"` (the integration's button combinations) or `"multibinary"`.
        obs_type: `"rgb"`, `"grayscale"` or `"state"` (the integration's state vector).
        downscale: 1, 2, 4 or 8: the screen's block mean over that many pixels a side.
        sticky_action_prob: each frame keeps the previous buttons with this probability.
        reward: `"default"` (scenario.json), a preset of the game, reward terms, or a file.
        render_mode: `"rgb_array"` or `"human"` (a window).
        backend: `"embedded"` (the mGBA core) or `"skyemu"` (`skyemu_url=` / `skyemu_binary=`).
        check_hash: refuse a ROM whose SHA-1 differs from the integration's `rom.sha`.
        backend_kwargs: the backend's own options.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 60}

    def __init__(
        self,
        game: str | None = None,
        rom: str | Path | None = None,
        integration: str | Path | None = None,
        state: str | None = None,
        frameskip: int = 4,
        action_space: str = "discrete",
        obs_type: str = "rgb",
        downscale: int = 1,
        sticky_action_prob: float = 0.0,
        reward: Any = "default",
        render_mode: str | None = None,
        backend: str = "embedded",
        check_hash: bool = True,
        **backend_kwargs: Any,
    ) -> None:
        frameskip, downscale = self._check_options(
            frameskip, sticky_action_prob, obs_type, action_space, downscale, render_mode
        )
        self._game_data: GameData | None = None
        self.integration = _integration(game, integration, rom, check_hash)
        self.frameskip = int(frameskip)
        self.obs_type = obs_type
        self.downscale = int(downscale)
        self.sticky_action_prob = float(sticky_action_prob)
        self.render_mode = render_mode
        self.state_name = state if state is not None else self.integration.default_state
        if self.state_name is not None:  # unknown names fail here, listing valid ones
            self.integration.resolve_state(self.state_name)
        self._set_action_space(action_space)
        self.state_vector = self.integration.state_vector if obs_type == "state" else None
        self.observation_space: spaces.Box = self._make_observation_space(obs_type)
        self._set_variables(reward)
        self._backend_name = backend
        self.backend: EmulatorBackend = open_backend(
            backend, self.integration.rom_path, **backend_kwargs
        )
        self.memory = Memory(self.backend)
        self._boot_state: bytes | None = None
        self._buttons = 0
        self._frame: np.ndarray | None = None
        self._vars: dict[str, int] = {}
        self._window: Any = None

    def _check_options(
        self,
        frameskip: int,
        sticky_action_prob: float,
        obs_type: str,
        action_space: str,
        downscale: int,
        render_mode: str | None,
    ) -> tuple[int, int]:
        """Refuse a bad core option (a `ValueError` naming it); the frameskip and downscale
        as numbers."""
        frameskip = check_frameskip(frameskip)
        if not 0.0 <= sticky_action_prob < 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1), not {sticky_action_prob}")
        check_obs_type(obs_type)
        if action_space not in ("discrete", "multibinary"):
            raise ValueError(
                f"action_space must be 'discrete' or 'multibinary', not {action_space!r}"
            )
        downscale = check_downscale(downscale)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, not {render_mode!r}"
            )
        return frameskip, downscale

    def _set_action_space(self, action_space: str) -> None:
        """Discrete: the integration's button combinations (`action_masks`); else the buttons."""
        self._action_kind = action_space
        if action_space == "discrete":
            self.action_masks = [
                buttons_to_mask(combo) for combo in self.integration.discrete_actions
            ]
            self.action_space = spaces.Discrete(len(self.action_masks))
        else:
            self.action_masks = []
            self.action_space = spaces.MultiBinary(len(BUTTONS))

    def _make_observation_space(self, obs_type: str) -> spaces.Box:
        """The state vector's box, or the (downscaled) screen's."""
        if obs_type == "state":
            if self.state_vector is None:
                raise MetabonkError(
                    f"{self.integration.name} declares no state_vector in "
                    f"{self.integration.folder / 'metabonk.json'}, so obs_type='state' is not "
                    "available; use 'rgb' or 'grayscale', or declare one (docs/integrations.md)"
                )
            clip = self.state_vector.clip
            return spaces.Box(-clip, clip, (self.state_vector.size,), dtype=np.float32)
        height, width = SCREEN_SHAPE[0] // self.downscale, SCREEN_SHAPE[1] // self.downscale
        channels = 3 if obs_type == "rgb" else 1
        return spaces.Box(0, 255, (height, width, channels), dtype=np.uint8)

    def _set_variables(self, reward: Any) -> None:
        """The RAM variables behind info, reward and done: the reward function, the done
        condition, the contract's checks, and the variables a step reads (only those needed)."""
        variables = self.integration.variables
        self.reward_fn = build_reward(
            reward,
            self.integration.name,
            self.integration.scenario,
            set(variables),
            presets=self.game_data.presets() or None,
        )
        self.done_condition = DoneCondition(self.integration.scenario)
        #: `won`/`lost` declared as conditions (e.g. the level went up since reset).
        self._contract_checks = {
            key: VariableCheck.parse(str(self.integration.extension[key]["variable"]), cond)
            for key in ("won", "lost")
            if (cond := self.integration.contract_condition(key)) is not None
        }
        needed = (
            set(self.integration.info_names)
            | self.reward_fn.variables
            | self.done_condition.variables
        )
        self._contract_vars = {
            key: name for key, name in zip(RAM_INFO, self._contract_variables()) if name is not None
        }
        needed |= set(self._contract_vars.values())
        if self.state_vector is not None:
            needed |= self.state_vector.variable_names()
        self._var_names = [n for n in variables if n in needed]
        self._var_specs = [(variables[n].address, variables[n].type) for n in self._var_names]
        self._info_names = list(self.integration.info_names)

    # ------------------------------------------------------------------ accessors
    @property
    def game_data(self) -> GameData:
        """The game's folder data (presets, defaults, milestones, tile classes, game card)."""
        if self._game_data is None:
            self._game_data = GameData(self.integration.folder)
        return self._game_data

    @property
    def info_names(self) -> list[str]:
        """The game variables `info` reports each step (metabonk.json "info")."""
        return list(self._info_names)

    @property
    def variable_names(self) -> list[str]:
        """Every game variable `read_variable` reads (data.json)."""
        return list(self.integration.variables)

    @property
    def rom_path(self) -> Path:
        """Path of the ROM this env runs."""
        return self.integration.rom_path

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode. `options`: `state` (a named start, a savestate name or file, or the
        bytes of `save_state()`: a new episode from that snapshot, as Go-Explore returns to a
        cell) and `game_seed` (the game's own seed for a named start)."""
        self._check_open("reset")
        super().reset(seed=seed)
        options = options or {}
        state = options.get("state", self.state_name)
        if "game_seed" in options:
            game_seed = options["game_seed"]
            if isinstance(game_seed, bool) or not isinstance(game_seed, (int, np.integer)):
                raise ValueError(
                    f"options['game_seed'] must be an int (the game's own seed), not {game_seed!r}"
                )
            game_seed = int(game_seed)
        else:
            game_seed = int(self.np_random.integers(2**31))
        self._start(state, game_seed)
        self._buttons = 0
        self._vars = self._read_vars()
        self.reward_fn.reset(self._vars)
        self.done_condition.reset(self._vars)
        for check in self._contract_checks.values():
            check.reset(self._vars)
        self._frame = self.backend.screen()
        if self.render_mode == "human":
            self.render()
        info = self._info()
        info["reward_terms"] = {}
        info["game_seed"] = game_seed
        return self._observation(), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self.backend is None:
            self._check_open("step")
        buttons = self._action_to_mask(action)
        if self.sticky_action_prob > 0.0:
            # ALE v5-style sticky actions: each frame keeps the previous buttons with probability p.
            rolls = self.np_random.random(self.frameskip) < self.sticky_action_prob
            for sticky in rolls:
                if not sticky:
                    self._buttons = buttons
                self.backend.step(1, self._buttons)
        else:
            self._buttons = buttons
            self.backend.step(self.frameskip, buttons)
        self._frame = self.backend.screen()
        self._vars = self._read_vars()
        reward, terms = self.reward_fn.step(self._vars)
        terminated = self.done_condition(self._vars)
        info = self._info()
        info["reward_terms"] = terms
        if self.render_mode == "human":
            self.render()
        return self._observation(), reward, terminated, False, info

    def render(self) -> np.ndarray | None:  # type: ignore[override]  # gymnasium 1.2 types it as its RenderFrame TypeVar
        if self._frame is None:
            return None
        if self.render_mode == "human":
            self._window = show_frame(
                self._window, self._frame, self.metadata["render_fps"] / self.frameskip
            )
            return None
        return self._frame.copy()

    def close(self) -> None:
        if self._window is not None:
            close_window(self._window)
            self._window = None
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()
            self.backend = None  # type: ignore[assignment]

    def _check_open(self, what: str) -> None:
        if getattr(self, "backend", None) is None:
            raise EnvClosedError(
                f"{what}() on a closed {self.integration.name} env: make a new env with gym.make"
            )

    # ------------------------------------------------------------------ RAM access
    def read_memory(self, address: int, n: int) -> bytes:
        """`n` bytes of the GBA bus at `address` (EWRAM, IWRAM, I/O, palette, VRAM, OAM)."""
        return self.backend.read_bytes(address, n)

    def read_variable(self, name: str) -> int:
        """A data.json variable's current value."""
        var = self.integration.variable(name)
        return self.backend.read(var.address, var.type)

    def write_variable(self, name: str, value: int) -> None:
        """Poke a data.json variable (for tests, curricula and cheats)."""
        var = self.integration.variable(name)
        self.backend.write(var.address, var.type, value)

    def read_array(self, name: str) -> np.ndarray:
        """A RAM array from metabonk.json (e.g. `room_tiles`), as a numpy array of its shape."""
        spec: ArraySpec = self.integration.array(name)
        raw = self.backend.read_bytes(spec.address, spec.nbytes)
        dtype = np.dtype(spec.type.replace("|", "<").replace("n", "u"))
        return np.frombuffer(raw, dtype=dtype).reshape(spec.shape).copy()

    def variables(self) -> dict[str, int]:
        """Every data.json variable now (all of them, not only those in info)."""
        names = list(self.integration.variables)
        specs = [
            (self.integration.variables[n].address, self.integration.variables[n].type)
            for n in names
        ]
        return dict(zip(names, self.backend.read_many(specs)))

    # ------------------------------------------------------------------ savestates
    def save_state(self, path: str | Path | None = None) -> bytes:
        """The machine state now; written to `path` as a stable-retro `.state` file if given.

        Load it back with `reset(options={"state": path})`, or by name once it is in the
        game's savestate folder.
        """
        self._check_open("save_state")
        state = self.backend.save_state()
        if path is not None:
            write_state_file(Path(path), state)
        return state

    def load_state(self, state: bytes) -> None:
        """Restore a snapshot from `save_state()` (without starting a new episode)."""
        self._check_open("load_state")
        self.backend.load_state(state)
        self._vars = self._read_vars()
        self._frame = self.backend.screen()

    # ------------------------------------------------------------------ internals
    def _start(self, state: str | Path | bytes | None, game_seed: int) -> None:
        if isinstance(state, (bytes, bytearray)):  # `save_state()` bytes of this env's core
            if len(state) > self.backend.max_state_bytes:
                raise CorruptSavestateError(
                    f"a savestate of {len(state)} bytes is larger than this core's states "
                    f"({self.backend.max_state_bytes} bytes at most)"
                )
            self.backend.load_state(bytes(state))
            return
        if self._boot_state is None:
            self._boot_state = self._boot()
        if state is None:
            if self.integration.has_command_interface:
                self.backend.load_state(self._boot_state)
                self._command(COMMANDS["new_game"], 0, game_seed)
            else:
                # as a fresh process starts the ROM: restoring the power-on state is not exact
                # on every ROM (a core that ran keeps state no savestate holds; some hang)
                self.backend.power_on()
            return
        target = self.integration.resolve_state(self.integration.pick_start(state, game_seed))
        if isinstance(target, Start):
            self.backend.load_state(self._boot_state)
            if target.command not in COMMANDS:
                raise UnknownStateError(
                    f"start {target.name!r} has unknown command {target.command!r}"
                )
            self._command(COMMANDS[target.command], target.arg, game_seed)
        else:
            loaded = read_state(target, self.backend.max_state_bytes)
            if not loaded.verified:  # not written by this project: tried elsewhere first
                self.backend.vet_state(loaded.state)
            self.backend.load_state(loaded.state)
            self._seed_frames(game_seed)

    def _seed_frames(self, game_seed: int) -> None:
        """Idle `1 + game_seed % (N + 1)` frames after a savestate start, N = metabonk.json's
        `seed_frames` (default 0: none): a game that seeds its randomness from time then plays
        a different game for each seed, as ALE's random no-op starts do; the first frame is
        always run (as stable-retro's reset does) so the first observation is drawn from the
        loaded state, not left over from whatever the core ran before."""
        limit = int(self.integration.extension.get("seed_frames", 0))
        if limit > 0:
            self.backend.step(1 + game_seed % (limit + 1), 0)

    def _boot(self) -> bytes:
        """Power on and, for games with the command interface, run until the game has booted."""
        if self.integration.has_command_interface:
            magic = self.integration.variables["magic"]
            for _ in range(BOOT_FRAME_LIMIT):
                self.backend.step(1, 0)
                if self.backend.read(magic.address, magic.type) == BONK_MAGIC:
                    break
            else:
                raise MetabonkError(
                    f"{self.rom_path} did not boot within {BOOT_FRAME_LIMIT} frames"
                )
            if self.backend.aligns_frame_counter:
                # Emulators stop frames at different scanlines, so another emulator may see the
                # booted game one game frame later than the embedded core, which shows frame 0
                # here: set the game's own clock to that origin so trajectories line up on it.
                frame = self.integration.variables["frame"]
                if self.backend.read(frame.address, frame.type) != 0:
                    self.backend.write(frame.address, frame.type, 0)
        return self.backend.save_state()

    def _command(self, command: int, arg: int, game_seed: int) -> None:
        """Run a host command (gba/README.md) and step until the game has executed it."""
        variables = self.integration.variables
        seed, cmd = variables["seed"], variables["cmd"]
        self.backend.write(seed.address, seed.type, game_seed & 0xFFFFFFFF)
        if "cmd_arg" in variables:
            self.backend.write(variables["cmd_arg"].address, variables["cmd_arg"].type, arg)
        self.backend.write(cmd.address, cmd.type, command)
        for _ in range(COMMAND_FRAME_LIMIT):
            self.backend.step(1, 0)
            if self.backend.read(cmd.address, cmd.type) == 0:
                return
        raise MetabonkError(
            f"the game did not execute command {command} within {COMMAND_FRAME_LIMIT} frames"
        )

    def _read_vars(self) -> dict[str, int]:
        return dict(zip(self._var_names, self.backend.read_many(self._var_specs)))

    def _contract_variables(self) -> tuple[str | None, ...]:
        """The variables behind `hp`, `max_hp`, `won`, `lost` (metabonk.json may name others)."""
        extension, variables = self.integration.extension, self.integration.variables
        names = (
            extension.get("hp", "hp"),
            extension.get("max_hp", "max_hp"),
            self.integration.won_variable or "won",
            self.integration.lost_variable or "lost",
        )
        return tuple(name if name in variables else None for name in names)

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {name: self._vars[name] for name in self._info_names}
        for key in RAM_INFO:
            if key in self._contract_checks:
                info[key] = self._contract_checks[key](self._vars)
            elif key not in info:
                name = self._contract_vars.get(key)
                if name is not None:
                    info[key] = self._vars[name]
                else:
                    info[key] = False if key in ("won", "lost") else None
        return info

    def _action_to_mask(self, action: Any) -> int:
        if self._action_kind == "discrete":
            try:
                index = int(action)
                valid = index == action and 0 <= index < len(self.action_masks)
            except (TypeError, ValueError):
                valid = False
            if not valid:
                raise InvalidActionError(
                    f"invalid action {action!r}: {self.integration.name} takes an int in "
                    f"0..{len(self.action_masks) - 1} (Discrete({len(self.action_masks)})); "
                    "see env.unwrapped.integration.discrete_actions"
                )
            return self.action_masks[index]
        pressed = np.asarray(action)
        if pressed.shape != (len(BUTTONS),) or not np.isin(pressed, (0, 1)).all():
            raise InvalidActionError(
                f"invalid action {action!r}: MultiBinary(10) takes 10 values of 0/1 in the order "
                f"{', '.join(BUTTONS)}"
            )
        return multibinary_to_mask(pressed)

    def _observation(self) -> np.ndarray:
        if self.state_vector is not None:
            arrays = {name: self.read_array(name) for name in self.state_vector.array_names()}
            return self.state_vector.compute(self._vars, arrays)
        assert self._frame is not None
        # the backend returns a fresh array each step (render() hands out copies)
        return screen(self._frame, self.obs_type, self.downscale)
