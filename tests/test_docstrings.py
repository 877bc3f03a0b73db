"""The documentation standards every module keeps, read with `ast` (nothing imported): each module
has a doctest (they run under `--doctest-modules`), and public constructors document their
arguments (each argument's name appears in the class's or its `__init__`'s docstring).

Run `python tests/test_docstrings.py` to print every violation at once.
"""

from __future__ import annotations

import ast
import doctest
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The package's source folders (pyproject.toml's package-dir).
FOLDERS = ("metabonk_gym", "cli", "wrappers", "rewards", "savestates")


def sources() -> Iterator[Path]:
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def docstrings(module: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    for node in ast.walk(module):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield node, text


def modules_without_doctests() -> list[str]:
    parser = doctest.DocTestParser()
    out = []
    for path in sources():
        module = ast.parse(path.read_text())
        if not any(parser.get_examples(text) for _, text in docstrings(module)):
            out.append(f"{path.relative_to(ROOT)}: no doctest (add a `>>>` example that runs)")
    return out


def _is_public(node: ast.ClassDef, path: Path) -> bool:
    return not node.name.startswith("_") and not path.name.startswith("_")


def undocumented_constructor_arguments() -> list[str]:
    out = []
    for path in sources():
        module = ast.parse(path.read_text())
        for node in ast.walk(module):
            if not isinstance(node, ast.ClassDef) or not _is_public(node, path):
                continue
            init = next(
                (b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"),
                None,
            )
            if init is None:
                continue
            params = init.args.posonlyargs + init.args.args[1:] + init.args.kwonlyargs
            names = [a.arg for a in params]
            names += [a.arg for a in (init.args.vararg, init.args.kwarg) if a is not None]
            text = (ast.get_docstring(node) or "") + "\n" + (ast.get_docstring(init) or "")
            missing = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", text)]
            if missing:
                out.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}() does not document "
                    f"{', '.join(missing)} (an Args: section in its docstring)"
                )
    return out


def test_the_reader_finds_doctests_and_arguments() -> None:
    module = ast.parse('"""Doc.\n\n>>> 1 + 1\n2\n"""\nclass A:\n    def __init__(self, x): ...\n')
    assert [text for _, text in docstrings(module)] == ["Doc.\n\n>>> 1 + 1\n2\n"]
    assert any(p.name == "process.py" for p in sources())


def test_every_module_has_a_doctest() -> None:
    violations = modules_without_doctests()
    assert not violations, f"{len(violations)} module(s):\n" + "\n".join(violations)


def test_public_constructors_document_their_arguments() -> None:
    violations = undocumented_constructor_arguments()
    assert not violations, f"{len(violations)} class(es):\n" + "\n".join(violations)


if __name__ == "__main__":
    for title, found in (
        ("modules without a doctest", modules_without_doctests()),
        ("constructors with undocumented arguments", undocumented_constructor_arguments()),
    ):
        print(f"== {title}: {len(found)}")
        print("\n".join(found))
