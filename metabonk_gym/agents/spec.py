"""`AgentSpec`: an agent named on the command line, read once into a typed object.

What: `AgentSpec.parse(text)` reads every form an agent takes (`random`, `scripted`, `human`,
`think`, `think:MODEL`, `oracle` (= `think:oracle`), `repeat:N`, `replay:ARCHIVE|DATASET`, a
model PATH.zip, a run directory of any trainer) and checks it (a missing file, a folder that is
no run, a corrupt replay source: one-line `AgentError`s before any work). Why: `evaluate`, the
ladder, `play` and the registry would otherwise each re-read the string (is it a path? a
run directory? which kind of run?); they take the parsed object and ask it.

>>> AgentSpec.parse("random").kind
'random'
>>> spec = AgentSpec.parse("oracle")
>>> spec.text, spec.kind, spec.think
('think:oracle', 'think', {'model_path': 'oracle'})
>>> AgentSpec.parse("repeat:2").action
2
>>> AgentSpec.parse(spec) is spec  # an object already parsed is passed through
True
>>> AgentSpec.parse("nothing-like-an-agent")
Traceback (most recent call last):
...
metabonk_gym.errors.AgentError: unknown agent 'nothing-like-an-agent'; use one of random, scripted, think, human, think:MODEL, a model PATH.zip, a run directory (train ppo/bc/appo/dreamer, curriculum, tune pbt) or replay:ARCHIVE.npz / replay:DATASET_ID
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.agents.replay import check_replay, replay_source
from metabonk_gym.agents.runs import AgentRun, find_run
from metabonk_gym.experts.base import AgentError
from metabonk_gym.think.baselines import RULE_STRATEGISTS

#: Agents named by a single word.
AGENT_NAMES: tuple[str, ...] = ("random", "scripted", "think", "human")

#: Short names of agents that are another spec.
ALIASES: dict[str, str] = {"oracle": "think:oracle"}

#: What `AgentSpec.kind` may be ("run": a model zip or a run directory of any trainer).
KINDS: tuple[str, ...] = (*AGENT_NAMES, "repeat", "replay", "run")


def think_options(spec: str) -> dict[str, Any]:
    """The think agent's strategist options named by `think:MODEL` (`{}` for anything else).

    >>> think_options("think:oracle"), think_options("think:http://127.0.0.1:8080")
    ({'model_path': 'oracle'}, {'base_url': 'http://127.0.0.1:8080'})
    >>> think_options("think:first")
    {'engine': 'first'}
    """
    if not spec.startswith("think:"):
        return {}
    model = spec.split(":", 1)[1]
    if not model:
        raise AgentError(
            "think: names no strategist; use think:oracle, think:M.gguf, "
            "think:policy.pt or think:http://HOST:PORT"
        )
    if model.startswith(("http://", "https://")):
        return {"base_url": model}
    if model in (*RULE_STRATEGISTS, "fallback"):  # no file: the strategist itself
        return {"engine": model}
    return {"model_path": model}


def repeat_action(spec: str) -> int | None:
    """The action index of a `repeat:N` spec (None for any other spec).

    >>> repeat_action("repeat:2"), repeat_action("random")
    (2, None)
    """
    if not spec.startswith("repeat:"):
        return None
    index = spec.partition(":")[2]
    if not index.isdigit():
        raise AgentError(f"agent {spec!r}: write repeat:N with N an action index (repeat:0)")
    return int(index)


def unknown_agent(spec: str) -> AgentError:
    """The error for an agent spec that names nothing (a missing model file says so)."""
    path = Path(spec).expanduser()
    if spec.endswith(".zip") and not path.exists():
        return AgentError(f"model file not found: {path}")
    return AgentError(
        f"unknown agent {spec!r}; use one of {', '.join(AGENT_NAMES)}, think:MODEL, a model "
        "PATH.zip, a run directory (train ppo/bc/appo/dreamer, curriculum, tune pbt) or "
        "replay:ARCHIVE.npz / replay:DATASET_ID"
    )


@dataclass(frozen=True)
class AgentSpec:
    """An agent spec, parsed and checked (`AgentSpec.parse`).

    Args:
        text: the spec as given, aliases expanded (`oracle` is `think:oracle`): what reports
            and ladder rows show.
        kind: one of `KINDS`.
        think: the strategist options of `think:MODEL` (`{}` otherwise).
        action: the action index of `repeat:N` (None otherwise).
        source: the archive or dataset of `replay:SOURCE` (None otherwise).
        run: the trained agent on disk of a model zip or run directory (None otherwise).
    """

    text: str
    kind: str
    think: dict[str, Any] = field(default_factory=dict)
    action: int | None = None
    source: str | None = None
    run: AgentRun | None = None

    @classmethod
    def parse(cls, text: str | AgentSpec) -> AgentSpec:
        """The spec `text` names, checked; an `AgentSpec` is returned as it is."""
        if isinstance(text, AgentSpec):
            return text
        text = ALIASES.get(text, text)
        if text.startswith("think:") or text == "think":
            return cls(text, "think", think=think_options(text))
        if text in AGENT_NAMES:
            return cls(text, text)
        if (action := repeat_action(text)) is not None:
            return cls(text, "repeat", action=action)
        if (source := replay_source(text)) is not None:
            check_replay(text)  # a missing, corrupt or foreign file: one line before any work
            return cls(text, "replay", source=source)
        path = Path(text).expanduser()
        if path.is_dir() or path.is_file():
            return cls(text, "run", run=find_run(path))
        raise unknown_agent(text)

    @property
    def weights(self) -> str:
        """What the agent loaders read: a run's model zip (or the Dreamer run directory); the
        text itself for any other agent."""
        return str(self.run.weights) if self.run is not None else self.text

    @property
    def is_dreamer(self) -> bool:
        """A `train dreamer` run (its own loader and config)."""
        return self.run is not None and self.run.kind == "dreamer"

    @property
    def is_model(self) -> bool:
        """An SB3 model zip of any trainer (the run's, or a bare one)."""
        return self.run is not None and not self.is_dreamer

    @property
    def acts_on_observations(self) -> bool:
        """Whether it acts on observations alone (random or a model), so it can play beside
        many envs on the vector engine; the others read the emulator or wait for answers."""
        return self.kind == "random" or self.is_model

    def describe(self) -> dict[str, Any]:
        """What a report records about the agent: its spec and, for a trained one, the run's
        kind, weights, env and wrappers.

        >>> AgentSpec.parse("scripted").describe()
        {'agent': 'scripted', 'kind': 'scripted'}
        """
        if self.run is None:
            return {"agent": self.text, "kind": self.text.split(":", 1)[0]}
        return {"agent": self.text, **self.run.to_dict()}

    def __str__(self) -> str:
        return self.text
