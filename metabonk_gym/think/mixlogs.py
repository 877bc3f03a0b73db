"""What: a decision log made of other logs' calls: groups (regexes on the goal line) kept whole or
sampled (seeded) in proportion. Why: a fine-tune learns a rare decision when it is a large share.

`mix_logs(sources, out, spec)` puts each call that has a prompt in the first group whose regex
matches its goal line (or whole prompt), the others in `rest`; it keeps the `keep` groups whole
and samples each `ratios` group (that fraction of the kept calls' number), and writes every
source's meta records (so each call keeps its system prompt) and the kept calls, lines copied as
read, to `out/decisions.jsonl`. Outcome records and frames are not copied.

>>> import json, tempfile
>>> src = Path(tempfile.mkdtemp())
>>> meta = {"type": "meta", "run": "r", "system_prompt": "You play."}
>>> calls = [{"type": "call", "run": "r", "id": i, "user": f"hp=3\\nGoal: {g}\\n1 wait"}
...          for i, g in enumerate(["open the door"] * 6 + ["read the sign"] * 2)]
>>> _ = (src / "decisions.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in [meta, *calls]))
>>> spec = MixSpec.parse(["sign=sign"], keep=["sign"], ratios=["rest=1/2"])
>>> result = mix_logs([src], Path(tempfile.mkdtemp()) / "mix", spec)
>>> print(result.summary())
sign 2 (kept 2), rest 6 (kept 1)
>>> [json.loads(line)["type"] for line in result.path.read_text().splitlines()]
['meta', 'call', 'call', 'call']
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from metabonk_gym.errors import MixError as MixError  # re-exported
from metabonk_gym.think.log import LOG_NAME, DecisionLogNotFoundError, log_lines
from metabonk_gym.utils import atomic_write_bytes, check_number

#: The calls no group matched.
REST = "rest"
#: The line of a prompt that states the goal (`metabonk_gym.think.prompts` writes it).
GOAL_PREFIX = "Goal:"
#: What a group's regex is matched against: the goal line's text, or the whole prompt.
FIELDS = ("goal", "prompt")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def _pair(spec: str, flag: str, form: str) -> tuple[str, str]:
    """`NAME=VALUE` split at the first `=`, the name checked; `form` shows the flag's form."""
    name, sep, value = spec.partition("=")
    name = name.strip()
    if not sep or not value:
        raise MixError(f"{flag} {spec!r} is not {form}")
    if not _NAME.fullmatch(name):
        raise MixError(f"{flag} {spec!r}: a group name is letters, digits, _ and -, not {name!r}")
    return name, value


