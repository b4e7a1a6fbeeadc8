"""PostgreSQL-specific behaviour: migrations, SQL building, BM25 parity, races and the seam.

The shared contract is pinned by ``tests/conformance``; these tests cover what only this
backend has (schemas, advisory locks, concurrent replicas, psycopg error translation).
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from synopsis.errors import ConfigError, MigrationError, StoreError
from synopsis.memory._types import NewMemory, SessionSummary
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import AsyncPostgresStore, PostgresStore
from synopsis.memory.postgres import plans as pg_plans
from synopsis.memory.postgres import sql as q
from synopsis.memory.ranking import bm25_scores, document_terms, indexed_terms, query_terms
from synopsis.testing import FakeClock

T = "tenant-a"
NS = ("user", "u1", "session", "s1")

# --- pure: builders and scoring (no server needed) ---------------------------------------------


def _text(statement: q.Statement) -> str:
    return statement.query.as_string(None)


def test_user_text_is_bound_never_spliced_into_sql() -> None:
    """Tenant, namespace, key, tags and query terms reach PostgreSQL only as parameters."""
    evil = "x'); DROP TABLE memories; --"
    statements = [
        q.get_item("synopsis", evil, (evil, "%_"), evil, 1.0),
        q.delete_item("synopsis", evil, (evil,), evil, 1.0),
        q.keyword_page(
            "synopsis",
            tenant=evil,
            prefix=(evil,),
            kinds=[evil],
            exclude_kinds=[evil],
            tags={evil: evil},
            now=1.0,
            terms=["drop"],
            scope_size=1,
            average=1.0,
            limit=10,
            offset=0,
        ),
        q.list_namespaces(
            "synopsis", tenant=evil, prefix=(evil,), max_depth=2, now=1.0, limit=5, offset=0
        ),
    ]
    for statement in statements:
        assert "DROP" not in _text(statement)
        assert "%_" not in _text(statement)


def test_schema_name_is_quoted_as_an_identifier() -> None:
    """An odd schema name is quoted, not interpreted."""
    text = _text(q.get_item('we"ird; --', T, NS, "k", 1.0))
    assert '"we""ird; --".memories' in text


def test_tsquery_quotes_every_lexeme() -> None:
    """Query syntax characters are inert: each term is one quoted prefix of its tiers, ORed."""
    assert q.tsquery_text(["a", "b'c", "d\\e"]) == "'a/':* | 'b''c/':* | 'd\\\\e/':*"
    assert q.lexemes_query_text(["a/1/2", "b'c/3/4"]) == "'a/1/2' | 'b''c/3/4'"


def test_migrations_are_ordered_and_versioned() -> None:
    """Migration n records version n after its own statements."""
    steps = q.migration("s", len(q.MIGRATIONS))
    assert "schema_version" in _text(steps[-1])
    assert steps[-1].params == {"v": len(q.MIGRATIONS)}


def test_advisory_key_is_stable_and_signed_64_bit() -> None:
    """The lock key is derived from its labels only and fits PostgreSQL's bigint."""
    key = q.advisory_key("a", "b")
    assert key == q.advisory_key("a", "b") != q.advisory_key("ab")
    assert -(2**63) <= key < 2**63


@pytest.mark.postgres
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    docs=st.lists(st.lists(st.sampled_from("abcdef"), max_size=8), min_size=1, max_size=12),
    terms=st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=4),
)
def test_sql_bm25_equals_bm25_over_the_whole_scope(
    make: Callable[..., PostgresStore], docs: list[list[str]], terms: list[str]
) -> None:
    """The database's BM25 equals ``bm25_scores`` over the tenant, float for float."""
    store, tenant = make(), uuid.uuid4().hex
    store.put_many(tenant, [NewMemory(("d",), f"k{i}", " ".join(d)) for i, d in enumerate(docs)])
    query = query_terms(" ".join(terms))
    weighted = [indexed_terms(" ".join(d)) for d in docs]
    full = bm25_scores(query, [Counter(w) for w in weighted], [len(w) for w in weighted])
    want = {f"k{i}": full[i] for i, d in enumerate(docs) if set(d) & set(query)}
    hits = store.search(tenant, query=" ".join(terms), limit=1000)
    assert {hit.item.key: hit.score for hit in hits} == want


