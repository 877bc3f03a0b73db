"""A small headless Megabonk-like arena game: the world behind ``bonklink-sim``.

It is a stand-in for Megabonk, not a copy: a player on a plane, enemies that spawn around it and
chase it, an automatic weapon (plus a manual shot and an area ability), XP from kills, a level-up
menu with three options chosen by click (or submit), and death back to a menu. Coordinates follow
Unity's convention: the ground is the X-Z plane and Y is up (always 0 here).

The simulation is deterministic given its seed and the sequence of actions, and cheap (a few tens
of microseconds a tick, vectorised with numpy) so that lockstep training is not bound by it.

>>> from metabonk_gym.bonklink.codec import Action
>>> game = ArenaGame(seed=0)
>>> game.menu, game.is_playing
('MainMenu', False)
>>> game.tick(Action(interact=True))  # submit on the main menu starts a run
>>> game.menu, game.state().health
('Gameplay', 100.0)
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from metabonk_gym.bonklink.actions import click_from_plugin
from metabonk_gym.bonklink.codec import Action, GameState, GameStats, InputSnapshot

__all__ = [
    "GAMEPLAY",
    "GAME_OVER",
    "LEVEL_UP",
    "MAIN_MENU",
    "UPGRADES",
    "ArenaConfig",
    "ArenaGame",
    "Rect",
    "card_rects",
    "start_button_rect",
]

GAMEPLAY = "Gameplay"
MAIN_MENU = "MainMenu"
LEVEL_UP = "LevelUp"
GAME_OVER = "GameOver"

#: Level-up options and what they do (applied by :meth:`ArenaGame._apply_upgrade`).
UPGRADES: tuple[str, ...] = (
    "Damage +25%",
    "Attack Speed +20%",
    "Move Speed +10%",
    "Max HP +20",
    "Heal 40%",
    "Projectiles +1",
    "Area +30%",
    "Range +20%",
)


@dataclass(frozen=True)
class Rect:
    """A screen rectangle in normalised coordinates with a top-left origin."""

    x0: float
    y0: float
    x1: float
    y1: float

    def contains(self, nx: float, ny: float) -> bool:
        """Whether the normalised point lies inside."""
        return self.x0 <= nx <= self.x1 and self.y0 <= ny <= self.y1

    @property
    def center(self) -> tuple[float, float]:
        """The rectangle's centre (a good place to click)."""
        return ((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2)


def start_button_rect() -> Rect:
    """The Play / Retry button of the main and game-over menus."""
    return Rect(0.35, 0.60, 0.65, 0.80)


def card_rects() -> tuple[Rect, Rect, Rect]:
    """The three level-up option cards, left to right."""
    return (
        Rect(0.05, 0.28, 0.31, 0.82),
        Rect(0.37, 0.28, 0.63, 0.82),
        Rect(0.69, 0.28, 0.95, 0.82),
    )


@dataclass(frozen=True)
class ArenaConfig:
    """Tunable constants of the arena (units are world units and seconds)."""

    update_hz: int = 60
    capture_width: int = 320
    capture_height: int = 180
    arena_half: float = 40.0
    player_speed: float = 6.0
    player_health: float = 100.0
    max_enemies: int = 64
    max_projectiles: int = 128
    contact_range: float = 0.9
    contact_dps: float = 12.0
    enemy_health: float = 12.0
    spawn_distance: tuple[float, float] = (11.0, 15.0)
    auto_cooldown: float = 0.7
    auto_range: float = 9.0
    shot_speed: float = 16.0
    shot_life: float = 0.9
    shot_damage: float = 10.0
    hit_range: float = 0.7
    manual_cooldown: float = 0.3
    ability_cooldown: float = 4.0
    ability_radius: float = 3.0
    ability_damage: float = 25.0


class ArenaGame:
    """The game state and its one-tick update. Use :meth:`tick` with one action per tick."""

    def __init__(self, seed: int | None = None, config: ArenaConfig | None = None) -> None:
        """A game on the main menu.

        Args:
            seed: seeds the spawns and the level-up options (None: fresh entropy).
            config: the rules and sizes (default: :class:`ArenaConfig`'s).
        """
        self.config = config or ArenaConfig()
        self.dt = 1.0 / self.config.update_hz
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        cap, pcap = self.config.max_enemies, self.config.max_projectiles
        # Enemies: x, z, health, speed (structure of arrays, the first n live).
        self.ex = np.zeros(cap)
        self.ez = np.zeros(cap)
        self.ehp = np.zeros(cap)
        self.espeed = np.zeros(cap)
        self.n_enemies = 0
        # Projectiles: x, z, vx, vz, remaining life, damage, fired by hand (the fire button).
        self.sx = np.zeros(pcap)
        self.sz = np.zeros(pcap)
        self.svx = np.zeros(pcap)
        self.svz = np.zeros(pcap)
        self.slife = np.zeros(pcap)
        self.sdmg = np.zeros(pcap)
        self.sman = np.zeros(pcap, bool)
        self.n_shots = 0
        self.menu = MAIN_MENU
        self.options: tuple[str, ...] = ()
        self.ticks = 0
        self.runs = 0
        self._prev_interact = False
        self._reset_run()

    # ---------------------------------------------------------------- run lifecycle

    def _reset_run(self) -> None:
        c = self.config
        self.px = self.pz = 0.0
        self.vx = self.vz = 0.0
        self.face_x, self.face_z = 1.0, 0.0
        # What the character shows this tick (for the renderer): attacking with the fire
        # button held, and where it aims.
        self.firing = False
        self.fire_x, self.fire_z = 1.0, 0.0
        self.health = self.max_health = c.player_health
        self.game_time = 0.0
        self.kills = 0
        self.xp = 0.0
        self.level = 1
        self.next_level_xp = self.xp_for_level(1)
        self.damage_mult = self.fire_rate_mult = self.speed_mult = 1.0
        self.area_mult = self.range_mult = 1.0
        self.projectile_count = 1
        self.auto_timer = 0.0
        self.manual_timer = 0.0
        self.ability_timer = 0.0
        self.spawn_timer = 1.0
        self.n_enemies = 0
        self.n_shots = 0

    @staticmethod
    def xp_for_level(level: int) -> float:
        """XP needed to go from ``level`` to the next."""
        return 3.0 + 2.0 * level

    @property
    def is_playing(self) -> bool:
        """A run is in progress (gameplay or its level-up pause)."""
        return self.menu in (GAMEPLAY, LEVEL_UP)

    @property
    def is_paused(self) -> bool:
        """The game's time scale is 0 (the level-up menu)."""
        return self.menu == LEVEL_UP

    # ---------------------------------------------------------------- one tick

    def tick(self, action: Action) -> None:
        """Advance one tick with ``action`` held for its duration."""
        self.ticks += 1
        submit = action.interact and not self._prev_interact
        self._prev_interact = action.interact
        click = self._click_point(action) if action.ui_click else None
        if self.menu in (MAIN_MENU, GAME_OVER):
            if submit or (click is not None and start_button_rect().contains(*click)):
                self._reset_run()
                self.runs += 1
                self.menu = GAMEPLAY
            return
        if self.menu == LEVEL_UP:
            choice = 0 if submit else None
            if click is not None:
                for i, rect in enumerate(card_rects()[: len(self.options)]):
                    if rect.contains(*click):
                        choice = i
            if choice is not None:
                self._apply_upgrade(self.options[choice])
                self.options = ()
                self.menu = GAMEPLAY
            return
        self._play_tick(action)

    def _click_point(self, action: Action) -> tuple[float, float]:
        """Capture pixels (bottom-left origin) to normalised top-left coordinates."""
        c = self.config
        return click_from_plugin(action.click_x, action.click_y, c.capture_width, c.capture_height)

    def _play_tick(self, action: Action) -> None:
        c, dt = self.config, self.dt
        self.game_time += dt
        # Movement: moveX -> +X, moveY -> +Z (forward); the stick is clamped to the unit disc.
        mx, mz = _clamp_unit(action.move_x, action.move_y)
        speed = c.player_speed * self.speed_mult
        self.vx, self.vz = mx * speed, mz * speed
        self.px = min(c.arena_half, max(-c.arena_half, self.px + self.vx * dt))
        self.pz = min(c.arena_half, max(-c.arena_half, self.pz + self.vz * dt))
        if mx * mx + mz * mz > 0.01:
            norm = math.hypot(mx, mz)
            self.face_x, self.face_z = mx / norm, mz / norm
        self._spawn(dt)
        self._move_enemies(dt)
        self._weapons(action, dt)
        self._move_shots(dt)
        self._collect_dead()
        if self.health <= 0.0:
            self.health = 0.0
            self.vx = self.vz = 0.0
            self.menu = GAME_OVER
        elif self.xp >= self.next_level_xp:
            self.level += 1
            self.next_level_xp += self.xp_for_level(self.level)
            self.options = tuple(self.rng.sample(UPGRADES, 3))
            self.menu = LEVEL_UP

    def _spawn(self, dt: float) -> None:
        c = self.config
        self.spawn_timer -= dt
        if self.spawn_timer > 0:
            return
        self.spawn_timer += max(0.25, 1.1 - self.game_time / 90.0)
        count = 1 + int(self.game_time // 30)
        for _ in range(count):
            if self.n_enemies >= c.max_enemies:
                return
            angle = self.rng.uniform(0.0, 2.0 * math.pi)
            dist = self.rng.uniform(*c.spawn_distance)
            i = self.n_enemies
            self.ex[i] = self.px + dist * math.cos(angle)
            self.ez[i] = self.pz + dist * math.sin(angle)
            self.ehp[i] = c.enemy_health * (1.0 + self.game_time / 60.0)
            self.espeed[i] = self.rng.uniform(2.0, 3.6)
            self.n_enemies += 1

    def _move_enemies(self, dt: float) -> None:
        n = self.n_enemies
        if not n:
            return
        dx = self.px - self.ex[:n]
        dz = self.pz - self.ez[:n]
        dist = np.sqrt(dx * dx + dz * dz) + 1e-6
        step = np.minimum(self.espeed[:n] * dt, np.maximum(dist - 0.5, 0.0)) / dist
        self.ex[:n] += dx * step
        self.ez[:n] += dz * step
        touching = int(np.count_nonzero(dist < self.config.contact_range))
        self.health -= touching * self.config.contact_dps * dt

    def _weapons(self, action: Action, dt: float) -> None:
        c = self.config
        self.auto_timer -= dt
        self.manual_timer -= dt
        self.ability_timer -= dt
        n = self.n_enemies
        if self.auto_timer <= 0 and n:
            dx = self.ex[:n] - self.px
            dz = self.ez[:n] - self.pz
            d2 = dx * dx + dz * dz
            target = int(np.argmin(d2))
            if d2[target] <= (c.auto_range * self.range_mult) ** 2:
                self.auto_timer = c.auto_cooldown / self.fire_rate_mult
                base = math.atan2(dz[target], dx[target])
                for k in range(self.projectile_count):
                    offset = (k - (self.projectile_count - 1) / 2) * 0.15
                    self._shoot(base + offset, c.shot_damage * self.damage_mult)
        self.firing = bool(action.fire)
        if action.fire:
            ax, az = _clamp_unit(action.aim_x, action.aim_y)
            if ax * ax + az * az < 0.01:
                ax, az = self.face_x, self.face_z
            norm = math.hypot(ax, az) or 1.0
            self.fire_x, self.fire_z = ax / norm, az / norm
            if self.manual_timer <= 0:
                self.manual_timer = c.manual_cooldown / self.fire_rate_mult
                self._shoot(math.atan2(az, ax), 0.8 * c.shot_damage * self.damage_mult, True)
        if action.ability and self.ability_timer <= 0:
            self.ability_timer = c.ability_cooldown
            if n:
                dx = self.ex[:n] - self.px
                dz = self.ez[:n] - self.pz
                radius = c.ability_radius * self.area_mult
                hit = dx * dx + dz * dz <= radius * radius
                self.ehp[:n][hit] -= c.ability_damage * self.damage_mult

    def _shoot(self, angle: float, damage: float, manual: bool = False) -> None:
        i = self.n_shots
        if i >= self.config.max_projectiles:
            return
        speed = self.config.shot_speed
        self.sx[i], self.sz[i] = self.px, self.pz
        self.svx[i], self.svz[i] = speed * math.cos(angle), speed * math.sin(angle)
        self.slife[i] = self.config.shot_life * self.range_mult
        self.sdmg[i] = damage
        self.sman[i] = manual
        self.n_shots += 1

    def _move_shots(self, dt: float) -> None:
        s = self.n_shots
        if not s:
            return
        self.sx[:s] += self.svx[:s] * dt
        self.sz[:s] += self.svz[:s] * dt
        self.slife[:s] -= dt
        alive = self.slife[:s] > 0
        n = self.n_enemies
        if n:
            dx = self.sx[:s, None] - self.ex[None, :n]
            dz = self.sz[:s, None] - self.ez[None, :n]
            r = self.config.hit_range * self.area_mult
            hits = dx * dx + dz * dz <= r * r
            hit_any = hits.any(axis=1) & alive
            if hit_any.any():
                targets = hits[hit_any].argmax(axis=1)
                np.subtract.at(self.ehp, targets, self.sdmg[:s][hit_any])
                alive &= ~hit_any
        if not alive.all():
            keep = np.flatnonzero(alive)
            for arr in (self.sx, self.sz, self.svx, self.svz, self.slife, self.sdmg, self.sman):
                arr[: len(keep)] = arr[keep]
            self.n_shots = len(keep)

    def _collect_dead(self) -> None:
        n = self.n_enemies
        if not n:
            return
        alive = self.ehp[:n] > 0
        dead = n - int(np.count_nonzero(alive))
        if not dead:
            return
        self.kills += dead
        self.xp += dead
        keep = np.flatnonzero(alive)
        for arr in (self.ex, self.ez, self.ehp, self.espeed):
            arr[: len(keep)] = arr[keep]
        self.n_enemies = len(keep)

    def _apply_upgrade(self, name: str) -> None:
        if name == "Damage +25%":
            self.damage_mult *= 1.25
        elif name == "Attack Speed +20%":
            self.fire_rate_mult *= 1.2
        elif name == "Move Speed +10%":
            self.speed_mult *= 1.1
        elif name == "Max HP +20":
            self.max_health += 20.0
            self.health += 20.0
        elif name == "Heal 40%":
            self.health = min(self.max_health, self.health + 0.4 * self.max_health)
        elif name == "Projectiles +1":
            self.projectile_count += 1
        elif name == "Area +30%":
            self.area_mult *= 1.3
        elif name == "Range +20%":
            self.range_mult *= 1.2

    # ---------------------------------------------------------------- what the plugin reports

    def state(
        self,
        *,
        plugin_stubs: bool = False,
        stats: bool = True,
        snapshot: InputSnapshot | None = None,
    ) -> GameState:
        """The state block for this tick.

        ``plugin_stubs`` reports what the deployed plugin sends: health 100/100, no enemies and
        no level-up options (position, velocity, time, flags and menu stay real).
        """
        n = self.n_enemies
        if plugin_stubs:
            health, max_health = 100.0, 100.0
            enemies = np.zeros((0, 4), np.float32)
            options: tuple[str, ...] = ()
        else:
            health, max_health = self.health, self.max_health
            enemies = np.zeros((n, 4), np.float32)
            enemies[:, 0] = self.ex[:n]
            enemies[:, 2] = self.ez[:n]
            enemies[:, 3] = self.ehp[:n]
            options = self.options
        return GameState(
            position=(self.px, 0.0, self.pz),
            velocity=(self.vx, 0.0, self.vz),
            health=health,
            max_health=max_health,
            game_time=self.game_time,
            is_playing=self.is_playing,
            is_paused=self.is_paused,
            enemies=enemies,
            menu=self.menu,
            options=options,
            input_snapshot=snapshot,
            stats=GameStats(self.kills, self.xp, self.level)
            if stats and not plugin_stubs
            else None,
        )

    def snapshot_of(self, action: Action) -> InputSnapshot:
        """An ``HINP`` trailer describing ``action`` as if a human had pressed it."""
        nx, ny = self._click_point(action) if action.ui_click else (0.0, 0.0)
        return InputSnapshot(
            action.move_x,
            action.move_y,
            action.aim_x,
            action.aim_y,
            action.fire,
            action.ability,
            action.interact,
            action.ui_click,
            nx,
            ny,
        )


def _clamp_unit(x: float, y: float) -> tuple[float, float]:
    """Clamp a stick vector to the unit disc (NaN reads as 0)."""
    x = 0.0 if x != x else max(-1.0, min(1.0, x))
    y = 0.0 if y != y else max(-1.0, min(1.0, y))
    norm2 = x * x + y * y
    if norm2 > 1.0:
        norm = math.sqrt(norm2)
        return x / norm, y / norm
    return x, y
