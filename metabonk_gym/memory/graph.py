"""`KnowledgeGraph`: batched writes, Cypher queries and a Cypher export over a `GraphStore`.

What: writes are buffered in Python (`upsert` a node row, `relate` two nodes) and sent in one
transaction by `flush()`: per table one `UNWIND $rows ... CREATE` for nodes new to the database
(with the relationships their properties name, `OWNED`: a tile to its area, an event to its area
and player, the player to where it is) and one `UNWIND ... MATCH ... SET` for known ones; `query`
runs Cypher; `export_cypher(path)` writes a script of `CREATE` statements that loads the graph
into Neo4j (cypher-shell) or, through `load_cypher`, into a fresh embedded database. Why: each
statement costs milliseconds in the embedded database whatever its size, so rows are batched:
a flush every few hundred steps keeps the cost per step within the memory's budget
(docs/benchmarks.md#memory).

>>> g = KnowledgeGraph(None)
>>> g.upsert("Area", {"id": "0:1", "world": "0", "number": 1, "name": "1", "first_step": 0,
...     "last_step": 0, "visits": 1})
>>> g.pending, g.flush(), g.pending
(1, None, 0)
>>> g.counts()["Area"]
1
>>> g.close()
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from metabonk_gym.memory.store import (
    MAX_ROWS,
    NODES,
    OWNED,
    RELS,
    EmbeddedStore,
    GraphStore,
    MemoryStoreError,
    check_read_query,
    open_store,
)
from metabonk_gym.utils import atomic_write_text

logger = logging.getLogger("metabonk_gym.memory")
_DEFAULTS = {"STRING": "", "INT64": -1, "BOOLEAN": False}


def _literal(value: Any) -> str:
    """A Cypher literal (strings single-quoted with backslash escapes, on one line).

    >>> _literal("it's"), _literal(True), _literal(3)
    ("'it\\\\'s'", 'true', '3')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = json.dumps(str(value))[1:-1].replace('\\"', '"').replace("'", "\\'")
    return f"'{text}'"


def _props(row: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {_literal(v)}" for k, v in row.items() if v is not None) + "}"