def test_bad_options_are_config_errors() -> None:
    """Pool sizes, timeout and schema are checked before any connection is made."""
    with pytest.raises(ConfigError):
        AsyncPostgresStore("postgresql://unused", min_size=5, max_size=2)
    with pytest.raises(ConfigError):
        AsyncPostgresStore("postgresql://unused", pool_timeout=0)
    with pytest.raises(ConfigError):
        AsyncPostgresStore("postgresql://unused", schema="")


# --- against the server ----------------------------------------------------------------------


def _drop(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    """A fresh schema name, dropped after the test."""
    name = f"test_{uuid.uuid4().hex}"
    yield name
    _drop(postgres_url, name)


@pytest.fixture
def clock() -> FakeClock:
    """The clock the stores read."""
    return FakeClock()


@pytest.fixture
def make(
    postgres_url: str, schema: str, clock: FakeClock
) -> Iterator[Callable[..., PostgresStore]]:
    """Open sync stores on the test schema (closed afterwards)."""
    opened: list[PostgresStore] = []

    def factory(**options: Any) -> PostgresStore:
        options.setdefault("clock", clock)
        store = PostgresStore(postgres_url, schema=schema, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def _summary(version: int = 1, digest: str = "h1", **changes: Any) -> SessionSummary:
    values: dict[str, Any] = {
        "tenant": T, "user_id": "u1", "session_id": "s1", "version": version,
        "text": f"summary {version}", "covers_from": 0, "covers_to": 10 * version,
        "model": "fake", "content_hash": digest,
    }  # fmt: skip
    values.update(changes)
    return SessionSummary(**values)


@pytest.mark.postgres
def test_many_replicas_starting_together_migrate_once(postgres_url: str, schema: str) -> None:
    """Concurrent first starts on one database all succeed and record each version once."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        stores = list(pool.map(lambda _: PostgresStore(postgres_url, schema=schema), range(6)))
    for store in stores:
        store.close()
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}.schema_version").format(sql.Identifier(schema))
        ).fetchall()
    assert rows == [(v,) for v in range(1, len(q.MIGRATIONS) + 1)]


@pytest.mark.postgres
def test_reopening_keeps_data(make: Callable[..., PostgresStore]) -> None:
    """Migrations are idempotent: a second store on the schema sees the first one's items."""
    make().put(T, NS, "k", "kept")
    item = make().get(T, NS, "k")
    assert item is not None
    assert item.text == "kept"


@pytest.mark.postgres
def test_version_1_database_is_upgraded_in_place(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """A schema left at migration 1 is brought forward on open and keeps its data."""
    with psycopg.connect(postgres_url) as conn:
        for statement in [*q.migration_prelude(schema), *q.migration(schema, 1)]:
            conn.execute(statement.query, statement.params)
        item_id = conn.execute(
            sql.SQL(
                "INSERT INTO {}.memories (tenant, namespace, key, text, kind, tags, terms,"
                " doc_len, created_at, updated_at) VALUES (%s, %s, 'k', 'old coffee', 'note',"
                " '{{}}', 'old coffe', 2, 1, 1) RETURNING id"
            ).format(sql.Identifier(schema)),
            (T, list(NS)),
        ).fetchone()
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.memory_terms (item_id, tenant, term, tf) VALUES"
                " (%s, %s, 'old', 1), (%s, %s, 'coffe', 1)"
            ).format(sql.Identifier(schema)),
            (item_id[0] if item_id else None, T) * 2,
        )
    store = make()
    assert [hit.item.key for hit in store.search(T, query="coffee")] == ["k"]
    store.put(T, NS, "new", "new coffee")
    assert len(store.search(T, query="coffee")) == 2


@pytest.mark.postgres
def test_version_3_database_with_term_rows_upgrades_and_keeps_its_scores(
    make: Callable[..., PostgresStore], clock: FakeClock, postgres_url: str, schema: str
) -> None:
    """Items written with a memory_terms table rank exactly as before once it is dropped."""
    reference = InMemoryStore(clock=clock)
    with psycopg.connect(postgres_url) as conn:
        steps = [*q.migration_prelude(schema), *q.migration(schema, 1)]
        steps += [*q.migration(schema, 2), *q.migration(schema, 3)]
        for statement in steps:
            conn.execute(statement.query, statement.params)
        for key, text in CORPUS.items():
            terms = document_terms(text)
            row = conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memories (tenant, namespace, key, text, kind, tags, terms,"
                    " doc_len, created_at, updated_at) VALUES (%s, %s, %s, %s, 'note', '{{}}',"
                    " %s, %s, %s, %s) RETURNING id"
                ).format(sql.Identifier(schema)),
                (T, ["user", "u1", key], key, text, " ".join(terms), len(terms),
                 clock(), clock()),
            ).fetchone()  # fmt: skip
            assert row is not None
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.memory_terms (item_id, term, tf)"
                    " SELECT %s, u.term, u.tf FROM unnest(%s::text[], %s::integer[]) AS u(term, tf)"
                ).format(sql.Identifier(schema)),
                (row[0], list(Counter(terms)), list(Counter(terms).values())),
            )
            reference.put(T, ("user", "u1", key), key, text)
            clock.advance(1)
    store = make()
    for query in ("coffee", "咖啡 数据库", "喜欢 coffee"):
        got = [(h.item.key, h.score) for h in store.search(T, query=query)]
        want = [(h.item.key, h.score) for h in reference.search(T, query=query)]
        assert got == want
        assert got
    with psycopg.connect(postgres_url) as conn:
        table = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".memory_terms',)).fetchone()
    assert table == (None,)
    store.put(T, NS, "new", "new coffee")
    assert len(store.search(T, query="coffee")) == 4


