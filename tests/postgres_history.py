"""PostgreSQL stores as earlier releases left them, and writers racing on one tenant.

Migrations are append-only, so running ``MIGRATIONS[:version]`` builds exactly the schema a
release at ``version`` had; :func:`build_postgres_at` then fills it the way that code wrote
memories (terms and length of the text, no context). :func:`write_concurrently` runs four
writers of overlapping batches at once, for the tests of counts kept by triggers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import psycopg
from psycopg import sql

from synopsis.memory import NewMemory
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.postgres import sql as pq
from synopsis.memory.ranking import indexed_terms
from synopsis.testing import FakeClock

__all__ = ["build_postgres_at", "write_concurrently"]

#: ``(tenant, namespace, key, text)`` of a memory an old release stored.
OldItem = tuple[str, tuple[str, ...], str, str]


def build_postgres_at(
    url: str,
    schema: str,
    version: int,
    items: Sequence[OldItem],
    clock: FakeClock,
    *,
    embed: Callable[[str], Sequence[float]] | None = None,
) -> None:
    """``schema`` at ``version``, holding ``items`` (with ``embed(text)`` as their vectors)."""
    with psycopg.connect(url) as conn:
        steps = [*pq.migration_prelude(schema)]
        for step in range(1, version + 1):
            steps += pq.migration(schema, step)
        for statement in steps:
            conn.execute(statement.query, statement.params)
        for tenant, namespace, key, text in items:
            terms = indexed_terms(text)
            vector = None if embed is None else list(embed(text))
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memories (tenant, namespace, key, text, kind, tags, terms,"
                    " doc_len, embedding, created_at, updated_at) VALUES (%s, %s, %s, %s, 'note',"
                    " '{{}}', %s, %s, %s, %s, %s)"
                ).format(sql.Identifier(schema)),
                (tenant, list(namespace), key, text, " ".join(terms), len(terms), vector,
                 clock.now, clock.now),
            )  # fmt: skip


def write_concurrently(url: str, schema: str, *, users: int) -> None:
    """Four writers put 15 batches each into tenant ``acme`` at once, over 40 keys per user.

    Worker ``w`` writes as user ``w % users``, so with fewer users than workers two writers
    replace each other's items.
    """
    PostgresStore(url, schema=schema).close()  # migrate once, before the race

    def write(worker: int) -> None:
        with PostgresStore(url, schema=schema, max_size=1) as store:
            for batch in range(15):
                items = [
                    NewMemory(
                        ("user", f"w{worker % users}"), f"k{(batch * 7 + i) % 40}", "x y " * i
                    )
                    for i in range(10)
                ]
                store.put_many("acme", items)

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
