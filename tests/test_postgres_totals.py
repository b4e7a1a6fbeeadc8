"""PostgreSQL keeps each tenant's item count and total length exact, and its delta rows few.

``tenant_totals`` (migration 7) is what a tenant-wide keyword search reads for BM25's N and
mean length; these tests compare it with a count of the table after many small writes,
replaces, deletes and concurrent writers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from synopsis.memory import NewMemory
from synopsis.memory.postgres import PostgresStore
from tests.postgres_history import write_concurrently

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"totals_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _totals(
    url: str, schema: str
) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], int]:
    """(kept totals, counted totals, number of delta rows)."""
    s = sql.Identifier(schema)
    with psycopg.connect(url) as conn:
        kept = conn.execute(
            sql.SQL(
                "SELECT tenant, sum(items), sum(length) FROM {}.tenant_totals GROUP BY tenant"
                " HAVING sum(items) <> 0 OR sum(length) <> 0"
            ).format(s)
        ).fetchall()
        counted = conn.execute(
            sql.SQL(
                "SELECT tenant, count(*), sum(doc_len) FROM {}.memories GROUP BY tenant"
            ).format(s)
        ).fetchall()
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {}.tenant_totals").format(s)).fetchone()
    assert rows is not None
    return (
        {t: (int(i), int(n)) for t, i, n in kept},
        {t: (int(i), int(n)) for t, i, n in counted},
        int(rows[0]),
    )


def test_totals_follow_puts_replaces_and_deletes_and_stay_compact(
    postgres_url: str, schema: str
) -> None:
    """300 single writes leave exact totals in a bounded number of delta rows."""
    with PostgresStore(postgres_url, schema=schema) as store:
        for index in range(300):
            tenant = ("acme", "globex")[index % 2]
            store.put(tenant, ("user", f"u{index % 7}"), f"k{index % 120}", "word " * (index % 9))
            if index % 10 == 9:
                store.delete(tenant, ("user", f"u{(index - 3) % 7}"), f"k{(index - 3) % 120}")
        store.put_many("acme", [NewMemory(("team",), f"t{i}", "a b c") for i in range(50)])
        store.delete_user("acme", "u3")
    kept, counted, rows = _totals(postgres_url, schema)
    assert kept == counted
    assert rows <= 2 * 66  # folded past 64 rows per tenant


def test_concurrent_writers_keep_exact_totals(postgres_url: str, schema: str) -> None:
    """Writers on one tenant at once: none waits on a shared totals row, the sums stay exact."""
    write_concurrently(postgres_url, schema, users=4)
    kept, counted, _ = _totals(postgres_url, schema)
    assert kept == counted
