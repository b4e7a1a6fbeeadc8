"""synopsis._sql: the statement, plan, executors and error translation the stores and the
server's tables share, on SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synopsis._sql import Plan, Rows, Statement
from synopsis._sql import sqlite as lite
from synopsis.errors import DatabaseError, InvalidInput, MigrationError, StoreError


def fill_and_count(table: str, values: list[int], *, fail: bool = False) -> Plan[Statement, int]:
    """Insert ``values`` (one ``many`` statement), then count them; ``fail`` raises midway."""
    yield Statement(f"INSERT INTO {table} (n) VALUES (:n)", many=[{"n": v} for v in values])
    if fail:
        raise RuntimeError("the plan gave up")
    rows: Rows = yield Statement(f"SELECT count(*) FROM {table} WHERE n >= :low", {"low": 0})
    return int(rows[0][0])


def test_one_statement_type_serves_the_server_and_both_stores() -> None:
    from synopsis.memory.postgres import schema as pg_schema
    from synopsis.memory.sqlite import sql as lite_sql
    from synopsis.server import _sql as server_sql

    assert server_sql.Statement is lite_sql.Statement is pg_schema.Statement is Statement


# --- SQLite ----------------------------------------------------------------------------------


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    connection.execute("CREATE TABLE t (n INTEGER)")
    yield connection
    connection.close()


def test_a_sqlite_plan_runs_in_one_committed_transaction(conn: sqlite3.Connection) -> None:
    assert lite.run(conn, fill_and_count("t", [1, 2, 3])) == 3
    assert not conn.in_transaction
    assert conn.execute("SELECT sum(n) FROM t").fetchone() == (6,)


def test_a_failing_sqlite_plan_leaves_nothing_behind(conn: sqlite3.Connection) -> None:
    with pytest.raises(RuntimeError, match="gave up"):
        lite.run(conn, fill_and_count("t", [1, 2], fail=True))
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_sqlite_errors_become_store_errors_naming_the_action(conn: sqlite3.Connection) -> None:
    failing = fill_and_count("missing", [1])
    with (
        pytest.raises(StoreError, match="sqlite could not count") as caught,
        lite.translated("count"),
    ):
        lite.run(conn, failing)
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    with pytest.raises(InvalidInput, match="too large to store"), lite.translated("store"):
        lite.execute(conn, Statement("INSERT INTO t (n) VALUES (?)", (2**70,)))


def test_sqlite_refuses_a_composed_query() -> None:
    from psycopg import sql

    with pytest.raises(TypeError, match="cannot run on sqlite3"):
        _ = Statement(sql.Composed([sql.SQL("SELECT 1")])).text


# --- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture
def pg(postgres_url: str, pg_schema: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{pg_schema}"')
        connection.execute(f'CREATE TABLE "{pg_schema}".t (n INTEGER)')
        yield connection, f'"{pg_schema}".t'


@pytest.mark.postgres
def test_a_postgres_plan_runs_in_one_transaction_and_rolls_back(pg: Any) -> None:
    from synopsis._sql import postgres

    connection, table = pg
    assert postgres.run(connection, fill_and_count(table, [1, 2, 3])) == 3
    with pytest.raises(RuntimeError, match="gave up"):
        postgres.run(connection, fill_and_count(table, [4, 5], fail=True))
    assert connection.execute(f"SELECT sum(n) FROM {table}").fetchone() == (6,)


@pytest.mark.postgres
async def test_the_async_postgres_twin_runs_the_same_plan(postgres_url: str, pg: Any) -> None:
    import psycopg

    from synopsis._sql import postgres

    _, table = pg
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as aconn:
        assert await postgres.arun(aconn, fill_and_count(table, [7, 8])) == 2
        with pytest.raises(RuntimeError, match="gave up"):
            await postgres.arun(aconn, fill_and_count(table, [9], fail=True))
        assert await postgres.aexecute(aconn, Statement(f"SELECT sum(n) FROM {table}")) == [(15,)]


@pytest.mark.postgres
def test_postgres_errors_name_the_operation_and_sqlstate_not_the_data(pg: Any) -> None:
    import psycopg

    from synopsis._sql import postgres

    connection, table = pg
    secret = "customer-secret-value"
    with pytest.raises(psycopg.Error) as caught:
        postgres.execute(
            connection, Statement(f"INSERT INTO {table} (n) VALUES (:v)", {"v": secret})
        )
    failure = postgres.error(caught.value, "put")
    assert isinstance(failure, DatabaseError)
    assert (failure.operation, failure.sqlstate) == ("put", "22P02")
    assert str(failure) == "PostgreSQL put failed: InvalidTextRepresentation (SQLSTATE 22P02)"
    assert secret not in str(failure)
    assert isinstance(postgres.error(caught.value, "migration"), MigrationError)
