"""`QuestLog`: quests and objectives from a game folder's `quests.yaml`, driven by game variables.

What: each quest (kind main 10, skill 6, collection 5, exploration 3, or its own `priority`) and
each of its objectives goes pending -> open -> done as its `open` and `done` conditions come to
hold (`metabonk_gym.memory.conditions`); dynamic todos come from rules: a condition (low health:
find healing, 9) or one per remembered entity of a kind and state (a new NPC, an unopened chest).
`top(n)` is the log's head, most urgent first, for the prompt. Why: a model that sees the open
objectives and what is still to do no longer forgets which key it already used.

>>> log = QuestLog.from_data({"quests": [{"id": "q", "title": "win", "kind": "main",
...     "objectives": [{"id": "key", "text": "take the key", "done": {"variable": "keys"}}]}],
...     "todos": [{"id": "heal", "text": "find healing", "priority": 9,
...                "when": {"variable": "hp", "op": "less-than", "reference": 2}}]})
>>> [c.status for c in log.update({"keys": 0, "hp": 1}, set(), step=0)]
['open', 'open']
>>> [t.text for t in log.top(3, {"keys": 0, "hp": 1})]
['take the key', 'find healing']
>>> [(c.id, c.status) for c in log.update({"keys": 1, "hp": 3}, set(), step=5)]
[('q/key', 'done'), ('q', 'done')]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metabonk_gym.gamedata import GameData
from metabonk_gym.memory.conditions import Condition, ConditionError, check_keys

#: The keys quests.yaml and its entries may hold (anything else is a typo, refused).
FILE_KEYS = ("world", "quests", "todos")
QUEST_KEYS = ("id", "title", "kind", "priority", "open", "done", "objectives")
OBJECTIVE_KEYS = ("id", "text", "priority", "open", "done")
TODO_KEYS = ("id", "text", "priority", "when", "entity")

#: Default priority of a quest's kind (an entry's own `priority` wins).
KIND_PRIORITY: dict[str, int] = {"main": 10, "skill": 6, "collection": 5, "exploration": 3}
STATUSES = ("pending", "open", "done")


@dataclass
class Objective:
    """One step of a quest; `id` is `quest/objective`."""

    id: str
    quest: str
    text: str
    priority: int
    open_when: Condition
    done_when: Condition
    status: str = "pending"
    step: int = -1


@dataclass
class Quest:
    """A quest with its objectives (see the module docstring)."""

    id: str
    title: str
    kind: str
    priority: int
    open_when: Condition
    done_when: Condition
    objectives: list[Objective] = field(default_factory=list)
    status: str = "pending"
    step: int = -1


@dataclass(frozen=True)
class Change:
    """A quest or objective that changed status at `step`."""

    id: str
    status: str
    step: int


@dataclass(frozen=True)
class Todo:
    """One line of the log's head: an open objective or a dynamic todo."""

    id: str
    text: str
    priority: int


@dataclass(frozen=True)
class TodoRule:
    """A dynamic todo: while `when` holds, or one per remembered entity of `kind`/`state`."""

    id: str
    text: str
    priority: int
    when: Condition | None = None
    kind: str = ""
    state: str = ""


