"""The import graph of metabonk_gym: layers without cycles, and generic code that names no game.

The graph is read with `ast` from the source folders (`metabonk_gym/`, and `cli/`, `wrappers/`,
`rewards/`, `savestates/` under their installed names `metabonk_gym.*`), nothing is imported.
Every import statement of a project module is an edge: module level, inside `if TYPE_CHECKING:`,
and inside functions alike. `from package import name` is an edge to `package.name` when that is a
module, else to `package`; importing `a.b.c` also runs `a.b`'s `__init__`, so it is an edge to
that package too (the root package `metabonk_gym`, which registers the envs, is left out: every
import runs it).

Rules (each a test below):
1. No cycle among the project's modules, nor among its top-level packages (`gba`, `think`, ...).
2. No upward edge: a module imports only modules of its own layer or the layers below it
   (`LAYERS`, lowest first; a module belongs to the layer of its longest matching prefix).
3. Function-local imports of the project's own modules only where they defer an optional heavy
   dependency: the imported module imports one of `HEAVY_DEPS` at module level, itself or
   through the project modules it imports at module level. Anything else goes at the top.
4. `is_megabonk` is gone, and modules below the games layer name no game in code: no
   identifier (name, attribute, definition, argument, keyword, import alias) and no string
   constant other than a docstring contains a name of `GAME_NAMES` (case-insensitive, so an
   env id such as "MetaBonk/BonkQuest-v0" in code counts, and so does a default argument).
   Docstrings (doctests included) and comments are exempt: they may show an env id as an
   example. `GAME_NAME_EXEMPT` lists the few modules whose job is to name the bundled games,
   with the reason.

Run `python tests/test_import_graph.py` to print every violation at once.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Source folder -> the package name it installs as (pyproject.toml's package-dir).
SOURCES: dict[str, str] = {
    "metabonk_gym": "metabonk_gym",
    "cli": "metabonk_gym.cli",
    "wrappers": "metabonk_gym.wrappers",
    "rewards": "metabonk_gym.rewards",
    "savestates": "metabonk_gym.savestates",
}

#: The layers, lowest first: (name, module prefixes). A module may import its own layer and
#: those before it in this table, never one after it. The reward terms sit below the envs: every
#: env evaluates `reward=` terms (the env contract), and they import nothing but errors.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0 errors/utils",
        (
            "metabonk_gym.errors",
            "metabonk_gym.utils",
            "metabonk_gym.process",
            "metabonk_gym.runloop",  # the training-run skeleton (every trainer's loop)
            "metabonk_gym.rundir",  # run directories (every trainer's, the fine-tune's)
            "metabonk_gym.configfile",
            "metabonk_gym.gamedata",
            "metabonk_gym.preprocess",
            "metabonk_gym.contract",  # the env contract's names and checks
            "metabonk_gym.target",  # pass marks as data (benches and learning proofs)
            "metabonk_gym.savestates",  # data only
        ),
    ),
    ("1 reward terms", ("metabonk_gym.rewards",)),
    (
        "2 env backends and envs",
        (
            "metabonk_gym",  # the package itself: registers the envs
            "metabonk_gym.gba",
            "metabonk_gym.skyemu",
            "metabonk_gym.bonklink",
            "metabonk_gym.registration",
            "metabonk_gym.vector",
        ),
    ),
    (
        "3 wrappers, think, expert machinery",
        (
            "metabonk_gym.wrappers",
            "metabonk_gym.think",
            "metabonk_gym.experts",
            "metabonk_gym.memory",  # the long-term memory (generic, read by think's prompt)
            "metabonk_gym.integrate",  # bring your own ROM: RAM search, watch, tiles (generic)
            # learned screen models (net, weights-only files, scoring, binding `learned` reward
            # terms): below both training's make_env, which binds them, and video, which trains them
            "metabonk_gym.learned",
        ),
    ),
    ("4 games", ("metabonk_gym.games",)),
    ("5 training", ("metabonk_gym.training", "metabonk_gym.video", "metabonk_gym.worldmodel")),
    (
        "6 agents",
        ("metabonk_gym.agents", "metabonk_gym.watch"),  # watch: the live and replay viewer
    ),
    ("7 cli", ("metabonk_gym.cli", "metabonk_gym.bench")),
)

#: Optional heavy dependencies (the train/play/think extras): the only reason for a
#: function-local import of a project module.
HEAVY_DEPS: frozenset[str] = frozenset(
    {
        "torch",
        "stable_baselines3",
        "sb3_contrib",
        "llama_cpp",
        "gguf",
        "pygame",
        "ray",
        "minari",
        "h5py",
        "tensorboard",
        "imageio",
        "imageio_ffmpeg",
        "tqdm",
        "jsonschema",
        "httpx",
        "cv2",
        "matplotlib",
    }
)

GAME_NAMES: tuple[str, ...] = ("bonkquest", "bonkarena", "megabonk")
#: Modules below the games layer that may name the bundled games in code, and why.
GAME_NAME_EXEMPT: dict[str, str] = {
    "metabonk_gym.gamedata": "BUNDLED_GAMES: the one list of the bundled game folders",
    "metabonk_gym.registration": "registers the bundled games' env ids",
    "metabonk_gym.bonklink": "Megabonk's env over its plugin's BonkLink protocol, and the sim",
}
GAMES_LAYER = 4
#: PEP 562 lazy exports (package -> module its `__getattr__` imports), left out of the graph:
#: the import runs the first time the name is read, after the package has loaded, so it makes no
#: import-time cycle. Each names why the class belongs in the package's namespace.
LAZY_EXPORTS: dict[tuple[str, str], str] = {
    ("metabonk_gym.wrappers", "metabonk_gym.think.pause_to_think"): (
        "`from metabonk_gym.wrappers import PauseToThink`, as every other wrapper, while "
        "importing the wrappers never imports think (which imports wrappers)"
    ),
}


@dataclass(frozen=True)
class Edge:
    """One import statement of a project module."""

    source: str
    target: str
    line: int
    local: bool  # inside a function
    implicit: bool  # a package whose `__init__` the statement runs, not the module it names

    def where(self) -> str:
        return f"{module_file(self.source)}:{self.line}"


# ---------------------------------------------------------------------- reading the sources
@cache
def modules() -> dict[str, Path]:
    """Installed module name -> source file, for every module of the project."""
    found: dict[str, Path] = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def module_file(name: str) -> str:
    return str(modules()[name].relative_to(ROOT))


def is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


@cache
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(), filename=str(modules()[name]))


def _resolve(importer: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The project modules an import statement names (absolute, installed names)."""
    known = modules()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in known:
                yield alias.name
        return
    base = node.module or ""
    if node.level:
        package = importer if is_package(importer) else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    if base not in known:
        return
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        yield sub if sub in known else base


