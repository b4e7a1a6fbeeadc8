"""Concurrent appends to one session: serialized, on SQLite and on PostgreSQL over two
replicas (issue 19, finding 3: 129 of 147 appends got 503 UniqueViolation on PostgreSQL).

Every append succeeds, the positions are contiguous and every turn is stored once. Bounded:
8 writers per replica, 3 appends each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest

from synopsis.errors import SessionConflict
from synopsis.server._sql import Plan, Rows, Statement
from synopsis.server.db import Database
from tests.server.conftest import Live, StartServer

WRITERS, APPENDS = 8, 3


def _race(replicas: list[Live], key: str) -> list[int]:
    def write(writer: int) -> list[int]:
        live = replicas[writer % len(replicas)]
        statuses = []
        with live.client(key) as client:
            for n in range(APPENDS):
                turn = [
                    {"role": "user", "content": f"w{writer} a{n} question"},
                    {"role": "assistant", "content": f"w{writer} a{n} answer"},
                ]
                response = client.post("/v1/sessions/u1/s1/messages", json={"messages": turn})
                statuses.append(response.status_code)
        return statuses

    count = WRITERS * len(replicas)
    with ThreadPoolExecutor(count) as pool:
        return [s for statuses in pool.map(write, range(count)) for s in statuses]


def _select(tenant: str, table: str) -> Plan[Rows]:
    rows = yield Statement(
        f"SELECT position, body FROM {table} WHERE tenant = :tenant ORDER BY position",
        {"tenant": tenant},
    )
    return rows


def _stored(live: Live) -> list[tuple[int, str]]:
    with Database(live.options.db, schema=live.options.schema) as db:
        rows = db.run(_select("acme", db.dialect.table("messages")), write=False)
    return [(int(position), json.loads(body)["content"]) for position, body in rows]


def _leftovers(live: Live, positions: range) -> None:
    """Rows past the session's count, as a delete-user that raced an append left them."""

    def plan() -> Plan[None]:
        yield Statement(
            f"INSERT INTO {db.dialect.table('messages')} (tenant, session_id, position, body)"
            " VALUES ('acme', 's1', :position, '{}')",
            many=[{"position": p} for p in positions],
        )

    with Database(live.options.db, schema=live.options.schema) as db:
        db.run(plan())


def _check(replicas: list[Live], statuses: list[int]) -> None:
    assert statuses.count(202) == len(statuses), sorted(set(statuses))
    stored = _stored(replicas[0])
    expected = 2 * APPENDS * WRITERS * len(replicas)
    assert [position for position, _ in stored] == list(range(expected))
    contents = [content for _, content in stored]
    assert len(set(contents)) == expected  # nothing lost, nothing twice
    # each append's two messages stay together, question before answer
    for index in range(0, expected, 2):
        assert contents[index].replace("question", "answer") == contents[index + 1]


@pytest.fixture
def sqlite_server(start_server: StartServer) -> Iterator[Live]:
    with start_server(summarize_every=1000) as live:
        yield live


def test_concurrent_appends_on_sqlite(sqlite_server: Live) -> None:
    key = sqlite_server.key("acme")
    _check([sqlite_server], _race([sqlite_server], key))


@pytest.mark.postgres
def test_concurrent_appends_over_two_postgres_replicas(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    with ExitStack() as stack:
        replicas = [
            stack.enter_context(
                start_server(db=postgres_url, schema=pg_schema, summarize_every=1000)
            )
            for _ in range(2)
        ]
        key = replicas[0].key("acme")
        statuses = _race(replicas, key)
        _check(replicas, statuses)


def _leftover_run(live: Live) -> None:
    key = live.key("acme")
    turn = [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"}]
    with live.client(key) as client:
        assert (
            client.post("/v1/sessions/u1/s1/messages", json={"messages": turn}).status_code == 202
        )
        _leftovers(live, range(2, 6))
        later = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
        response = client.post("/v1/sessions/u1/s1/messages", json={"messages": later})
    assert response.status_code == 202, response.text
    assert response.json()["messages"] == 4
    assert _stored(live) == [(0, "q0"), (1, "a0"), (2, "q1"), (3, "a1")]


def test_rows_left_past_the_count_never_block_an_append_on_sqlite(sqlite_server: Live) -> None:
    """They answered 503 StoreError (UniqueViolation on PostgreSQL) for every later append."""
    _leftover_run(sqlite_server)


@pytest.mark.postgres
def test_rows_left_past_the_count_never_block_an_append_on_postgres(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    with start_server(db=postgres_url, schema=pg_schema, summarize_every=1000) as live:
        _leftover_run(live)


@pytest.mark.postgres
def test_a_remaining_write_conflict_is_409_not_503(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    """A unique violation the plans cannot avoid (here: a key digest planted twice)."""
    with start_server(db=postgres_url, schema=pg_schema) as live:
        from synopsis.server.keys import KeyRing

        with Database(live.options.db, schema=live.options.schema) as db:
            ring = KeyRing(db)
            made = ring.create("acme").key
            table = db.dialect.table("keys")

            def plan() -> Plan[None]:
                yield Statement(
                    f"INSERT INTO {table} (key_id, tenant, digest, label, created_at)"
                    f" SELECT 'other', tenant, digest, label, created_at FROM {table}"
                    " WHERE key_id = :key_id",
                    {"key_id": made.key_id},
                )

            with pytest.raises(SessionConflict, match="SQLSTATE 23505"):
                db.run(plan())


@pytest.mark.postgres
def test_appends_racing_delete_user_leave_a_contiguous_history(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    """The race that left rows behind: deletes now lock the sessions before the messages."""
    with start_server(db=postgres_url, schema=pg_schema, summarize_every=1000) as live:
        key = live.key("acme")

        def work(worker: int) -> list[int]:
            with live.client(key) as client:
                if worker == 0:
                    return [client.delete("/v1/users/u1").status_code for _ in range(12)]
                turn = [{"role": "user", "content": f"w{worker}"}]
                return [
                    client.post("/v1/sessions/u1/s1/messages", json={"messages": turn}).status_code
                    for _ in range(12)
                ]

        with ThreadPoolExecutor(5) as pool:
            statuses = [s for batch in pool.map(work, range(5)) for s in batch]
        with live.client(key) as client:
            last = client.post(
                "/v1/sessions/u1/s1/messages",
                json={"messages": [{"role": "user", "content": "end"}]},
            )
        assert all(s < 500 for s in statuses) and last.status_code == 202
        positions = [p for p, _ in _stored(live)]
        assert positions == list(range(last.json()["messages"]))
