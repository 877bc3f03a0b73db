"""Hostile queries and database files for `metabonk memory` (issue 26, item 5): a query only
reads (no `COPY ... TO` file written), returns a bounded number of rows within a deadline and a
memory cap, and a truncated or empty database file gets the project's one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from one_line import one_line_error as _error
from typer.testing import CliRunner

from metabonk_gym.memory import KnowledgeGraph
from metabonk_gym.memory.store import EmbeddedStore, MemoryStoreError, check_read_query

runner = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    graph = KnowledgeGraph(folder / "memory.lbdb")
    graph.upsert("Area", {"id": "w:1", "name": "one"})
    graph.flush()
    graph.close()
    return folder


def test_a_read_query_still_prints_its_rows(run_dir: Path) -> None:
    result = runner.invoke(app, ["memory", "query", str(run_dir), "MATCH (a:Area) RETURN a.id"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == '{"a.id": "w:1"}'


def test_copy_to_a_file_is_refused_and_writes_nothing(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _error(
        ["memory", "query", str(run_dir), "COPY (MATCH (a:Area) RETURN a.id) TO 'outside.csv'"]
    )
    assert line == (
        "error: memory query refused: it starts with COPY; queries only read (start with MATCH, "
        "OPTIONAL, UNWIND, WITH, RETURN or CALL), one statement"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "cypher",
    [
        "EXPORT DATABASE 'dump'",
        "INSTALL httpfs",
        "MATCH (a:Area) RETURN a.id; COPY (MATCH (a:Area) RETURN a) TO 'x.csv'",
        "ATTACH 'other.lbdb' AS other",
    ],
)
def test_statements_that_act_outside_the_database_are_refused(cypher: str) -> None:
    with pytest.raises(MemoryStoreError, match="memory query refused"):
        check_read_query(cypher)


def test_a_semicolon_inside_a_string_is_not_a_second_statement() -> None:
    cypher = "MATCH (a:Area) WHERE a.name = 'a;b' RETURN a.id"
    assert check_read_query(cypher) == cypher


def test_a_query_that_would_hold_gigabytes_fails_fast(run_dir: Path) -> None:
    # the trial's query took 3 GB in 2 s; ladybug materialises the range before any row
    line = _error(["memory", "query", str(run_dir), "UNWIND range(1, 300000000) AS x RETURN x"])
    assert line == (
        f"error: memory query failed on {run_dir / 'memory.lbdb'}: it needs more than 1024 MiB "
        "of memory"
    )


def test_more_rows_than_the_cap_is_one_line(run_dir: Path) -> None:
    line = _error(
        ["memory", "query", str(run_dir), "UNWIND range(1, 50) AS x RETURN x", "--max-rows", "10"]
    )
    assert line == "error: memory query returned more than 10 rows; add LIMIT or aggregate"


def test_a_query_past_its_deadline_is_stopped(run_dir: Path) -> None:
    store = EmbeddedStore(run_dir / "memory.lbdb", read_only=True)
    try:
        with pytest.raises(MemoryStoreError) as caught:
            store.read_query(
                "UNWIND range(1, 20000000) AS x WITH x WHERE x % 3 = 0 RETURN count(*) AS n",
                timeout_s=0.05,
            )
        assert str(caught.value).endswith("it ran past its 0.05 s deadline")
        # the connection is usable afterwards (the deadline was reset)
        assert store.read_query("MATCH (a:Area) RETURN a.id AS id") == [{"id": "w:1"}]
    finally:
        store.close()


def test_an_empty_database_file_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "memory.lbdb").write_bytes(b"")
    line = _error(["memory", "query", str(tmp_path), "MATCH (a:Area) RETURN a.id"])
    assert line == (
        f"error: {tmp_path / 'memory.lbdb'} is empty or not a metabonk memory (no Area, Entity, "
        "Event table); give the memory.lbdb a run wrote"
    )
    assert (tmp_path / "memory.lbdb").read_bytes() == b""


def test_a_truncated_database_file_is_named_as_such(run_dir: Path, tmp_path: Path) -> None:
    whole = (run_dir / "memory.lbdb").read_bytes()
    (tmp_path / "memory.lbdb").write_bytes(whole[:5000])
    line = _error(["memory", "show", str(tmp_path)])
    assert line == (
        f"error: the memory database {tmp_path / 'memory.lbdb'} is truncated, corrupt or not a "
        "ladybug database; move it aside (it is left untouched) or give another memory path"
    )
    assert "checkpointing" not in line and (tmp_path / "memory.lbdb").read_bytes() == whole[:5000]


@pytest.mark.parametrize(
    "cypher",
    [
        "MATCH (a:Area) RETURN a.id // it's\n; COPY (MATCH (a:Area) RETURN a.id) TO 'outside.csv'",
        "MATCH (a:Area) RETURN a.id /* it's */; COPY (MATCH (a:Area) RETURN a.id) TO "
        "'outside.csv' // '",
        "MATCH (a:Area) RETURN a.id /* \" */; EXPORT DATABASE 'outside' // \"",
    ],
)
def test_a_quote_inside_a_comment_hides_no_second_statement(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cypher: str
) -> None:
    """Issue 36: a quote in a `//` or `/* */` comment opened a "string" in the text check that
    swallowed the `;`, so `COPY ... TO` and `EXPORT DATABASE` wrote their files and only then
    was the query refused. The check now reads tokens as the database's grammar does."""
    monkeypatch.chdir(tmp_path)
    line = _error(["memory", "query", str(run_dir), cypher])
    assert line.startswith("error: memory query refused: several statements")
    assert list(tmp_path.iterdir()) == []


def test_a_word_that_acts_outside_is_refused_anywhere_in_the_query() -> None:
    with pytest.raises(MemoryStoreError, match="it holds LOAD"):
        check_read_query("MATCH (a:Area) LOAD FROM '/etc/hostname' RETURN *")
    # a property or a label of that name is not the keyword
    assert check_read_query("MATCH (a:Area) RETURN a.set, a.`copy`")