@pytest.mark.postgres
def test_newer_schema_than_the_code_is_a_migration_error(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """A database migrated by newer code is refused rather than misused."""
    make().close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_version (version) VALUES (999)").format(
                sql.Identifier(schema)
            )
        )
    with pytest.raises(MigrationError, match="999"):
        make()


@pytest.mark.postgres
def test_schemas_are_independent(make: Callable[..., PostgresStore], postgres_url: str) -> None:
    """Two schemas on one database do not see each other's items."""
    other = f"test_{uuid.uuid4().hex}"
    try:
        make().put(T, NS, "k", "here")
        with PostgresStore(postgres_url, schema=other) as elsewhere:
            assert elsewhere.get(T, NS, "k") is None
    finally:
        _drop(postgres_url, other)


@pytest.mark.postgres
def test_unreachable_server_is_a_store_error() -> None:
    """A connection failure surfaces as StoreError (chained), never a psycopg error."""
    with pytest.raises(StoreError) as caught:
        PostgresStore("postgresql://postgres@127.0.0.1:1/none", pool_timeout=0.5)
    assert not isinstance(caught.value, MigrationError)
    assert caught.value.operation == "connect"  # type: ignore[attr-defined]
    assert isinstance(caught.value.__cause__, psycopg.Error)


@pytest.mark.postgres
async def test_unreachable_server_is_a_store_error_for_the_async_store() -> None:
    """The async store reports a connection failure the same way."""
    store = AsyncPostgresStore("postgresql://postgres@127.0.0.1:1/none", pool_timeout=0.5)
    with pytest.raises(StoreError) as caught:
        await store.open()
    assert caught.value.operation == "connect"  # type: ignore[attr-defined]


