"""Graph stores for the long-term memory: the embedded `ladybug` database or a Neo4j server.

What: `open_store(where)` opens a path (an embedded `ladybug` database, the maintained Kuzu
continuation, no server) or a `neo4j://` / `bolt://` URL (the official `neo4j` driver); both
speak Cypher with one schema (`SCHEMA`) and one interface: `query` (rows as dicts) and `write`
(a batch of statements in one transaction). Why: the knowledge graph and its queries are written
once; a locked, corrupt or unreachable database is a `MemoryStoreError` naming the cause and fix.
Never import `kuzu` in the same process: it registers the same native types as `ladybug`.

>>> store = open_store(None)            # an in-memory embedded database
>>> store.write([("MERGE (a:Area {id: $id}) SET a.name = $name", {"id": "w:1", "name": "one"})])
>>> store.query("MATCH (a:Area) RETURN a.id AS id, a.name AS name")
[{'id': 'w:1', 'name': 'one'}]
>>> store.close()
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from metabonk_gym.errors import MemoryStoreError as MemoryStoreError  # re-exported

Statement = tuple[str, dict[str, Any]]

#: Node tables: label -> (property, type) pairs; every node has the primary key `id`.
NODES: dict[str, tuple[tuple[str, str], ...]] = {
    "Area": (
        ("world", "STRING"),
        ("number", "INT64"),
        ("name", "STRING"),
        ("first_step", "INT64"),
        ("last_step", "INT64"),
        ("visits", "INT64"),
        ("grid", "STRING"),
    ),
    "TileClass": (("game", "STRING"), ("code", "STRING"), ("name", "STRING"), ("kind", "STRING")),
    "Player": (
        ("area", "STRING"),
        ("x", "INT64"),
        ("y", "INT64"),
        ("hp", "INT64"),
        ("step", "INT64"),
        ("episode", "INT64"),
    ),
    "Tile": (
        ("area", "STRING"),
        ("x", "INT64"),
        ("y", "INT64"),
        ("kind", "STRING"),
        ("walkable", "BOOLEAN"),
        ("leads_to", "STRING"),
    ),
    "Entity": (
        ("area", "STRING"),
        ("kind", "STRING"),
        ("name", "STRING"),
        ("x", "INT64"),
        ("y", "INT64"),
        ("state", "STRING"),
        ("last_step", "INT64"),
        ("episode", "INT64"),
    ),
    "Event": (
        ("kind", "STRING"),
        ("what", "STRING"),
        ("area", "STRING"),
        ("x", "INT64"),
        ("y", "INT64"),
        ("step", "INT64"),
        ("episode", "INT64"),
        ("note", "STRING"),
        ("player", "STRING"),
        ("entity", "STRING"),
    ),
    "Quest": (("title", "STRING"), ("kind", "STRING"), ("priority", "INT64"), ("status", "STRING")),
    "Objective": (
        ("quest", "STRING"),
        ("text", "STRING"),
        ("priority", "INT64"),
        ("status", "STRING"),
        ("step", "INT64"),
    ),
}
#: Relationship tables: type -> (from label, to label, properties).
RELS: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    "IN_AREA": ("Tile", "Area", ()),
    "FOUND_IN": ("Entity", "Area", ()),
    "HAPPENED_IN": ("Event", "Area", ()),
    "INVOLVES": ("Event", "Entity", ()),
    "DID": ("Player", "Event", ()),
    "HAS_OBJECTIVE": ("Quest", "Objective", ()),
    "LOCATED_IN": ("Player", "Area", ()),
    "CONNECTS": ("Area", "Area", (("x", "INT64"), ("y", "INT64"))),
}

#: Relationships written with their node (in the same statement, not one more per flush):
#: label -> (relationship, the property naming the other node, its label, True: node -> other,
#: True: the relationship follows the property when it changes, e.g. where the player is).
OWNED: dict[str, tuple[tuple[str, str, str, bool, bool], ...]] = {
    "Player": (("LOCATED_IN", "area", "Area", True, True),),
    "Tile": (("IN_AREA", "area", "Area", True, False),),
    "Entity": (("FOUND_IN", "area", "Area", True, False),),
    "Event": (
        ("HAPPENED_IN", "area", "Area", True, False),
        ("DID", "player", "Player", False, False),
        ("INVOLVES", "entity", "Entity", True, False),  # last: most events have none
    ),
    "Objective": (("HAS_OBJECTIVE", "quest", "Quest", False, False),),
}


def schema_ddl() -> list[str]:
    """The embedded database's `CREATE ... TABLE` statements (ladybug / Kuzu DDL).

    >>> schema_ddl()[0]
    'CREATE NODE TABLE IF NOT EXISTS Area(id STRING PRIMARY KEY, world STRING, number INT64, name STRING, first_step INT64, last_step INT64, visits INT64, grid STRING)'
    """
    out = []
    for label, props in NODES.items():
        cols = ", ".join(["id STRING PRIMARY KEY", *(f"{p} {t}" for p, t in props)])
        out.append(f"CREATE NODE TABLE IF NOT EXISTS {label}({cols})")
    for rel, (src, dst, props) in RELS.items():
        cols = ", ".join([f"FROM {src} TO {dst}", *(f"{p} {t}" for p, t in props)])
        out.append(f"CREATE REL TABLE IF NOT EXISTS {rel}({cols})")
    return out


class GraphStore:
    """The interface both backends share (see the module docstring)."""

    #: Where the graph lives (a path, a URL, or ":memory:").
    where: str = ""

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a read query; its rows as dicts keyed by the RETURN names."""
        raise NotImplementedError

    def write(self, statements: Sequence[Statement]) -> None:
        """Run write statements in one transaction (all or none)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the database (the embedded file lock, the driver's connections)."""