class QuestLog:
    """See the module docstring.

    Args:
        quests: the parsed quests (`from_data` / `from_game` read them from `quests.yaml`).
        todos: the dynamic todo rules.
    """

    def __init__(self, quests: Sequence[Quest] = (), todos: Sequence[TodoRule] = ()) -> None:
        self.quests = list(quests)
        self.rules = list(todos)
        names: set[str] = set()
        self.uses_tiles = False
        for q in self.quests:
            for c in (q.open_when, q.done_when, *(o.open_when for o in q.objectives)):
                names |= c.variables
                self.uses_tiles = self.uses_tiles or c.uses_tiles
            for o in q.objectives:
                names |= o.done_when.variables
        for r in self.rules:
            if r.when is not None:
                names |= r.when.variables
        #: The variables the log reads (it is re-evaluated only when one changes).
        self.variables = tuple(sorted(names))
        self._last: tuple[Any, ...] | None = None

    # ------------------------------------------------------------------ building
    @classmethod
    def from_game(cls, game: GameData) -> QuestLog:
        """The log of a game folder (empty when it has no `quests.yaml`)."""
        return cls.from_data(game.quests(), str(game.folder))

    @classmethod
    def from_data(cls, data: Mapping[str, Any], where: str = "quests") -> QuestLog:
        """Parse the `quests:` and `todos:` sections; `ConditionError` names a bad entry."""
        check_keys(data, FILE_KEYS, f"{where}: quests.yaml")
        quests = []
        for i, raw in enumerate(data.get("quests") or []):
            at = f"{where}: quests[{i}]"
            if not isinstance(raw, Mapping) or "id" not in raw:
                raise ConditionError(f"{at} needs an 'id'")
            check_keys(raw, QUEST_KEYS, at)
            kind = str(raw.get("kind", "main"))
            priority = int(raw.get("priority", KIND_PRIORITY.get(kind, 5)))
            qid = str(raw["id"])
            objectives = []
            for j, o in enumerate(raw.get("objectives") or []):
                if not isinstance(o, Mapping) or "id" not in o or "done" not in o:
                    raise ConditionError(f"{at}.objectives[{j}] needs an 'id' and 'done'")
                check_keys(o, OBJECTIVE_KEYS, f"{at}.objectives[{j}]")
                objectives.append(
                    Objective(
                        id=f"{qid}/{o['id']}",
                        quest=qid,
                        text=str(o.get("text", o["id"])),
                        priority=int(o.get("priority", priority)),
                        open_when=Condition.parse(o.get("open"), f"{at}.objectives[{j}].open"),
                        done_when=Condition.parse(o["done"], f"{at}.objectives[{j}].done"),
                    )
                )
            quests.append(
                Quest(
                    id=qid,
                    title=str(raw.get("title", qid)),
                    kind=kind,
                    priority=priority,
                    open_when=Condition.parse(raw.get("open"), f"{at}.open"),
                    done_when=Condition.parse(raw["done"], f"{at}.done")
                    if "done" in raw
                    else Condition("none"),
                    objectives=objectives,
                )
            )
        rules = []
        for i, raw in enumerate(data.get("todos") or []):
            at = f"{where}: todos[{i}]"
            if not isinstance(raw, Mapping) or "id" not in raw or "text" not in raw:
                raise ConditionError(f"{at} needs an 'id' and a 'text'")
            check_keys(raw, TODO_KEYS, at)
            entity = raw.get("entity") or {}
            if "when" not in raw and not entity:
                raise ConditionError(f"{at} needs 'when' (a condition) or 'entity'")
            rules.append(
                TodoRule(
                    id=str(raw["id"]),
                    text=str(raw["text"]),
                    priority=int(raw.get("priority", 5)),
                    when=Condition.parse(raw["when"], f"{at}.when") if "when" in raw else None,
                    kind=str(entity.get("kind", "")),
                    state=str(entity.get("state", "")),
                )
            )
        return cls(quests, rules)

    # ------------------------------------------------------------------ driving
    def reset(self) -> None:
        """A new episode (a new playthrough): every quest and objective pending again."""
        for q in self.quests:
            q.status, q.step = "pending", -1
            for o in q.objectives:
                o.status, o.step = "pending", -1
        self._last = None

    def update(
        self, values: Mapping[str, int], seen: Collection[str] = (), step: int = 0
    ) -> list[Change]:
        """Re-evaluate the log (only when a variable it reads or the tiles in view changed);
        the quests and objectives whose status changed."""
        key: tuple[Any, ...] = tuple(int(values.get(n, 0)) for n in self.variables)
        if self.uses_tiles:
            key += (frozenset(seen),)
        if key == self._last:
            return []
        self._last = key
        changes: list[Change] = []

        def move(item: Quest | Objective, status: str) -> None:
            item.status, item.step = status, step
            changes.append(Change(item.id, status, step))

        for q in self.quests:
            if q.status == "pending" and q.open_when.holds(values, seen):
                move(q, "open")
            if q.status != "open":
                continue
            for o in q.objectives:
                if o.status == "done":
                    continue
                if o.done_when.holds(values, seen):
                    move(o, "done")
                elif o.status == "pending" and o.open_when.holds(values, seen):
                    move(o, "open")
            finished = q.done_when.kind != "none" and q.done_when.holds(values, seen)
            if finished or (
                q.done_when.kind == "none"
                and q.objectives
                and all(o.status == "done" for o in q.objectives)
            ):
                move(q, "done")
        return changes

    def todos(
        self, values: Mapping[str, int], entities: Sequence[Mapping[str, Any]] = ()
    ) -> list[Todo]:
        """The dynamic todos now: rules whose condition holds, one per matching entity."""
        out = []
        for rule in self.rules:
            if rule.when is not None:
                if rule.when.holds(values):
                    out.append(Todo(rule.id, rule.text, rule.priority))
                continue
            for e in entities:
                if e.get("kind") == rule.kind and (not rule.state or e.get("state") == rule.state):
                    text = rule.text.format(x=e.get("x"), y=e.get("y"), area=e.get("number", ""))
                    out.append(Todo(f"{rule.id}:{e.get('id')}", text, rule.priority))
        return out

    def top(
        self,
        n: int,
        values: Mapping[str, int],
        entities: Sequence[Mapping[str, Any]] = (),
    ) -> list[Todo]:
        """The head of the log: open objectives and todos, highest priority first (ties: the
        quest file's order)."""
        items = [
            Todo(o.id, o.text, o.priority)
            for q in self.quests
            if q.status == "open"
            for o in q.objectives
            if o.status == "open"
        ]
        items += self.todos(values, entities)
        order = {id(t): i for i, t in enumerate(items)}
        return sorted(items, key=lambda t: (-t.priority, order[id(t)]))[:n]

    def counts(self) -> dict[str, int]:
        """Quests and objectives per status (`quests_done`, `objectives_open`, ...)."""
        out = {f"quests_{s}": 0 for s in STATUSES} | {f"objectives_{s}": 0 for s in STATUSES}
        for q in self.quests:
            out[f"quests_{q.status}"] += 1
            for o in q.objectives:
                out[f"objectives_{o.status}"] += 1
        return out