@pytest.mark.postgres
def test_database_errors_are_translated_with_sqlstate(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """A failing statement raises StoreError carrying the SQLSTATE, not the raw error."""
    store = make()
    _drop(postgres_url, schema)
    with pytest.raises(StoreError) as caught:
        store.put(T, NS, "k", "text")
    assert not isinstance(caught.value, psycopg.Error)
    assert caught.value.sqlstate == "42P01"  # type: ignore[attr-defined]
    assert isinstance(caught.value.__cause__, psycopg.Error)


HOSTILE = [
    "%", "_", "%%", "a%", "'", "''", "\\", "\\'", "x'); DELETE FROM memories; --",
    "\" OR 1=1 --", "NEAR(a b)", "a & !b", "*:*", "咖啡 | 'x'", "{}", "{a,b}", "NULL",
]  # fmt: skip


@pytest.mark.postgres
@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_never_cross_tenants(
    make: Callable[..., PostgresStore], hostile: str
) -> None:
    """Wildcards, quotes, SQL and tsquery syntax in any argument reach only literal data."""
    store = make()
    store.put("victim", ("user", hostile), hostile, f"secret {hostile} 咖啡", tags={hostile: "v"})
    store.put(hostile, ("user", "u"), "k", "mine")
    assert store.get(hostile, ("user", hostile), hostile) is None
    assert store.search(hostile, (), query=f"secret {hostile} 咖啡") == []
    assert store.search(hostile, ("user",), tags={hostile: "v"}) == []
    assert store.list_namespaces(hostile) == [("user", "u")]
    assert store.delete(hostile, ("user", hostile), hostile) is False
    assert store.delete_user(hostile, hostile) == 0
    hits = store.search("victim", ("user", hostile), query=f"{hostile} secret")
    assert [hit.item.key for hit in hits] == [hostile]


@pytest.mark.postgres
def test_megabyte_query_is_harmless(make: Callable[..., PostgresStore]) -> None:
    """A 1 MB query costs no more than its first terms and finds what they match."""
    store = make()
    store.put(T, NS, "k", "needle in a haystack")
    hits = store.search(T, query="needle " + "x" * 1_000_000)
    assert [hit.item.key for hit in hits] == ["k"]


@pytest.mark.postgres
def test_prefix_matches_whole_labels_only(make: Callable[..., PostgresStore]) -> None:
    """("user", "u1") finds ("user", "u1", ...) but not ("user", "u10") or ("user", "u1%")."""
    store = make()
    for label in ("u1", "u10", "u1%", "u_"):
        store.put(T, ("user", label, "x"), "k", "text")
    found = {hit.item.namespace for hit in store.search(T, ("user", "u1"))}
    assert found == {("user", "u1", "x")}


@pytest.mark.postgres
def test_prefix_range_neighbours_stay_outside(make: Callable[..., PostgresStore]) -> None:
    """Labels sorting right next to the prefix's ("u1 ", "u1!", "u0\uffff") are not in it."""
    store = make()
    for label in ("u1", "u1 ", "u1!", "u0\uffff", "u1\u00e9", "u2"):
        store.put(T, ("user", label), "k", "text")
        store.put(T, ("user", label, "session", "s"), "k", "text")
    found = {hit.item.namespace for hit in store.search(T, ("user", "u1"), query="text")}
    assert found == {("user", "u1"), ("user", "u1", "session", "s")}
    assert store.delete_user(T, "u1") == 2
    assert len(store.search(T)) == 10


def test_prefix_range_raises_only_the_last_label() -> None:
    """The exclusive upper bound appends U+0001 to the last label of the prefix."""
    assert q.prefix_range(("user", "u1")) == {"prefix": ["user", "u1"], "past": ["user", "u1\x01"]}


CORPUS = {
    "a": "the user likes drinking coffee, not tea",
    "b": "用户喜欢喝咖啡，不喜欢茶",
    "c": "coffee coffee coffee and a very long sentence about many other unrelated things",
    "d": "PostgreSQL 数据库 is preferred over MySQL for coffee shop data",
    "e": "meeting notes: project delayed to next week",
    "f": "飞书消息推送失败",
}


@pytest.mark.postgres
@pytest.mark.parametrize("query", ["coffee", "咖啡", "coffee tea", "喜欢 coffee", "数据库", "飞书"])
def test_keyword_scores_equal_the_in_memory_reference(
    make: Callable[..., PostgresStore], clock: FakeClock, query: str
) -> None:
    """BM25 ranking and scores are those of the in-memory backend, float for float."""
    store, reference = make(), InMemoryStore(clock=clock)
    for key, text in CORPUS.items():
        for target in (store, reference):
            target.put(T, ("user", "u1", key), key, text)
        clock.advance(1)
    store.put("other", ("user", "u1"), "z", "coffee coffee 咖啡 数据库 飞书")
    got = [(h.item.key, h.score) for h in store.search(T, ("user",), query=query, limit=50)]
    want = [(h.item.key, h.score) for h in reference.search(T, ("user",), query=query, limit=50)]
    assert got == want
    assert got


def _letters(texts: Any) -> list[list[float]]:
    """A tiny deterministic embedder: letter counts a-h."""
    return [[float(text.count(c)) for c in "abcdefgh"] for text in texts]


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_vector_and_hybrid_scores_equal_the_in_memory_reference(
    make: Callable[..., PostgresStore], clock: FakeClock, mode: str
) -> None:
    """Cosine and hybrid (convex fusion) results match the in-memory backend exactly."""
    store, reference = make(embedder=_letters), InMemoryStore(clock=clock, embedder=_letters)
    for key, text in CORPUS.items():
        for target in (store, reference):
            target.put(T, ("user", "u1", key), key, text)
        clock.advance(1)
    got = [(h.item.key, h.score) for h in store.search(T, query="coffee deal", mode=mode)]
    want = [(h.item.key, h.score) for h in reference.search(T, query="coffee deal", mode=mode)]
    assert got == want
    assert got


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_put_many_scores_equal_put_on_the_in_memory_reference(
    make: Callable[..., PostgresStore], clock: FakeClock, mode: str
) -> None:
    """Items written by put_many (terms, lengths, vectors) rank exactly as put ones do."""
    store, reference = make(embedder=_letters), InMemoryStore(clock=clock, embedder=_letters)
    store.put_many(T, [NewMemory(("user", "u1", k), k, "placeholder") for k in CORPUS])
    store.put_many(T, [NewMemory(("user", "u1", k), k, text) for k, text in CORPUS.items()])
    for key, text in CORPUS.items():
        reference.put(T, ("user", "u1", key), key, text)
    for query in ("coffee deal", "咖啡 数据库"):
        got = [(h.item.key, h.score) for h in store.search(T, query=query, mode=mode)]
        want = [(h.item.key, h.score) for h in reference.search(T, query=query, mode=mode)]
        assert got == want
        assert got


def test_put_many_binds_every_value() -> None:
    """The batch upsert sends tenant, namespaces, keys, texts and tags only as parameters."""
    evil = "x'); DROP TABLE memories; --"
    row = q.ItemRow(
        tenant=evil, namespace=(evil, "%_"), key=evil, text=evil, kind=evil, tags={evil: evil},
        terms=[evil], embedding=None, created_at=1.0, updated_at=1.0, expires_at=None,
    )  # fmt: skip
    statement = q.upsert_items("synopsis", evil, [row], 1.0)
    assert "DROP" not in _text(statement)
    assert "%_" not in _text(statement)


@pytest.mark.postgres
def test_index_terms_are_the_shared_terms(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """The stored terms and length are exactly indexed_terms of the text and context."""
    make().put(T, NS, "k", "Painting paints 用户喜欢", context="the teacup")
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT terms, doc_len FROM {}.memories").format(sql.Identifier(schema))
        ).fetchall()
    terms = indexed_terms("Painting paints 用户喜欢", "the teacup")
    assert rows == [(" ".join(terms), len(terms))]
    assert query_terms("paint") == ["paint"]


@pytest.mark.postgres
def test_put_many_stores_every_time_and_value_exactly(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str, clock: FakeClock
) -> None:
    """The batch travels as JSON: each time is stored as the very same double, each text as is.

    Odd fractions of a second (whose shortest decimal has 17 digits), restored times, TTLs,
    tags and texts with quotes, escapes and control-free Unicode all come back bit for bit.
    """
    rng = random.Random(5)
    clock.now = 1_723_456_789.123_456_7
    texts = ['quote " back\\slash', "tab\there", "咖啡 ☕ \u2028 end", "{}[]", "", "null"]
    batch = []
    for i in range(300):
        seconds = rng.uniform(0, 4e9)
        restored = datetime.fromtimestamp(seconds, tz=UTC) if i % 3 == 0 else None
        ttl = rng.uniform(1, 1e6) if i % 4 == 1 else None
        tags = {"k": texts[i % len(texts)]} if i % 5 == 0 else None
        batch.append(
            NewMemory(("user", f"u{i % 7}"), f"k{i}", texts[i % len(texts)] + str(i),
                      created_at=restored, ttl=ttl, tags=tags)
        )  # fmt: skip
    items = make().put_many(T, batch)
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT key, text, tags, created_at, updated_at, expires_at FROM {}.memories"
            ).format(sql.Identifier(schema))
        ).fetchall()
    stored = {row[0]: row[1:] for row in rows}
    for memory, item in zip(batch, items, strict=True):
        created = clock.now if memory.created_at is None else memory.created_at.timestamp()
        expires = None if memory.ttl is None else clock.now + memory.ttl
        want = (memory.text, dict(memory.tags or {}), created, clock.now, expires)
        assert stored[memory.key] == want
        assert item.created_at == datetime.fromtimestamp(created, tz=UTC)