#: What `metabonk memory query` may run: reading clauses first, one statement. The database is
#: opened read-only, but `COPY ... TO`, `EXPORT DATABASE`, `INSTALL`/`LOAD EXTENSION` and
#: `ATTACH` act outside it.
READ_STARTS: tuple[str, ...] = ("MATCH", "OPTIONAL", "UNWIND", "WITH", "RETURN", "CALL")
#: Rows `metabonk memory query` returns at most, the memory a query may use beyond what the
#: process had (bytes), and its deadline (seconds).
MAX_ROWS = 100_000
QUERY_MEMORY = 1 << 30
QUERY_TIMEOUT_S = 60.0
#: Words that act outside the database (files, extensions, other databases, settings) or
#: change it: refused anywhere in a query, not only first (a property may still be named so
#: after a dot, or quoted in backticks).
OUTSIDE_WORDS: frozenset[str] = frozenset(
    {
        "COPY",
        "EXPORT",
        "IMPORT",
        "INSTALL",
        "UNINSTALL",
        "LOAD",
        "ATTACH",
        "DETACH",
        "USE",
        "CHECKPOINT",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "CREATE",
        "MERGE",
        "SET",
        "DELETE",
        "DROP",
        "ALTER",
        "REMOVE",
    }
)
#: One lexical unit of Cypher as the database's grammar reads it: a comment (`// ...` to the end
#: of the line, `/* ... */`), a string (single or double quotes, backslash escapes), a name in
#: backticks (a doubled backtick inside), a word, or any other character.
_TOKENS = re.compile(
    r"(?P<comment>//[^\r\n]*|/\*.*?(?:\*/|\Z))"
    r"|(?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|\"(?:[^\"\\]|\\.)*(?:\"|\Z))"
    r"|(?P<name>`(?:[^`]|``)*(?:`|\Z))"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<other>\S)",
    re.DOTALL,
)


def cypher_tokens(cypher: str) -> list[tuple[str, str]]:
    """(kind, text) of each token of `cypher`, comments dropped: kinds `string`, `name`,
    `word` and `other`. A quote inside a comment starts no string, and `//` inside a string
    starts no comment, as in the database's own grammar.

    >>> cypher_tokens("MATCH (a) // it's\\nRETURN 'x // y'")
    [('word', 'MATCH'), ('other', '('), ('word', 'a'), ('other', ')'), ('word', 'RETURN'), ('string', "'x // y'")]
    """
    out = []
    for match in _TOKENS.finditer(cypher):
        kind = match.lastgroup or "other"
        if kind != "comment":
            out.append((kind, match.group()))
    return out


def check_read_query(cypher: str) -> str:
    """`cypher` if it is one statement that starts with a reading clause, else a
    `MemoryStoreError` (a query must not write files or change the database).

    >>> check_read_query("MATCH (a:Area) RETURN a.id")
    'MATCH (a:Area) RETURN a.id'
    >>> check_read_query("COPY (MATCH (a:Area) RETURN a.id) TO 'out.csv'")
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.MemoryStoreError: memory query refused: it starts with COPY; queries only read (start with MATCH, OPTIONAL, UNWIND, WITH, RETURN or CALL), one statement
    """
    tokens = cypher_tokens(cypher)
    while tokens and tokens[-1] == ("other", ";"):
        tokens.pop()
    first = tokens[0][1].upper() if tokens and tokens[0][0] == "word" else ""
    after_dot = {
        i + 1 for i, token in enumerate(tokens) if token in (("other", "."), ("other", ":"))
    }
    outside = [
        text.upper()
        for i, (kind, text) in enumerate(tokens)
        if kind == "word" and text.upper() in OUTSIDE_WORDS and i not in after_dot
    ]
    what = None
    if ("other", ";") in tokens:
        what = "several statements"
    elif first not in READ_STARTS:
        what = f"it starts with {first or (tokens[0][1] if tokens else 'nothing')}"
    elif outside:
        what = f"it holds {outside[0]}"
    if what is not None:
        raise MemoryStoreError(
            f"memory query refused: {what}; queries only read (start with "
            f"{', '.join(READ_STARTS[:-1])} or {READ_STARTS[-1]}), one statement"
        )
    return cypher