def _with_parents(target: str) -> Iterator[str]:
    """`target` and the packages whose `__init__` importing it runs (not the root package)."""
    yield target
    parts = target.split(".")
    for n in range(len(parts) - 1, 1, -1):
        parent = ".".join(parts[:n])
        if parent in modules():
            yield parent


def _imports(name: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of a module, with whether it sits inside a function."""

    def walk(node: ast.AST, local: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, local
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from walk(child, inner)

    yield from walk(tree(name), False)


@cache
def edges() -> tuple[Edge, ...]:
    """Every edge of the graph (self-edges, e.g. a package importing itself, left out)."""
    out: list[Edge] = []
    for name in modules():
        for node, local in _imports(name):
            for named in _resolve(name, node):
                for target in _with_parents(named):
                    if local and (name, named) in LAZY_EXPORTS:
                        continue
                    if target != name and not name.startswith(target + "."):
                        out.append(Edge(name, target, node.lineno, local, target != named))
    return tuple(out)


def layer_of(name: str) -> int:
    """Index in `LAYERS` of the longest prefix matching `name` (the root matches only itself)."""
    best, best_len = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = name == prefix or (prefix != "metabonk_gym" and name.startswith(prefix + "."))
            if matches and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


@cache
def heavy_modules() -> frozenset[str]:
    """Project modules that import an optional heavy dependency at module level, directly or
    through the project modules they import at module level."""
    direct: dict[str, bool] = {}
    deps: dict[str, set[str]] = {name: set() for name in modules()}
    for name in modules():
        heavy = False
        for node, local in _imports(name):
            if local:
                continue
            roots = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if not node.level else [])
            )
            heavy = heavy or any(r.split(".")[0] in HEAVY_DEPS for r in roots)
        direct[name] = heavy
    for edge in edges():
        if not edge.local:
            deps[edge.source].add(edge.target)
    result = {name for name, heavy in direct.items() if heavy}
    changed = True
    while changed:
        changed = False
        for name, targets in deps.items():
            if name not in result and targets & result:
                result.add(name)
                changed = True
    return frozenset(result)


# ---------------------------------------------------------------------- the rules
def cycles(graph: dict[str, set[str]] | None = None) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan) of `graph`, by default
    the module graph."""
    if graph is None:
        graph = {name: set() for name in modules()}
        for edge in edges():
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def _shortest_cycle(members: set[str]) -> list[Edge]:
    """A shortest cycle through the component's first module, as its edges (breadth first)."""
    by_source: dict[str, list[Edge]] = {}
    for edge in sorted(set(edges()), key=lambda e: (e.source, e.target, e.line)):
        if edge.source in members and edge.target in members:
            by_source.setdefault(edge.source, []).append(edge)
    start = min(members)
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in by_source.get(node, []):
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if edge.target not in came:
                    came[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    return []


def cycle_violations() -> list[str]:
    """One line per cycle: a shortest loop through it, each edge with its file and line."""
    out = []
    for component in cycles():
        loop = _shortest_cycle(set(component))
        steps = "\n".join(
            f"  {e.where()}: {e.source} -> {e.target}"
            + (" (runs the package's __init__)" if e.implicit else "")
            for e in loop
        )
        out.append(f"cycle among {len(component)} modules ({', '.join(component)}), e.g.:\n{steps}")
    return out


def package_of(name: str) -> str:
    """The top-level package of a module (`metabonk_gym.gba.env` -> `metabonk_gym.gba`)."""
    return ".".join(name.split(".")[:2])


def package_cycles() -> list[frozenset[str]]:
    """Cycles among the top-level packages (a module-level cycle-free graph can still have
    them: gba.a -> skyemu.b -> gba.c)."""
    graph: dict[str, set[str]] = {}
    for edge in edges():
        source, target = package_of(edge.source), package_of(edge.target)
        graph.setdefault(source, set())
        graph.setdefault(target, set())
        if source != target:
            graph[source].add(target)
    return [frozenset(component) for component in cycles(graph)]


def package_cycle_violations() -> list[str]:
    """One entry per package cycle, with the edges between its packages (the last three,
    gba<->skyemu, think<->wrappers and training<->video, were broken in issue 26)."""
    out = []
    for component in package_cycles():
        loop = sorted(
            f"{e.where()}: {e.source} -> {e.target}"
            for e in set(edges())
            if package_of(e.source) in component
            and package_of(e.target) in component
            and package_of(e.source) != package_of(e.target)
        )
        out.append(f"package cycle {sorted(component)}:\n  " + "\n  ".join(loop[:12]))
    return out


def upward_violations() -> list[str]:
    out = []
    for edge in sorted(set(edges()), key=lambda e: (e.source, e.line, e.target)):
        low, high = layer_of(edge.source), layer_of(edge.target)
        if high > low:
            out.append(
                f"{edge.where()}: {edge.source} (layer {LAYERS[low][0]}) imports "
                f"{edge.target} (layer {LAYERS[high][0]})"
            )
    return out


def local_import_violations() -> list[str]:
    heavy = heavy_modules()
    out = []
    for edge in sorted(set(edges()), key=lambda e: (e.source, e.line, e.target)):
        if edge.local and not edge.implicit and edge.target not in heavy:
            out.append(
                f"{edge.where()}: function-local import of {edge.target}, which needs no "
                "optional heavy dependency: import it at the top of the module"
            )
    return out


def _docstring_nodes(module: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                ids.add(id(body[0].value))
    return ids


_GAME_RE = re.compile("|".join(GAME_NAMES), re.IGNORECASE)


def game_name_uses(name: str) -> Iterator[tuple[int, str]]:
    """(line, what) for each identifier or non-docstring string naming a game in a module."""
    module = tree(name)
    docstrings = _docstring_nodes(module)
    for node in ast.walk(module):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            words = [node.name]
        elif isinstance(node, ast.arg) or isinstance(node, ast.keyword) and node.arg:
            words = [node.arg]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or ""]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            words = [node.value]
        for word in words:
            if _GAME_RE.search(word):
                yield getattr(node, "lineno", 0), word


def game_name_violations() -> list[str]:
    out = []
    for name in sorted(modules()):
        exempt = any(name == p or name.startswith(p + ".") for p in GAME_NAME_EXEMPT)
        if layer_of(name) >= GAMES_LAYER or exempt:
            continue
        for line, word in sorted(set(game_name_uses(name))):
            shown = word if len(word) <= 60 else word[:57] + "..."
            out.append(f"{module_file(name)}:{line}: {name} names a game in code: {shown!r}")
    return out


def is_megabonk_uses() -> list[str]:
    out = []
    for name in sorted(modules()):
        for node in ast.walk(tree(name)):
            word = (
                node.id
                if isinstance(node, ast.Name)
                else node.attr
                if isinstance(node, ast.Attribute)
                else node.name
                if isinstance(node, ast.FunctionDef | ast.alias)
                else None
            )
            if word is not None and word.rsplit(".", 1)[-1] == "is_megabonk":
                out.append(f"{module_file(name)}:{getattr(node, 'lineno', 0)}: is_megabonk")
    return out


# ---------------------------------------------------------------------- the tests
def _explain(violations: list[str]) -> str:
    return f"{len(violations)} violation(s):\n" + "\n".join(violations)


def test_the_graph_is_read() -> None:
    """The reader finds the modules and edges it must (a broken reader passes every rule)."""
    names = modules()
    for expected in ("metabonk_gym.gba.env", "metabonk_gym.cli.main", "metabonk_gym.wrappers"):
        assert expected in names
    targets = {(e.source, e.target) for e in edges()}
    assert ("metabonk_gym", "metabonk_gym.registration") in targets
    assert any(src.startswith("metabonk_gym.cli.") for src, _ in targets)
    assert layer_of("metabonk_gym.errors") == 0 and layer_of("metabonk_gym") == 2
    assert layer_of("metabonk_gym.gba.env") == 2 and layer_of("metabonk_gym.think.agent") == 3
    assert layer_of("metabonk_gym.experts.base") == 3 and layer_of("metabonk_gym.agents.human") == 6
    assert layer_of("metabonk_gym.cli.main") == len(LAYERS) - 1
    unplaced = [name for name in names if layer_of(name) < 0]
    assert not unplaced, f"add these modules to LAYERS: {unplaced}"


def test_the_reader_sees_local_relative_and_parent_imports(tmp_path: Path) -> None:
    code = (
        "from . import x\n"
        "def f():\n"
        "    from metabonk_gym.gba.env import GBAEnv\n"
        "    import metabonk_gym.utils\n"
    )
    module = ast.parse(code)
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found += [
                t for n in _resolve("metabonk_gym.gba.integration", node) for t in _with_parents(n)
            ]
    assert "metabonk_gym.gba.env" in found and "metabonk_gym.gba" in found
    assert "metabonk_gym.utils" in found and "metabonk_gym" not in found


def test_no_import_cycle() -> None:
    violations = cycle_violations()
    assert not violations, _explain(violations)


def test_no_package_cycle() -> None:
    violations = package_cycle_violations()
    assert not violations, _explain(violations)


def test_the_package_graph_sees_a_cycle_through_two_packages() -> None:
    graph = {"a.x": {"b.y"}, "b.y": {"a.z"}, "a.z": set()}  # no module cycle, a package cycle
    assert cycles(graph) == []
    packages: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            packages.setdefault(source.split(".")[0], set()).add(target.split(".")[0])
    packages.setdefault("b", set())
    assert cycles(packages) == [["a", "b"]]


def test_no_upward_import_between_layers() -> None:
    violations = upward_violations()
    assert not violations, _explain(violations)


def test_function_local_imports_only_defer_heavy_dependencies() -> None:
    violations = local_import_violations()
    assert not violations, _explain(violations)


def test_is_megabonk_is_gone() -> None:
    violations = is_megabonk_uses()
    assert not violations, _explain(violations)


def test_generic_layers_name_no_game() -> None:
    violations = game_name_violations()
    assert not violations, _explain(violations)


def all_violations() -> dict[str, list[str]]:
    return {
        "cycles": cycle_violations(),
        "package cycles": package_cycle_violations(),
        "upward imports": upward_violations(),
        "function-local imports of light project modules": local_import_violations(),
        "is_megabonk": is_megabonk_uses(),
        "game names below the games layer": game_name_violations(),
    }


if __name__ == "__main__":
    for title, found in all_violations().items():
        print(f"== {title}: {len(found)}")
        for line in found:
            print(line)


def test_pause_to_think_is_a_lazy_export_of_the_wrappers() -> None:
    """`from metabonk_gym.wrappers import PauseToThink` works, and importing the wrappers alone
    still loads nothing of think (a fresh interpreter, so earlier imports do not count)."""
    import subprocess

    code = (
        "import sys, metabonk_gym.wrappers as w\n"
        "assert not [m for m in sys.modules if m.startswith('metabonk_gym.think')]\n"
        "from metabonk_gym.wrappers import PauseToThink\n"
        "from metabonk_gym.think.pause_to_think import PauseToThink as Direct\n"
        "assert PauseToThink is Direct and 'PauseToThink' in w.__all__\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