@pytest.mark.postgres
@pytest.mark.parametrize("bad_key", ["a-boom", "z-boom"])
def test_a_large_batch_failing_in_any_chunk_writes_nothing(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str, bad_key: str
) -> None:
    """A batch sent in several pipelined chunks is still one transaction, wherever it fails.

    "a-boom" sorts into the first chunk (sent deferred), "z-boom" into the last; the store
    (and its pooled connection) works normally afterwards.
    """
    store = make(max_size=1)
    before = store.put(T, NS, "k0000", "old text")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {s}.boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.key LIKE '%%boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;"
                " CREATE TRIGGER boom BEFORE INSERT ON {s}.memories"
                " FOR EACH ROW EXECUTE FUNCTION {s}.boom()"
            ).format(s=sql.Identifier(schema))
        )
    batch = [NewMemory(NS, f"k{i:04}", f"new text {i}") for i in range(3 * pg_plans.UPSERT_CHUNK)]
    with pytest.raises(StoreError):
        store.put_many(T, [*batch, NewMemory(NS, bad_key, "x")])
    assert store.get(T, NS, "k0000") == before
    assert [hit.item.key for hit in store.search(T, limit=10)] == ["k0000"]
    assert len(store.put_many(T, batch)) == len(batch)
    pages = range(0, len(batch), 1000)
    assert sum(len(store.search(T, query="new", limit=1000, offset=o)) for o in pages) == len(batch)


