"""Docstrings say what the code does and why, for a reader who never saw the project's tracker:
no words about the process that made them ("issue 24", "the lead's", "the training issue")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_docstrings import docstrings, sources

ROOT = Path(__file__).resolve().parent.parent
PROCESS_WORDS = re.compile(
    r"\bissue \d+|\bthe lead\b|\bthe lead's\b|\bthe (training |vector-engine )?issue('s)?\b", re.I
)


def process_words() -> list[str]:
    out = []
    for path in sources():
        for node, text in docstrings(ast.parse(path.read_text())):
            found = PROCESS_WORDS.search(text)
            if found:
                line = getattr(node, "lineno", 1)
                out.append(f"{path.relative_to(ROOT)}:{line}: {found.group(0)!r} in a docstring")
    return out


def test_the_pattern_finds_process_words() -> None:
    for text in (
        "as issue 24 asked",
        "the lead's cli",
        "the issue's budgets",
        "of the training issue",
    ):
        assert PROCESS_WORDS.search(text), text
    assert not PROCESS_WORDS.search("leading zeros; an issue with the ROM; the issues list")


def test_no_docstring_speaks_of_the_process() -> None:
    found = process_words()
    assert not found, "\n".join(found)


if __name__ == "__main__":
    print("\n".join(process_words()) or "none")
