"""No function over `MAX_LINES` lines: a newcomer reads each one in a sitting.

Every function and method of the package's folders, `scripts/` and `gba/` is read with `ast`
(nothing imported) and measured from its `def` line to its last line. In `cli/` signatures do not
count (a typer command's options are its parameters, one `typer.Option` each, with its help): a
function there is measured from its first body statement, less the signatures (decorators
included) of the commands defined inside it (`register(app)`'s). `ALLOWED` names the functions still over the limit
that are being split; it may only shrink (an entry that is no longer over fails too).

Run `python tests/test_function_length.py` to print every long function with its length.

>>> lengths("def f():\\n    return 1\\n", "x.py")
{'x.py:f': 2}
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The folders read: the package's (pyproject.toml's package-dir), the scripts and the games' C
#: tree (its generators).
FOLDERS = ("metabonk_gym", "cli", "wrappers", "rewards", "savestates", "scripts", "gba")
#: Where only the body counts (typer commands: their signatures are their options).
BODY_ONLY = ("cli/",)
MAX_LINES = 100
#: Functions still over the limit, by `path:qualified.name`, while they are being split
#: (the trainers, the benches, the agents' play and ladder): remove an entry once its function
#: is short; add none.
ALLOWED: frozenset[str] = frozenset()


def sources() -> Iterator[Path]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def _is_function(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)


def _signature(node: ast.AST) -> int:
    """The lines of a function's decorators and signature (before its first body statement)."""
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return node.body[0].lineno - start


def lengths(source: str, rel: str) -> dict[str, int]:
    """Every function in `source` (the file `rel`), by `rel:Qualified.name`, with its length in
    lines (under `BODY_ONLY` less its own and its inner functions' signatures)."""
    out: dict[str, int] = {}
    body_only = rel.startswith(BODY_ONLY)

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                first = child.body[0].lineno if body_only else child.lineno
                n = (child.end_lineno or child.lineno) - first + 1
                if body_only:
                    inner = [f for f in ast.walk(child) if f is not child and _is_function(f)]
                    n -= sum(_signature(f) for f in inner)
                out[f"{rel}:{name}"] = n
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def long_functions() -> dict[str, int]:
    """Every function over `MAX_LINES` lines in the folders read, with its length."""
    found: dict[str, int] = {}
    for path in sources():
        rel = path.relative_to(ROOT).as_posix()
        found.update(lengths(path.read_text(), rel))
    return {name: n for name, n in sorted(found.items()) if n > MAX_LINES}


def test_the_counter_measures_functions_methods_and_command_bodies() -> None:
    source = (
        "class A:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return inner\n"
        "async def g(\n"
        "    a: int,\n"
        "    b: int,\n"
        "):\n"
        '    """Doc."""\n'
        "    return a\n"
    )
    assert lengths(source, "metabonk_gym/x.py") == {
        "metabonk_gym/x.py:A.m": 4,
        "metabonk_gym/x.py:A.m.inner": 2,
        "metabonk_gym/x.py:g": 6,
    }
    assert lengths(source, "cli/x.py")["cli/x.py:g"] == 2  # the signature does not count
    register = (
        "def register(app):\n"
        '    """Doc."""\n'
        "\n"
        '    @app.command("go")\n'
        "    def go(\n"
        "        n: int = 1,\n"
        "    ) -> None:\n"
        "        print(n)\n"
    )
    assert lengths(register, "cli/z.py") == {"cli/z.py:register": 3, "cli/z.py:register.go": 1}
    assert lengths(register, "metabonk_gym/z.py")["metabonk_gym/z.py:register"] == 8
    long = "def f():\n" + "    x = 1\n" * MAX_LINES
    assert lengths(long, "scripts/y.py") == {"scripts/y.py:f": MAX_LINES + 1}


def test_no_function_over_the_limit() -> None:
    found = long_functions()
    over = {name: n for name, n in found.items() if name not in ALLOWED}
    assert not over, f"{len(over)} function(s) over {MAX_LINES} lines (split them): " + ", ".join(
        f"{name} ({n})" for name, n in over.items()
    )
    stale = sorted(ALLOWED - set(found))
    assert not stale, f"no longer over {MAX_LINES} lines, remove from ALLOWED: {', '.join(stale)}"


if __name__ == "__main__":
    for name, n in long_functions().items():
        print(f"{n:5d}  {name}{'  (allowed)' if name in ALLOWED else ''}")