@pytest.mark.postgres
def test_concurrent_puts_of_one_new_key_leave_one_item(
    make: Callable[..., PostgresStore],
) -> None:
    """Racing inserts of the same address converge on one row with one set of terms."""
    store = make(max_size=8)
    barrier = threading.Barrier(8)

    def put(i: int) -> None:
        barrier.wait()
        store.put(T, NS, "same", f"version {i} coffee")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, range(8)))
    hits = store.search(T, query="coffee")
    assert len(hits) == 1
    assert hits[0].item.key == "same"


@pytest.mark.postgres
def test_concurrent_savers_of_one_version_cannot_both_win(
    make: Callable[..., PostgresStore],
) -> None:
    """Of racing saves with different hashes for one version exactly one is stored."""
    store = make(max_size=6)
    barrier = threading.Barrier(6)

    def save(i: int) -> str:
        barrier.wait()
        try:
            return store.save_summary(_summary(digest=f"h{i}")).content_hash
        except StoreError:
            return "lost"

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(save, range(6)))
    winners = [o for o in outcomes if o != "lost"]
    assert len(winners) == 1
    assert [s.content_hash for s in store.summary_history(T, "u1", "s1")] == winners
    assert len(store.pending_outbox(T)) == 1


@pytest.mark.postgres
def test_idempotent_retries_race_safely(make: Callable[..., PostgresStore]) -> None:
    """Racing retries of the same summary all succeed and leave one row and one outbox entry."""
    store = make(max_size=6)
    barrier = threading.Barrier(6)

    def save(_: int) -> SessionSummary:
        barrier.wait()
        return store.save_summary(_summary())

    with ThreadPoolExecutor(max_workers=6) as pool:
        saved = list(pool.map(save, range(6)))
    assert len({s.created_at for s in saved}) == 1
    assert len(store.summary_history(T, "u1", "s1")) == 1
    assert len(store.pending_outbox()) == 1