class KnowledgeGraph:
    """See the module docstring.

    Args:
        where: a database file path, a `neo4j://` / `bolt://` URL, or None (in memory).
        **store_kwargs: go to the store (`auth=`, `database=`, `timeout_s=` for Neo4j;
            `buffer_pool_mb=` for the embedded database).
    """

    def __init__(self, where: str | Path | None = None, **store_kwargs: Any) -> None:
        self.store: GraphStore = open_store(where, **store_kwargs)
        self.where = self.store.where
        self._nodes: dict[str, dict[str, dict[str, Any]]] = {label: {} for label in NODES}
        self._rels: dict[str, dict[tuple[str, str], dict[str, Any]]] = {rel: {} for rel in RELS}
        self._known: dict[str, set[str]] = {}
        self._pairs: dict[str, set[tuple[str, str]]] = {}
        self._created: dict[str, set[tuple[str, str]]] = {}  # owned pairs of this flush
        #: (label, id) -> the value of each moving relationship's property last written
        self._moved: dict[tuple[str, str, str], Any] = {}
        if not self.store.query("MATCH (n) RETURN count(n) AS c")[0]["c"]:
            # a new database: nothing to look up before the first flush
            self._known = {label: set() for label in NODES}
            self._pairs = {rel: set() for rel in RELS}
        #: Flushes done and rows written so far.
        self.flushes = 0
        self.rows_written = 0

    # ------------------------------------------------------------------ buffered writes
    @property
    def pending(self) -> int:
        """Rows waiting for the next flush."""
        return sum(len(v) for v in self._nodes.values()) + sum(len(v) for v in self._rels.values())

    def upsert(self, label: str, row: dict[str, Any]) -> None:
        """Create or update the node `row["id"]` at the next flush (later rows replace earlier
        ones; properties left out get their defaults). Tiles, entities and events are linked to
        their `area`, objectives to their `quest` (`OWNED`) in the same statement."""
        self._nodes[label][row["id"]] = row

    def row(self, label: str, node_id: str) -> dict[str, Any]:
        """The buffered row of a node ({} when none waits for the next flush)."""
        return dict(self._nodes[label].get(node_id, {}))

    def relate(self, rel: str, a: str, b: str, **props: Any) -> None:
        """Create the relationship `(a)-[:rel]->(b)` (merged: at most one per pair)."""
        self._rels[rel][(a, b)] = props

    def _known_pairs(self, rel: str) -> set[tuple[str, str]]:
        """(from id, to id) of the `rel` relationships in the database (read once)."""
        known = self._pairs.get(rel)
        if known is None:
            src, dst, _ = RELS[rel]
            rows = self.store.query(
                f"MATCH (a:{src})-[:{rel}]->(b:{dst}) RETURN a.id AS src, b.id AS dst"
            )
            known = self._pairs[rel] = {(r["src"], r["dst"]) for r in rows}
        return known

    def _known_ids(self, label: str) -> set[str]:
        """Ids of `label` nodes in the database (read once, then kept up to date by flushes)."""
        known = self._known.get(label)
        if known is None:
            rows = self.store.query(f"MATCH (n:{label}) RETURN n.id AS id")
            known = self._known[label] = {r["id"] for r in rows}
        return known

    def statements(self) -> list[tuple[str, dict[str, Any]]]:
        """The buffered writes as Cypher statements (nodes first, then relationships): nodes new
        to the database are created with their owner relationship (`OWNED`), known ones
        updated; CREATE and MATCH cost about half of MERGE in the embedded database."""
        out: list[tuple[str, dict[str, Any]]] = []
        for label, rows in self._nodes.items():
            if not rows:
                continue
            props = NODES[label]
            known = self._known_ids(label)
            new: list[dict[str, Any]] = []
            old: list[dict[str, Any]] = []
            for r in rows.values():
                full = {"id": r["id"], **{p: r.get(p, _DEFAULTS[t]) for p, t in props}}
                (old if r["id"] in known else new).append(full)
            links = OWNED.get(label, ())
            for rel, prop, _, outgoing, _ in links:
                for r in new:
                    pair = (r["id"], r[prop]) if outgoing else (r[prop], r["id"])
                    self._created.setdefault(rel, set()).add(pair)
            if new:
                fields = ", ".join(["id: r.id", *(f"{p}: r.{p}" for p, _ in props)])
                cypher = f"UNWIND $rows AS r CREATE (n:{label} {{{fields}}})"
                for rel, prop, other, outgoing, _ in links:  # and the nodes its properties name
                    edge = f"(n)-[:{rel}]->(o)" if outgoing else f"(o)-[:{rel}]->(n)"
                    cypher += f" WITH n, r MATCH (o:{other} {{id: r.{prop}}}) CREATE {edge}"
                out.append((cypher, {"rows": new}))
            if old:
                sets = ", ".join(f"n.{p} = r.{p}" for p, _ in props)
                cypher = f"UNWIND $rows AS r MATCH (n:{label} {{id: r.id}}) SET {sets}"
                moving = [link for link in links if link[4]]
                moved = [
                    r
                    for r in old
                    if any(self._moved.get((label, r["id"], m[1])) != r[m[1]] for m in moving)
                ]
                still = [r for r in old if r not in moved] if moved else old
                if still:
                    out.append((cypher, {"rows": still}))
                if moved:  # the relationships that follow a property that changed
                    for rel, prop, other, _, _ in moving:
                        cypher += (
                            f" WITH n, r OPTIONAL MATCH (n)-[e:{rel}]->(:{other}) DELETE e "
                            f"WITH DISTINCT n, r MATCH (o:{other} {{id: r.{prop}}}) "
                            f"CREATE (n)-[:{rel}]->(o)"
                        )
                    out.append((cypher, {"rows": moved}))
        for rel, pairs in self._rels.items():
            if not pairs:
                continue
            src, dst, props = RELS[rel]
            linked = self._known_pairs(rel) | self._created.get(rel, set())
            fresh: list[dict[str, Any]] = []
            again: list[dict[str, Any]] = []
            for (a, b), kw in pairs.items():
                row = {"a": a, "b": b, **{p: kw.get(p, _DEFAULTS[t]) for p, t in props}}
                (again if (a, b) in linked else fresh).append(row)
            ends = f"(a:{src} {{id: r.a}}), (b:{dst} {{id: r.b}})"
            if fresh:
                fields = ", ".join(f"{p}: r.{p}" for p, _ in props)
                edge = f"[:{rel} {{{fields}}}]" if props else f"[:{rel}]"
                out.append(
                    (f"UNWIND $rows AS r MATCH {ends} CREATE (a)-{edge}->(b)", {"rows": fresh})
                )
            if again and props:  # a known pair only changes its properties
                sets = ", ".join(f"e.{p} = r.{p}" for p, _ in props)
                cypher = f"UNWIND $rows AS r MATCH (a:{src} {{id: r.a}})-[e:{rel}]->(b:{dst} {{id: r.b}}) SET {sets}"
                out.append((cypher, {"rows": again}))
        return out

    def flush(self) -> None:
        """Write the buffered rows in one transaction; on failure they stay buffered (and
        `MemoryStoreError` says why), so a later flush can still write them."""
        self._created.clear()
        statements = self.statements()
        if not statements:
            return
        self.store.write(statements)
        for label, rows in self._nodes.items():
            if rows:
                self._known_ids(label).update(rows)
                for _, prop, _, _, moves in OWNED.get(label, ()):
                    if moves:
                        for rid, row in rows.items():
                            self._moved[(label, rid, prop)] = row.get(prop)
        for rel, pairs in self._rels.items():
            if pairs:
                self._known_pairs(rel).update(pairs)
        for rel, created in self._created.items():
            self._known_pairs(rel).update(created)
        self._created.clear()
        self.rows_written += self.pending
        self.flushes += 1
        for rows in self._nodes.values():
            rows.clear()
        for pairs in self._rels.values():
            pairs.clear()

    # ------------------------------------------------------------------ reading
    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a Cypher query (buffered writes are not seen before `flush()`)."""
        return self.store.query(cypher, params)

    def read_query(self, cypher: str, max_rows: int = MAX_ROWS) -> list[dict[str, Any]]:
        """Rows of a user's query that only reads (`check_read_query`), at most `max_rows`,
        with a deadline and a memory cap on the embedded database (what `memory query` runs)."""
        if isinstance(self.store, EmbeddedStore):
            return self.store.read_query(cypher, max_rows)
        rows = self.store.query(check_read_query(cypher))
        if len(rows) > max_rows:
            raise MemoryStoreError(
                f"memory query returned more than {max_rows} rows; add LIMIT or aggregate"
            )
        return rows

    def counts(self) -> dict[str, int]:
        """Nodes per label and relationships per type in the database."""
        out = {}
        for label in NODES:
            out[label] = int(self.query(f"MATCH (n:{label}) RETURN count(n) AS c")[0]["c"])
        for rel, (src, dst, _) in RELS.items():
            rows = self.query(f"MATCH (:{src})-[e:{rel}]->(:{dst}) RETURN count(e) AS c")
            out[rel] = int(rows[0]["c"])
        return out

    # ------------------------------------------------------------------ export / import
    def cypher_lines(self) -> Iterable[str]:
        """The graph as Cypher `CREATE` statements, one per line (see `export_cypher`)."""
        for label, props in NODES.items():
            names = ["id", *(p for p, _ in props)]
            cols = ", ".join(f"n.{p} AS {p}" for p in names)
            for row in self.query(f"MATCH (n:{label}) RETURN {cols} ORDER BY n.id"):
                yield f"CREATE (:{label} {_props(row)});"
        for rel, (src, dst, props) in RELS.items():
            cols = "".join(f", e.{p} AS {p}" for p, _ in props)
            rows = self.query(
                f"MATCH (a:{src})-[e:{rel}]->(b:{dst}) RETURN a.id AS src, b.id AS dst{cols} "
                "ORDER BY src, dst"
            )
            for row in rows:
                a, b = row.pop("src"), row.pop("dst")
                extra = f" {_props(row)}" if row else ""
                yield (
                    f"MATCH (a:{src} {{id: {_literal(a)}}}), (b:{dst} {{id: {_literal(b)}}}) "
                    f"CREATE (a)-[:{rel}{extra}]->(b);"
                )

    def export_cypher(self, path: str | Path) -> int:
        """Write the graph as a Cypher script (atomically); returns its number of statements.
        Load it into Neo4j with `cypher-shell -f PATH`, or into an embedded database with
        `load_cypher`."""
        self.flush()
        lines = list(self.cypher_lines())
        header = (
            "// metabonk memory export: one statement per line; load with `cypher-shell -f` "
            "(Neo4j)\n// or metabonk_gym.memory.KnowledgeGraph(path).load_cypher(this file)\n"
        )
        atomic_write_text(Path(path), header + "\n".join(lines) + ("\n" if lines else ""))
        return len(lines)

    def load_cypher(self, path: str | Path, batch: int = 500) -> int:
        """Run a script written by `export_cypher` (one statement per line, `//` comments);
        returns the number of statements run."""
        self.flush()
        statements = [
            line.rstrip().rstrip(";")
            for line in Path(path).read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("//")
        ]
        for i in range(0, len(statements), batch):
            chunk = statements[i : i + batch]
            self.store.write([(s, {}) for s in chunk])
        self._known.clear()  # the script created nodes this graph did not write
        self._pairs.clear()
        return len(statements)

    def close(self) -> None:
        """Flush what is buffered (best effort) and close the store."""
        try:
            self.flush()
        except MemoryStoreError as exc:  # the store is going away: nothing else takes the rows
            logger.warning("memory: %d rows not written at close: %s", self.pending, exc)
        self.store.close()


def safe_id(text: str) -> str:
    """A string usable in ids and file names.

    >>> safe_id("room 1/a")
    'room_1_a'
    """
    return re.sub(r"[^A-Za-z0-9:._-]", "_", text)
