"""Schema migrations that record which model made each vector: SQLite 4 -> 5, PostgreSQL 7 -> 8.

Each test builds the previous schema from the old statements (migrations are append-only, so
``MIGRATIONS[:n]`` is what the previous release ran), stores items and vectors as the old code
did, opens it with the current store and checks that every item and every vector is still
there, byte for byte, with no recorded model. Such a vector was made by an unknown model: a
store with an embedder counts it as missing (``count_unembedded``), never compares a query
with it, and ``reembed`` replaces it; a store without an embedder still counts it as a vector.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import sql as pgsql

from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.ranking import indexed_terms, pack_vector
from synopsis.memory.sqlite import SQLiteStore
from synopsis.memory.sqlite import sql as lite
from synopsis.testing import BigramEmbedder, FakeClock
from tests.postgres_history import build_postgres_at

T = "acme"
#: (namespace, key, text) of what an old release stored, each with a vector.
ITEMS = [
    (("user", "alice"), "a1", "Alice drinks espresso every morning"),
    (("user", "alice"), "a2", "the espresso machine needs descaling"),
    (("user", "bob"), "b1", "Bob rides his bicycle to the office"),
]
QUERY = "espresso in the morning"
EMBEDDER = BigramEmbedder()
VECTORS = {key: pack_vector(EMBEDDER([text])[0]) for _, key, text in ITEMS}


def _reference(clock: FakeClock) -> InMemoryStore:
    store = InMemoryStore(clock=clock, embedder=BigramEmbedder())
    for namespace, key, text in ITEMS:
        store.put(T, namespace, key, text)
    return store


def _ranking(store: object) -> list[tuple[str, float | None]]:
    hits = store.search(T, query=QUERY, mode="vector")  # type: ignore[attr-defined]
    return [(h.item.key, h.score) for h in hits]


def _check_opened_store(store: object, clock: FakeClock) -> None:
    """Old vectors count as missing until reembedded; then search ranks as in memory."""
    assert store.count_unembedded(T) == len(ITEMS)  # type: ignore[attr-defined]
    assert _ranking(store) == []
    assert store.reembed(T) == len(ITEMS)  # type: ignore[attr-defined]
    got, want = _ranking(store), _ranking(_reference(clock))
    assert [key for key, _ in got] == [key for key, _ in want]
    assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-6)


# --- SQLite 4 -> 5 ---------------------------------------------------------------------------


def build_sqlite_v4(path: Path, clock: FakeClock) -> None:
    """A database as the previous release left it: version 4, items with vectors."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(lite.CREATE_VERSION_TABLE)
        for version in range(1, 5):
            for statement in lite.MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute(lite.WRITE_VERSION, (version,))
        for namespace, key, text in ITEMS:
            terms = indexed_terms(text)
            memory_id = conn.execute(
                "INSERT INTO memories (tenant, path, key, text, kind, tags, terms, doc_len,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, 'note', ?, ?, ?, ?, ?) RETURNING id",
                (T, lite.encode_path(namespace), key, text, json.dumps({}), " ".join(terms),
                 len(terms), clock.now, clock.now),
            ).fetchone()[0]  # fmt: skip
            conn.execute(
                "INSERT INTO memory_vectors (memory_id, vector) VALUES (?, ?)",
                (memory_id, VECTORS[key]),
            )
    finally:
        conn.close()


def _sqlite_vectors(path: Path) -> dict[str, tuple[bytes, str | None]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT m.key, v.vector, v.embedder FROM memory_vectors AS v"
            " JOIN memories AS m ON m.id = v.memory_id"
        ).fetchall()
    finally:
        conn.close()
    return {key: (bytes(vector), embedder) for key, vector, embedder in rows}