@pytest.mark.postgres
def test_sweep_and_delete_user_leave_no_rows(
    make: Callable[..., PostgresStore], clock: FakeClock, postgres_url: str, schema: str
) -> None:
    """Deleting items (any way) leaves no rows behind."""
    store = make()
    store.put(T, NS, "short", "coffee", ttl=5)
    store.put(T, NS, "long", "tea")
    clock.advance(10)
    assert store.sweep_expired() == 1
    assert store.delete_user(T, "u1") == 1
    with psycopg.connect(postgres_url) as conn:
        count = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.memories").format(sql.Identifier(schema))
        ).fetchone()
    assert count == (0,)


@pytest.mark.postgres
async def test_async_store_opens_lazily_and_via_connect(
    postgres_url: str, schema: str, clock: FakeClock
) -> None:
    """The async store needs no loop to build, opens on first use, and via connect()."""
    lazy = AsyncPostgresStore(postgres_url, schema=schema, clock=clock)
    await lazy.put(T, NS, "k", "async coffee")
    await lazy.aclose()
    async with await AsyncPostgresStore.connect(postgres_url, schema=schema) as store:
        hits = await store.search(T, query="coffee")
        assert [hit.item.key for hit in hits] == ["k"]


@pytest.mark.postgres
async def test_closed_async_store_refuses_work(postgres_url: str, schema: str) -> None:
    """Using an async store after aclose() is a StoreError, not a silent reopen."""
    store = await AsyncPostgresStore.connect(postgres_url, schema=schema)
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.get(T, NS, "k")


@pytest.mark.postgres
def test_closed_sync_store_raises_store_error(make: Callable[..., PostgresStore]) -> None:
    """Using a sync store after close() is a StoreError."""
    store = make()
    store.close()
    with pytest.raises(StoreError):
        store.get(T, NS, "k")


# --- connecting: fail fast, one line, no password --------------------------------------------

SECRET = "hunter2"


@pytest.mark.postgres
def test_unreachable_server_is_one_error_naming_the_host_never_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused connection is one StoreError naming host and port; the pool logs nothing."""
    caplog.set_level(logging.INFO, logger="psycopg.pool")
    with pytest.raises(StoreError) as caught:
        PostgresStore(f"postgresql://postgres:{SECRET}@127.0.0.1:1/none", pool_timeout=0.5)
    message = str(caught.value)
    assert "127.0.0.1:1/none" in message
    assert SECRET not in message
    assert "\n" not in message
    assert caught.value.operation == "connect"  # type: ignore[attr-defined]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.postgres
async def test_unreachable_server_is_one_error_for_the_async_store_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The async store fails the same way, on open."""
    caplog.set_level(logging.INFO, logger="psycopg.pool")
    store = AsyncPostgresStore(f"postgresql://u:{SECRET}@127.0.0.1:1/none", pool_timeout=0.5)
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as caught:
        await store.open()
    assert SECRET not in str(caught.value)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{SECRET}@[::1/db",
        f"postgresql://postgres:{SECRET}@localhost/db?colour=red",
        f"postgresql://postgres:{SECRET}%ZZ@localhost/db",
    ],
)
def test_malformed_url_fails_before_connecting_without_the_password(url: str) -> None:
    """A URL libpq cannot parse is one StoreError saying so, raised before any connection."""
    with pytest.raises(StoreError, match="malformed") as caught:
        PostgresStore(url, pool_timeout=0.5)
    assert SECRET not in str(caught.value)
    assert caught.value.operation == "connect"  # type: ignore[attr-defined]


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf")])
def test_connect_timeout_must_be_a_positive_number(seconds: float) -> None:
    """connect_timeout is checked with the other options, before any connection."""
    with pytest.raises(ConfigError, match="connect_timeout"):
        AsyncPostgresStore("postgresql://unused", connect_timeout=seconds)