def _pattern(name: str, text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except (re.error, RecursionError, OverflowError) as exc:
        raise MixError(f"--group {name}: bad pattern {text!r}: {exc}") from None


def _fraction(name: str, text: str) -> Fraction:
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise MixError(
            f"--ratio {name}={text}: not a fraction; write e.g. {name}=1/3 or {name}=0.5"
        ) from None
    if value < 0 or value > 1_000_000:
        raise MixError(f"--ratio {name}={text}: must be a fraction in [0, 1000000]")
    return value


@dataclass(frozen=True)
class MixSpec:
    """Which calls a mix keeps; `MixSpec.parse` builds one from the command's flags.

    Args:
        groups: (name, regex) in order; a call goes to the first whose regex matches.
        keep: groups kept whole (`rest` may be one).
        ratios: group -> fraction of the kept groups' total size to sample from it.
        seed: the sampling's seed (`random.Random(seed)`; groups sampled in `groups` order, `rest` last).
        match: `goal` (match the prompt's goal line) or `prompt` (the whole prompt).
    """

    groups: tuple[tuple[str, re.Pattern[str]], ...] = ()
    keep: frozenset[str] = frozenset()
    ratios: dict[str, Fraction] = field(default_factory=dict)
    seed: int = 0
    match: str = "goal"

    @classmethod
    def parse(
        cls,
        groups: Sequence[str],
        keep: Sequence[str] = (),
        ratios: Sequence[str] = (),
        seed: int = 0,
        match: str = "goal",
    ) -> MixSpec:
        """The spec of `--group NAME=REGEX`, `--keep NAME` and `--ratio NAME=FRACTION` flags;
        `MixError` names the first flag that is wrong."""
        check_number("--seed", seed, 0, 2**63 - 1, integer=True)
        if match not in FIELDS:
            raise MixError(f"--match must be one of {', '.join(FIELDS)}, not {match!r}")
        pairs = [_pair(g, "--group", "NAME=REGEX, e.g. door=open the door") for g in groups]
        names = [name for name, _ in pairs]
        for name in names:
            if name == REST or names.count(name) > 1:
                why = "is the unmatched calls' group" if name == REST else "is given twice"
                raise MixError(f"--group {name}: the name {why}; choose another name")
        compiled = tuple((name, _pattern(name, text)) for name, text in pairs)
        sized = dict(_pair(r, "--ratio", "NAME=FRACTION, e.g. rest=1/2") for r in ratios)
        for flag, chosen in (("--keep", list(keep)), ("--ratio", list(sized))):
            for name in chosen:
                if name not in (*names, REST):
                    known = ", ".join([*names, REST])
                    raise MixError(f"{flag} {name}: no such group (groups: {known})")
        if both := sorted(set(keep) & set(sized)):
            raise MixError(f"group {both[0]} is both in --keep and --ratio: choose one")
        if sized and not keep:
            raise MixError(
                "--ratio is a fraction of the --keep groups' size: name one --keep group"
            )
        fractions = {name: _fraction(name, text) for name, text in sized.items()}
        return cls(compiled, frozenset(keep), fractions, seed, match)

    def group_of(self, user: str) -> str:
        """The group of a call with prompt `user`: the first whose regex matches, else `rest`."""
        text = user
        if self.match == "goal":
            _, found, tail = user.partition(GOAL_PREFIX)
            text = tail.split("\n", 1)[0] if found else ""
        return next((name for name, regex in self.groups if regex.search(text)), REST)

    def names(self) -> list[str]:
        """Every group's name, in sampling order (`rest` last)."""
        return [name for name, _ in self.groups] + [REST]


@dataclass(frozen=True)
class MixResult:
    """What a mix wrote: the log's path, each group's calls found and kept, the meta records."""

    path: Path
    found: dict[str, int]
    kept: dict[str, int]
    metas: int

    def summary(self) -> str:
        """One line: `name N (kept K)` per group."""
        return ", ".join(f"{n} {self.found[n]} (kept {self.kept[n]})" for n in self.found)


def read_groups(
    sources: Sequence[str | Path], spec: MixSpec
) -> tuple[list[bytes], dict[str, list[bytes]]]:
    """The meta lines of `sources` and their prompted calls' lines by group, in file order.
    A folder without a log, or one without a call that has a prompt, is a one-line error."""
    metas: list[bytes] = []
    members: dict[str, list[bytes]] = {name: [] for name in spec.names()}
    for source in sources:
        log = Path(source) / LOG_NAME
        if not log.is_file():
            raise DecisionLogNotFoundError(
                f"no decision log at {log}; pass folders that hold a decisions.jsonl "
                "(the log_dir= of a think agent's run)"
            )
        calls = 0
        for line, record in log_lines(log):
            line = line if line.endswith(b"\n") else line + b"\n"
            if record.get("type") == "meta":
                metas.append(line)
            elif record.get("type") == "call" and _prompt(record):
                members[spec.group_of(_prompt(record))].append(line)
                calls += 1
        if not calls:
            raise MixError(f"{source}: no think call with a prompt in {log}; nothing to mix")
    return metas, members


def _prompt(record: dict[str, Any]) -> str:
    user = record.get("user")
    return user if isinstance(user, str) else ""


def select(members: dict[str, list[bytes]], spec: MixSpec) -> dict[str, list[bytes]]:
    """Each group's kept calls: the `keep` groups whole, the `ratios` groups sampled (the
    fraction of the kept groups' total, at most the group), in `spec.names()` order with one
    `random.Random(spec.seed)`; the others dropped."""
    base = sum(len(members[name]) for name in spec.keep)
    rng = random.Random(spec.seed)
    chosen: dict[str, list[bytes]] = {}
    for name in spec.names():
        if name in spec.keep:
            chosen[name] = members[name]
        elif name in spec.ratios:
            count = min(len(members[name]), int(base * spec.ratios[name]))
            chosen[name] = rng.sample(members[name], count)
        else:
            chosen[name] = []
    return chosen


def check_out(out: Path, sources: Sequence[str | Path], force: bool) -> None:
    """Refuse an `out` that is a file, one of the sources, or a folder holding files (unless
    `force`): the mix must not replace a log someone still needs."""
    if out.exists() and not out.is_dir():
        raise MixError(f"--out {out} is a file, not a folder: choose a new folder")
    if any(Path(s).resolve() == out.resolve() for s in sources):
        raise MixError(f"--out {out} is one of the sources: choose a new folder")
    if out.is_dir() and not force and any(out.iterdir()):
        raise MixError(f"--out {out} already holds files: choose a new folder, or pass --force")


def mix_logs(
    sources: Sequence[str | Path], out: str | Path, spec: MixSpec, force: bool = False
) -> MixResult:
    """Write the mix of `sources` (see the module) to `out/decisions.jsonl`, atomically: the
    meta lines of every source in order, then each group's kept calls in `spec.names()` order."""
    out = Path(out)
    if len({Path(s).resolve() for s in sources}) != len(sources):
        raise MixError("a source folder is given twice: each call would be counted twice")
    check_out(out, sources, force)
    metas, members = read_groups(sources, spec)
    chosen = select(members, spec)
    if not any(chosen.values()):
        found = ", ".join(f"{n} {len(m)}" for n, m in members.items())
        raise MixError(f"the mix keeps no call ({found}): --keep a group that has calls")
    path = out / LOG_NAME
    atomic_write_bytes(path, b"".join(metas + [line for g in chosen.values() for line in g]))
    return MixResult(
        path,
        {name: len(lines) for name, lines in members.items()},
        {name: len(lines) for name, lines in chosen.items()},
        len(metas),
    )