def test_a_version_4_sqlite_database_keeps_its_vectors_as_of_an_unknown_model(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "old.sqlite3", FakeClock()
    build_sqlite_v4(path, clock)
    with SQLiteStore(path, clock=clock) as plain:
        for namespace, key, text in ITEMS:
            item = plain.get(T, namespace, key)
            assert item is not None and item.text == text
        assert plain.count_unembedded(T) == 0  # no embedder: a vector is a vector
    assert _sqlite_vectors(path) == {key: (blob, None) for key, blob in VECTORS.items()}
    with SQLiteStore(path, clock=clock, embedder=BigramEmbedder()) as store:
        _check_opened_store(store, clock)
        identity = store.embedder_id
    assert identity == "callable:synopsis.testing.BigramEmbedder"
    models = {key: model for key, (_, model) in _sqlite_vectors(path).items()}
    assert models == dict.fromkeys(VECTORS, identity)


# --- PostgreSQL 7 -> 8 ---------------------------------------------------------------------------


def _as_written() -> list[tuple[str, tuple[str, ...], str, str]]:
    return [(T, namespace, key, text) for namespace, key, text in ITEMS]


def _embedding(text: str) -> list[float]:
    return list(EMBEDDER([text])[0])


def _postgres_vectors(url: str, schema: str, *, migrated: bool) -> dict[str, tuple[object, ...]]:
    """``key: (embedding,)`` before the migration, ``key: (embedding, embedder)`` after."""
    query = "SELECT key, embedding, embedder FROM {}.memories"
    if not migrated:
        query = "SELECT key, embedding FROM {}.memories"
    with psycopg.connect(url) as conn:
        rows = conn.execute(pgsql.SQL(query).format(pgsql.Identifier(schema))).fetchall()
    return {key: tuple(rest) for key, *rest in rows}


@pytest.mark.postgres
def test_a_version_7_postgres_schema_keeps_its_vectors_as_of_an_unknown_model(
    postgres_url: str, pg_schema: str
) -> None:
    clock = FakeClock()
    build_postgres_at(postgres_url, pg_schema, 7, _as_written(), clock, embed=_embedding)
    before = _postgres_vectors(postgres_url, pg_schema, migrated=False)
    assert len(before) == len(ITEMS)
    with PostgresStore(postgres_url, schema=pg_schema, clock=clock) as plain:
        for namespace, key, text in ITEMS:
            item = plain.get(T, namespace, key)
            assert item is not None and item.text == text
        assert plain.count_unembedded(T) == 0  # no embedder: a vector is a vector
    migrated = _postgres_vectors(postgres_url, pg_schema, migrated=True)
    assert migrated == {key: (*embedding, None) for key, embedding in before.items()}
    with PostgresStore(
        postgres_url, schema=pg_schema, clock=clock, embedder=BigramEmbedder(), embedder_id="b@1"
    ) as store:
        _check_opened_store(store, clock)
    after = _postgres_vectors(postgres_url, pg_schema, migrated=True)
    assert {key: model for key, (_, model) in after.items()} == dict.fromkeys(VECTORS, "b@1")


# --- adopting the vectors of an unknown model ------------------------------------------------


def _check_adopted(store: object, clock: FakeClock) -> None:
    """Adopted vectors are searched as they are, without embedding anything again."""
    assert store.adopt_vectors(T) == len(ITEMS)  # type: ignore[attr-defined]
    assert store.adopt_vectors(T) == 0  # type: ignore[attr-defined]
    assert store.count_unembedded(T) == 0  # type: ignore[attr-defined]
    got, want = _ranking(store), _ranking(_reference(clock))
    assert [key for key, _ in got] == [key for key, _ in want]
    assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-6)


class Refusing(BigramEmbedder):
    def __call__(self, texts: object) -> list[list[float]]:
        raise AssertionError("adopting must not embed any stored text")

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return BigramEmbedder()(texts)


def test_a_migrated_sqlite_database_can_adopt_its_old_vectors(tmp_path: Path) -> None:
    path, clock = tmp_path / "old.sqlite3", FakeClock()
    build_sqlite_v4(path, clock)
    with SQLiteStore(path, clock=clock, embedder=Refusing(), embedder_id="bigram") as store:
        _check_adopted(store, clock)
    assert _sqlite_vectors(path) == {key: (blob, "bigram") for key, blob in VECTORS.items()}


@pytest.mark.postgres
def test_a_migrated_postgres_schema_can_adopt_its_old_vectors(
    postgres_url: str, pg_schema: str
) -> None:
    clock = FakeClock()
    build_postgres_at(postgres_url, pg_schema, 7, _as_written(), clock, embed=_embedding)
    with PostgresStore(
        postgres_url, schema=pg_schema, clock=clock, embedder=Refusing(), embedder_id="bigram"
    ) as store:
        _check_adopted(store, clock)