# --- reading what older versions wrote ------------------------------------------------------


@pytest.mark.postgres
def test_an_expiry_no_datetime_can_hold_reads_as_never_expiring(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """A row whose expiry lies in the year 33715 (ttl=1e12, once accepted) breaks no search."""
    store = make()
    store.put(T, NS, "ok", "fine coffee")
    store.put(T, NS, "poisoned", "long lived coffee", ttl=60)
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            sql.SQL("UPDATE {}.memories SET expires_at = expires_at + 1e12").format(
                sql.Identifier(schema)
            )
        )
    assert sorted(hit.item.key for hit in store.search(T, query="coffee")) == ["ok", "poisoned"]
    assert [hit.item.expires_at for hit in store.search(T)] == [None, None]


# --- deadlock victims are run again ---------------------------------------------------------


def _fail_writes(postgres_url: str, schema: str, times: int) -> None:
    """Make the first ``times`` row writes abort as deadlock victims (SQLSTATE 40P01)."""
    name = sql.Identifier(schema)
    counter = f"{sql.Identifier(schema).as_string(None)}.failures"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SEQUENCE {}.failures").format(name))
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {schema}.fail() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN IF nextval({counter}) <= {times} THEN"
                " RAISE EXCEPTION 'chosen as the victim' USING ERRCODE = '40P01'; END IF;"
                " RETURN NEW; END $$"
            ).format(schema=name, counter=sql.Literal(counter), times=sql.Literal(times))
        )
        conn.execute(
            sql.SQL(
                "CREATE TRIGGER fail BEFORE INSERT OR UPDATE ON {schema}.memories"
                " FOR EACH ROW EXECUTE FUNCTION {schema}.fail()"
            ).format(schema=name)
        )


@pytest.mark.postgres
def test_a_deadlock_victim_is_run_again_and_embeds_once(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """An operation aborted as a deadlock victim is re-run in a new transaction, invisibly."""
    calls: list[int] = []

    def embedder(texts: Any) -> list[list[float]]:
        calls.append(len(texts))
        return _letters(texts)

    store = make(embedder=embedder)
    _fail_writes(postgres_url, schema, times=2)
    item = store.put(T, NS, "k", "written on the third try")
    assert store.get(T, NS, "k") == item
    assert calls == [1]
    assert store.put_many(T, [NewMemory(NS, "b", "batch")])[0].key == "b"


@pytest.mark.postgres
def test_a_transaction_that_keeps_deadlocking_gives_up(
    make: Callable[..., PostgresStore], postgres_url: str, schema: str
) -> None:
    """The retries are bounded: in the end the deadlock is a StoreError with its SQLSTATE."""
    store = make()
    _fail_writes(postgres_url, schema, times=1000)
    with pytest.raises(StoreError) as caught:
        store.put(T, NS, "k", "never written")
    assert caught.value.sqlstate == "40P01"  # type: ignore[attr-defined]
    assert store.get(T, NS, "k") is None


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("query", "option", "libpq"),
    [("", None, "10"), ("?connect_timeout=7", None, "7"), ("?connect_timeout=7", 2.5, "3")],
)
def test_connect_timeout_reaches_libpq(
    postgres_url: str, schema: str, query: str, option: float | None, libpq: str
) -> None:
    """The option wins, then the URL's own connect_timeout, then 10 s (libpq counts seconds)."""
    store = PostgresStore(postgres_url + query, schema=schema, connect_timeout=option)
    with store, store._pool.connection() as conn:
        assert f"connect_timeout={libpq} " in conn.info.dsn + " "