def _vm_data() -> int | None:
    """Bytes of data this process has mapped (Linux `VmData`), None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@contextlib.contextmanager
def capped_memory(extra: int) -> Iterator[None]:
    """Within: this process may map at most `extra` more bytes of data (the soft
    `RLIMIT_DATA`, restored after), so a query that would take gigabytes fails with
    `bad_alloc` instead. Without `resource` or `/proc` (not Linux), no cap."""
    try:
        import resource
    except ImportError:  # pragma: no cover (Windows)
        yield
        return
    used = _vm_data()
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if used is None:
        yield
        return
    cap = used + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield  # already as tight
        return
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


class EmbeddedStore(GraphStore):
    """A `ladybug` database in a file (or in memory with `path=None`), schema created on open.

    Args:
        path: the database file (created with its folder when missing); None: in memory only.
        buffer_pool_mb: the database's page cache in MiB (address space, used as needed).
        read_only: open an existing database for reading (while a run writes it).
    """

    def __init__(
        self, path: str | Path | None, buffer_pool_mb: int = 256, read_only: bool = False
    ) -> None:
        try:
            import ladybug
        except ImportError as exc:
            raise MemoryStoreError(
                "the embedded memory needs ladybug: pip install 'metabonk-gym[memory]'"
            ) from exc

        self.where = str(path) if path is not None else ":memory:"
        if path is not None and not read_only:
            Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        if path is not None and read_only and not Path(path).expanduser().exists():
            raise MemoryStoreError(f"no memory database at {path}")
        try:
            self._db = ladybug.Database(
                str(Path(path).expanduser()) if path is not None else ":memory:",
                buffer_pool_size=buffer_pool_mb * 1024 * 1024,
                max_num_threads=1,
                read_only=read_only,
            )
            self._conn = ladybug.Connection(self._db)
            for ddl in [] if read_only else schema_ddl():
                self._conn.execute(ddl)
            if read_only:
                self._check_schema()
        except MemoryStoreError:
            self.close()
            raise
        except RuntimeError as exc:
            raise MemoryStoreError(_explain(self.where, exc)) from exc

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        try:
            result = self._conn.execute(cypher, params or {})
        except RuntimeError as exc:
            raise MemoryStoreError(f"memory query failed on {self.where}: {exc}") from exc
        assert not isinstance(result, list)
        names = result.get_column_names()
        return [dict(zip(names, row)) for row in result.get_all()]

    def _check_schema(self) -> None:
        """Refuse a database without the memory's tables (an empty or foreign file)."""
        tables = {str(row["name"]) for row in self.query("CALL show_tables() RETURN name")}
        missing = sorted(set(NODES) - tables)
        if missing:
            raise MemoryStoreError(
                f"{self.where} is empty or not a metabonk memory (no {', '.join(missing[:3])} "
                "table); give the memory.lbdb a run wrote"
            )

    def read_query(
        self, cypher: str, max_rows: int = MAX_ROWS, timeout_s: float = QUERY_TIMEOUT_S
    ) -> list[dict[str, Any]]:
        """Rows of a user's read-only query (`check_read_query`), at most `max_rows` of them,
        within `timeout_s` and `QUERY_MEMORY` more bytes of memory; else `MemoryStoreError`."""
        check_read_query(cypher)
        self._conn.set_query_timeout(int(timeout_s * 1000))
        rows: list[dict[str, Any]] = []
        try:
            with capped_memory(QUERY_MEMORY):
                result = self._conn.execute(cypher, {})
                if isinstance(result, list):  # several statements slipped through
                    raise MemoryStoreError("memory query refused: several statements")
                names = result.get_column_names()
                while result.has_next():
                    if len(rows) >= max_rows:
                        raise MemoryStoreError(
                            f"memory query returned more than {max_rows} rows; add LIMIT "
                            "or aggregate"
                        )
                    rows.append(dict(zip(names, result.get_next())))
        except MemoryStoreError:
            raise
        except (RuntimeError, MemoryError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "bad_alloc" in text or isinstance(exc, MemoryError):
                text = f"it needs more than {QUERY_MEMORY >> 20} MiB of memory"
            elif "interrupt" in text.lower() or "timeout" in text.lower():
                text = f"it ran past its {timeout_s:g} s deadline"
            raise MemoryStoreError(f"memory query failed on {self.where}: {text}") from None
        finally:
            self._conn.set_query_timeout(0)
        return rows

    def write(self, statements: Sequence[Statement]) -> None:
        if not statements:
            return
        try:
            self._conn.execute("BEGIN TRANSACTION")
            try:
                for cypher, params in statements:
                    self._conn.execute(cypher, params)
            except BaseException:
                with contextlib.suppress(RuntimeError):  # a failed statement may end it
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except RuntimeError as exc:
            hint = " (raise buffer_pool_mb)" if "buffer pool" in str(exc).lower() else ""
            raise MemoryStoreError(f"memory write failed on {self.where}: {exc}{hint}") from exc

    def close(self) -> None:
        conn, db = getattr(self, "_conn", None), getattr(self, "_db", None)
        if conn is not None:
            conn.close()
        if db is not None:
            db.close()
        self._conn = self._db = None  # type: ignore[assignment]


class Neo4jStore(GraphStore):
    """A Neo4j server through the official `neo4j` driver (`pip install metabonk-gym[memory]`).

    Args:
        url: `neo4j://host:port` or `bolt://host:port`.
        auth: (user, password); default from nothing: `("neo4j", "neo4j")`.
        database: the Neo4j database name (None: the server's default).
        timeout_s: how long connecting may take before `MemoryStoreError`.
    """

    def __init__(
        self,
        url: str,
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        try:
            import neo4j
        except ImportError as exc:
            raise MemoryStoreError(
                f"{url} needs the neo4j driver: pip install 'metabonk-gym[memory]' (or neo4j)"
            ) from exc
        self.where = url
        self.database = database
        try:
            self._driver = neo4j.GraphDatabase.driver(
                url,
                auth=auth or ("neo4j", "neo4j"),
                connection_timeout=timeout_s,
                connection_acquisition_timeout=timeout_s,
                max_transaction_retry_time=timeout_s,
            )
            self._driver.verify_connectivity()
            for label in NODES:
                self._run(
                    f"CREATE CONSTRAINT IF NOT EXISTS FOR (n:{label}) REQUIRE n.id IS UNIQUE", {}
                )
        except Exception as exc:
            driver = getattr(self, "_driver", None)
            if driver is not None:
                driver.close()
            raise MemoryStoreError(
                f"cannot reach the Neo4j server at {url}: {type(exc).__name__}: {exc}. Start one "
                "(docker run -p 7687:7687 -e NEO4J_AUTH=neo4j/secret neo4j:5) and pass its "
                "bolt:// URL with auth, or give a file path for the embedded database"
            ) from exc

    def _run(self, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        records, _, _ = self._driver.execute_query(cypher, params, database_=self.database)
        return [r.data() for r in records]

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        try:
            return self._run(cypher, params or {})
        except Exception as exc:
            raise MemoryStoreError(f"memory query failed on {self.where}: {exc}") from exc

    def write(self, statements: Sequence[Statement]) -> None:
        if not statements:
            return

        def work(tx: Any) -> None:
            for cypher, params in statements:
                tx.run(cypher, params).consume()

        try:
            with self._driver.session(database=self.database) as session:
                session.execute_write(work)
        except Exception as exc:
            raise MemoryStoreError(f"memory write failed on {self.where}: {exc}") from exc

    def close(self) -> None:
        self._driver.close()


def is_server_url(where: str | Path | None) -> bool:
    """Whether `where` names a Neo4j server rather than a file.

    >>> is_server_url("bolt://127.0.0.1:7687"), is_server_url("runs/memory.lbdb")
    (True, False)
    """
    return isinstance(where, str) and where.split("://")[0] in (
        "neo4j",
        "neo4j+s",
        "neo4j+ssc",
        "bolt",
        "bolt+s",
        "bolt+ssc",
    )


def open_store(where: str | Path | None, **kwargs: Any) -> GraphStore:
    """The store for `where`: a Neo4j URL, a database file path, or None (in memory)."""
    if is_server_url(where):
        return Neo4jStore(str(where), **kwargs)
    if isinstance(where, str) and "://" in where:
        raise MemoryStoreError(
            f"unknown memory URL {where!r}: give a file path, or a neo4j:// or bolt:// URL"
        )
    return EmbeddedStore(where, **kwargs)


def _explain(where: str, exc: Exception) -> str:
    """A one-line message for a database that would not open: what happened and what to do."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "lock" in text.lower():
        return (
            f"the memory database {where} is locked by another process ({text}); stop that run "
            "or give this one another memory path"
        )
    lowered = text.lower()
    if any(
        word in lowered
        for word in ("not a valid", "corrupt", "wal", "cannot read checkpoint", "outside the")
    ):
        return (
            f"the memory database {where} is truncated, corrupt or not a ladybug database; move "
            "it aside (it is left untouched) or give another memory path"
        )
    return f"cannot open the memory database {where}: {text}"
