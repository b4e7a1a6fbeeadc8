"""PostgreSQL's impact tiers: lexemes classed as the pure code says, counts exact, migration 9.

The pure half (:mod:`synopsis.memory.postgres.tiers`) is checked without a database: each
tier's bound is above every score its items can have. The schema half: ``memory_lexemes``
classes a term's frequency and an item's length exactly as ``tf_class``/``length_class`` do,
``term_tiers`` equals a recount after puts, replaces, deletes, sweeps, ``delete_user`` and
concurrent writers, and a version 7 schema migrates to 9 with its data, its counts and its rankings.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from synopsis.memory import NewMemory
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import PostgresStore
from synopsis.memory.postgres import sql as pq
from synopsis.memory.postgres.tiers import (
    LENGTH_FLOORS,
    TF_CEILINGS,
    TierWalk,
    length_class,
    parse_lexeme,
    tf_class,
    tier_bound,
    tier_plan,
)
from synopsis.memory.ranking import BM25_B, BM25_K1
from synopsis.testing import FakeClock
from tests.postgres_history import build_postgres_at, write_concurrently

# --- pure -----------------------------------------------------------------------------------


def test_classes_cover_every_frequency_and_length_in_order() -> None:
    """Classes are contiguous and ordered; the last frequency class has no ceiling."""
    assert [tf_class(tf) for tf in (1, 8, 9, 15, 16, 63, 64, 10**6)] == [1, 8, 9, 9, 10, 11, 12, 12]
    assert [length_class(n) for n in (1, 2, 3, 5, 6, 1048575, 1048576, 10**9)] == [
        1, 2, 3, 4, 5, 39, 40, 40,
    ]  # fmt: skip
    assert all(LENGTH_FLOORS[length_class(n) - 1] <= n for n in range(1, 5000))
    assert all(tf <= TF_CEILINGS[tf_class(tf) - 1] for tf in range(1, 500))


def test_a_tier_bound_is_above_every_score_of_its_items() -> None:
    """For any IDF, mean length, frequency and length, the term's BM25 part is below the bound."""
    rng = random.Random(5)
    for _ in range(20_000):
        idf, average = rng.uniform(1e-6, 15.0), rng.uniform(1.0, 3000.0)
        tf, length = rng.randint(1, 300), rng.randint(1, 100_000)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        score = idf * tf * (BM25_K1 + 1) / (tf + norm)
        assert score < tier_bound(idf, tf_class(tf), length_class(length), average)


def test_tier_plan_orders_by_bound_and_the_unseen_bound_sums_each_terms_best() -> None:
    """Best bound first, foreign and empty tiers left out; unseen = sum of per-term maxima."""
    rows = [("tea/2/8", 5), ("tea/8/1", 1), ("cat/2/8", 9), ("tea/1/30", 0), ("dog/1/1", 3)]
    tiers = tier_plan(rows, ["tea", "cat"], [2.0, 1.0], 20.0)
    assert [tier.lexeme for tier in tiers] == ["tea/8/1", "tea/2/8", "cat/2/8"]
    assert tiers[0].bound > tiers[1].bound > tiers[2].bound
    walk = TierWalk(tiers, 2)
    assert math.isclose(walk.unseen(), tiers[0].bound + tiers[2].bound, rel_tol=1e-6)
    assert walk.step(1) == ["tea/8/1"]  # the most bound taken away per item
    assert math.isclose(walk.unseen(), tiers[1].bound + tiers[2].bound, rel_tol=1e-6)
    assert sorted(walk.step(100)) == ["cat/2/8", "tea/2/8"] and walk.done()
    assert walk.unseen() == 0.0
    assert parse_lexeme("咖啡/12/40") == ("咖啡", 12, 40)


def test_the_walk_takes_a_rare_terms_last_tiers_before_a_common_terms_large_ones() -> None:
    """A rare term's small tiers (its whole bound) go before a common term's big tier."""
    rows = [("rare/2/8", 3), ("rare/2/9", 4), ("common/4/8", 2), ("common/2/8", 5000)]
    walk = TierWalk(tier_plan(rows, ["common", "rare"], [1.5, 6.0], 20.0), 2)
    first = walk.step(8)
    assert "common/2/8" not in first and {"rare/2/8", "rare/2/9"} <= set(first)
    assert not walk.done()


# --- the schema -------------------------------------------------------------------------------


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"tiers_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _expected_lexemes(terms: list[str]) -> set[str]:
    counts = Counter(terms)
    return {f"{t}/{tf_class(n)}/{length_class(len(terms))}" for t, n in counts.items()}


@pytest.mark.postgres
def test_memory_lexemes_class_terms_as_the_pure_code_does(postgres_url: str, schema: str) -> None:
    """Every frequency class and length classes up to ~70,000 terms agree with ``tiers``."""
    PostgresStore(postgres_url, schema=schema).close()
    rng = random.Random(3)
    cases = []
    for length in (1, 2, 3, 5, 6, 7, 11, 12, 100, 767, 768, 4095, 4096, 70_000):
        tf = rng.randint(1, length)
        for repeat in {tf, 1, min(length, 64), min(length, 15), min(length, 16)}:
            rest = length - repeat
            cases.append(["w"] * repeat + [f"x{i % 50}" for i in range(rest)])
    query = sql.SQL("SELECT tsvector_to_array({}.memory_lexemes(%s, %s))").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(postgres_url) as conn:
        for terms in cases:
            row = conn.execute(query, (" ".join(terms), len(terms))).fetchone()
            assert row is not None
            assert set(row[0]) == _expected_lexemes(terms)
        empty = conn.execute(query, ("", 0)).fetchone()
        assert empty is not None and empty[0] == []


def _kept_and_counted(url: str, schema: str) -> tuple[dict[tuple[str, str], int], ...]:
    s = sql.Identifier(schema)
    with psycopg.connect(url) as conn:
        kept = conn.execute(
            sql.SQL(
                "SELECT tenant, lexeme, sum(items) FROM {}.term_tiers GROUP BY tenant, lexeme"
                " HAVING sum(items) <> 0"
            ).format(s)
        ).fetchall()
        rows = conn.execute(sql.SQL("SELECT tenant, terms FROM {}.memories").format(s)).fetchall()
    counted: Counter[tuple[str, str]] = Counter()
    for tenant, terms in rows:
        words = terms.split()
        counted.update((tenant, lexeme) for lexeme in _expected_lexemes(words))
    return {(t, x): int(n) for t, x, n in kept}, dict(counted)


@pytest.mark.postgres
def test_tier_counts_follow_every_kind_of_write(postgres_url: str, schema: str) -> None:
    """Puts, replaces, batches, deletes, a sweep and delete_user leave exact tier counts."""
    clock = FakeClock()
    with PostgresStore(postgres_url, schema=schema, clock=clock) as store:
        for index in range(200):
            tenant = ("acme", "globex")[index % 2]
            text = "tea " * (index % 5) + "coffee 咖啡" * (index % 3)
            ttl = 5.0 if index % 11 == 0 else None
            store.put(tenant, ("user", f"u{index % 7}"), f"k{index % 90}", text, ttl=ttl)
            if index % 10 == 9:
                store.delete(tenant, ("user", f"u{(index - 3) % 7}"), f"k{(index - 3) % 90}")
        store.put_many("acme", [NewMemory(("team",), f"t{i}", "a b c " * i) for i in range(50)])
        clock.advance(10.0)
        store.sweep_expired()
        store.delete_user("acme", "u3")
    kept, counted = _kept_and_counted(postgres_url, schema)
    assert kept == counted and len(kept) > 20


@pytest.mark.postgres
def test_concurrent_writers_keep_exact_tier_counts(postgres_url: str, schema: str) -> None:
    """Four writers on one tenant's words at once: no deadlock, exact counts."""
    write_concurrently(postgres_url, schema, users=2)
    kept, counted = _kept_and_counted(postgres_url, schema)
    assert kept == counted


# --- migration 7 -> 9 ---------------------------------------------------------------------------

ITEMS = [
    ("acme", ("user", "alice"), "a1", "Alice likes coffee and painting"),
    ("acme", ("user", "alice"), "a2", "coffee coffee, then more coffee"),
    ("acme", ("user", "alice", "session", "s1"), "a3", "用户喜欢喝咖啡"),
    ("acme", ("user", "bob"), "b1", "Bob paints; he likes tea, not coffee"),
    ("acme", ("user", "bob"), "b2", ""),
    ("globex", ("user", "carol"), "g1", "coffee " * 70),
    ("globex", ("user", "carol"), "g2", "咖啡 and tea"),
]


@pytest.mark.postgres
def test_a_version_7_schema_is_migrated_with_its_data(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 7 -> 9: items kept, tier lexemes and counts built, tenant-wide ranks as in memory."""
    clock = FakeClock()
    build_postgres_at(postgres_url, schema, 7, ITEMS, clock)
    reference = InMemoryStore(clock=clock)
    for tenant, namespace, key, text in ITEMS:
        reference.put(tenant, namespace, key, text)
    monkeypatch.setattr(pq, "SCAN_SCOPE", 0)  # the tiered path, even for these few items
    with PostgresStore(postgres_url, schema=schema, clock=clock) as store:
        for tenant, namespace, key, text in ITEMS:
            item = store.get(tenant, namespace, key)
            assert item is not None and item.text == text
        for tenant in ("acme", "globex"):
            for query in ("coffee", "tea coffee", "咖啡", "painting", "nothing"):
                got = [(h.item.key, h.score) for h in store.search(tenant, query=query)]
                want = [(h.item.key, h.score) for h in reference.search(tenant, query=query)]
                assert got == want
    kept, counted = _kept_and_counted(postgres_url, schema)
    assert kept == counted and ("globex", f"coffe/12/{length_class(140)}") in kept
    with psycopg.connect(postgres_url) as conn:
        version = conn.execute(
            sql.SQL("SELECT max(version) FROM {}.schema_version").format(sql.Identifier(schema))
        ).fetchone()
    assert version == (len(pq.MIGRATIONS),) == (9,)


@pytest.mark.postgres
@pytest.mark.parametrize("prefix", [(), ("user", "u1")], ids=["tenant", "user"])
def test_repeated_keyword_searches_never_run_a_generic_plan(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch, prefix: tuple[str, ...]
) -> None:
    """psycopg prepares a statement after five runs; the search still plans each run afresh.

    A generic plan cannot see the tsquery and filtered every item of a tenant (20-25x slower
    at 1,000,000 memories); ``search_settings`` forces custom plans for the transaction.
    """
    monkeypatch.setattr(pq, "SCAN_SCOPE", 0)
    with PostgresStore(postgres_url, schema=schema, min_size=1, max_size=1) as store:
        store.put_many(
            "acme", [NewMemory(("user", f"u{i % 3}"), f"k{i}", "tea " * i) for i in range(60)]
        )
        for _ in range(15):
            assert store.search("acme", prefix, query="tea", limit=3)
        with store._pool.connection() as conn:  # the store's one connection
            rows = conn.execute(
                "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
                " FROM pg_prepared_statements WHERE statement LIKE '%memories%'"
            ).fetchall()
    assert rows[0][0] == 0 and rows[0][1] > 0
