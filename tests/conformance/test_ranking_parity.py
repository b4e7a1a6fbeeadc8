"""Every backend ranks the same data the same way: same hits, same order, same scores.

One generated data set (several tenants and users, sessions under each user, a shared team
namespace, English and Chinese text, kinds and tags, replaced, deleted and expired items, and
many exact ties) is written to the in-memory store, to SQLite and to PostgreSQL through the
same calls on the same fake clock. Every query then runs on each, over scopes from the whole
tenant down to one session and with filters (kinds kept, kinds left out, tags), and the pages
must be identical, scores compared bit for bit: BM25's statistics (N, n, mean length) are the
searched scope's on every backend.

SQLite and PostgreSQL are checked along both of their candidate paths: reading the scope's
items, and asking their full-text index.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synopsis.memory import NewMemory
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.postgres import sql as q
from synopsis.memory.sqlite import SQLiteStore
from synopsis.memory.sqlite import store as sqlite_backend
from synopsis.testing import FakeClock

WORDS = [
    "coffee",
    "tea",
    "morning",
    "meeting",
    "project",
    "deadline",
    "painting",
    "paints",
    "painted",
    "garden",
    "dog",
    "cat",
    "runner",
    "running",
    "travel",
    "paris",
    "tokyo",
    "budget",
    "report",
    "launch",
    "review",
    "bug",
    "fix",
    "deploy",
]
HANZI = "用户喜欢喝咖啡茶早上会议项目报告旅行东京巴黎预算发布"
TENANTS = ("acme", "globex", "initech")
USERS = ("u0", "u1", "u2", "u3")
Hit = tuple[tuple[str, ...], str, float]


def _text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return "".join(rng.choice(HANZI) for _ in range(rng.randint(2, 12)))
    words = [rng.choice(WORDS[: rng.choice((4, 8, len(WORDS)))]) for _ in range(rng.randint(1, 9))]
    if rng.random() < 0.2:
        words.append("".join(rng.choice(HANZI) for _ in range(3)))
    return " ".join(words)


def _namespace(rng: random.Random) -> tuple[str, ...]:
    if rng.random() < 0.15:
        return ("team", rng.choice(("red", "blue")))
    user = rng.choice(USERS)
    if rng.random() < 0.3:
        return ("user", user)
    return ("user", user, "session", rng.choice(("s0", "s1")))


def _memory(rng: random.Random, index: int) -> NewMemory:
    return NewMemory(
        _namespace(rng),
        f"k{index % 90:02d}",  # keys repeat: later batches replace earlier items
        _text(rng),
        kind=rng.choice(("note", "fact", "agents_item")),
        tags={"lang": rng.choice(("en", "zh"))} if rng.random() < 0.5 else None,
        ttl=50.0 if rng.random() < 0.1 else None,
    )


def _batch(rng: random.Random, start: int) -> list[NewMemory]:
    return [_memory(rng, index) for index in range(start, start + 40)]


def _fill(store: Any, clock: FakeClock) -> None:
    """The same writes, at the same fake times, on any backend."""
    rng = random.Random(1234)
    for round_ in range(6):
        for tenant in TENANTS:
            store.put_many(tenant, _batch(rng, round_ * 40))
            store.put(tenant, ("user", "u1"), f"single{round_}", "coffee coffee tea")
        clock.advance(30.0)  # some items expire along the way
        if round_ == 3:
            store.sweep_expired()  # the others stay stored, expired
    for tenant in TENANTS:
        store.delete(tenant, ("user", "u1"), "single2")
        store.delete(tenant, ("team", "red"), "k05")


QUERIES = ("coffee", "tea coffee", "painting", "running runner deadline", "咖啡", "用户喜欢",
           "东", "report bug 报告", "nothing-matches", "Coffee TEA 咖啡 paris")  # fmt: skip
SCOPES: tuple[tuple[str, ...], ...] = (
    (),
    ("user",),
    ("user", "u1"),
    ("user", "u1", "session", "s0"),
    ("team",),
    ("team", "red"),
)
FILTERS: tuple[dict[str, Any], ...] = (
    {},
    {"kind": "fact"},
    {"kind": ("fact", "agents_item")},
    {"exclude_kinds": ("agents_item",)},
    {"exclude_kinds": ("agents_item", "note"), "tags": {"lang": "zh"}},
    {"kind": ("fact", "note"), "exclude_kinds": "note"},
    {"tags": {"lang": "en"}},
    {"limit": 5, "offset": 3},
)


def _rankings(store: Any) -> dict[tuple[Any, ...], list[Hit]]:
    found = {}
    for tenant in TENANTS:
        for scope in SCOPES:
            for query in QUERIES:
                for number, options in enumerate(FILTERS):
                    limit = options.get("limit", 100)
                    hits = store.search(tenant, scope, query=query, **{**options, "limit": limit})
                    found[(tenant, scope, query, number)] = [
                        (h.item.namespace, h.item.key, h.score) for h in hits
                    ]
    return found


def _postgres_store(url: str, clock: FakeClock) -> Iterator[Any]:
    import psycopg
    from psycopg import sql

    from synopsis.memory.postgres import PostgresStore

    schema = f"parity_{uuid.uuid4().hex}"
    try:
        with PostgresStore(url, schema=schema, clock=clock) as store:
            yield store
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _reference() -> dict[tuple[Any, ...], list[Hit]]:
    clock = FakeClock()
    store = InMemoryStore(clock=clock)
    _fill(store, clock)
    return _rankings(store)


def test_reference_data_has_ties_and_many_hits() -> None:
    """The data set exercises what the parity tests rely on: ties and non-trivial pages."""
    rankings = _reference()
    pages = [page for page in rankings.values() if page]
    assert len(pages) > 300
    tied = [page for page in pages if len({score for _, _, score in page}) < len(page)]
    assert len(tied) > 100
    assert max(len(page) for page in pages) >= 50


@pytest.mark.parametrize("scan", [True, False], ids=["scan", "fts"])
def test_sqlite_ranks_like_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan: bool
) -> None:
    """Same hits, order and scores as in-memory, from either candidate path."""
    monkeypatch.setattr(sqlite_backend, "scans_scope", lambda *_: scan)
    clock = FakeClock()
    with SQLiteStore(tmp_path / "parity.sqlite3", clock=clock) as store:
        _fill(store, clock)
        assert _rankings(store) == _reference()


@pytest.mark.postgres
@pytest.mark.parametrize("scan_scope", [q.SCAN_SCOPE, 0], ids=["scan", "index"])
def test_postgres_ranks_like_in_memory(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, scan_scope: int
) -> None:
    """Same hits, order and scores as in-memory, from either candidate path."""
    monkeypatch.setattr(q, "SCAN_SCOPE", scan_scope)
    clock = FakeClock()
    for store in _postgres_store(postgres_url, clock):
        _fill(store, clock)
        assert _rankings(store) == _reference()


# --- a whole tenant through PostgreSQL's impact tiers ---------------------------------------------

TIER_WORDS = ("coffee", "tea", "garden", "budget", "tokyo", "launch")
TIER_QUERIES = ("coffee", "tea coffee", "garden budget tokyo", "launch", "咖啡", "喝咖啡 tea",
                "nothing-matches", "coffee the")  # fmt: skip
TIER_PAGES = ({"limit": 10}, {"limit": 3, "offset": 7}, {"limit": 1}, {"limit": 1000})


def _tier_memory(rng: random.Random, index: int) -> NewMemory:
    """Items over every frequency class and many length classes (up to ~3,000 terms)."""
    word = rng.choice(TIER_WORDS)
    repeats = rng.choice((1, 1, 1, 2, 3, 4, 6, 9, 20, 40))
    filler = " ".join(rng.choice(WORDS) for _ in range(rng.choice((0, 1, 3, 10, 40, 200, 1500))))
    text = " ".join([word] * repeats) + " " + filler
    if rng.random() < 0.2:
        text += " " + "".join(rng.choice(HANZI) for _ in range(rng.randint(2, 30)))
    context = " ".join(rng.choice(TIER_WORDS) for _ in range(rng.randint(0, 3)))
    return NewMemory(
        ("user", rng.choice(USERS)), f"t{index % 700}", text, context=context,
        ttl=50.0 if rng.random() < 0.05 else None,
    )  # fmt: skip


def _fill_tiers(store: Any, clock: FakeClock) -> None:
    rng = random.Random(99)
    for start in range(0, 900, 100):
        store.put_many("acme", [_tier_memory(rng, i) for i in range(start, start + 100)])
        clock.advance(10.0 * rng.choice((0, 1)))  # same times: ties on score break by time
    store.delete("acme", ("user", "u1"), "t5")
    clock.advance(60.0)  # some items expired, not swept


def _tier_rankings(store: Any) -> dict[tuple[Any, ...], list[Hit]]:
    found = {}
    for query in TIER_QUERIES:
        for number, options in enumerate(TIER_PAGES):
            hits = store.search("acme", query=query, **options)
            found[(query, number)] = [(h.item.namespace, h.item.key, h.score) for h in hits]
    return found


@pytest.mark.postgres
@pytest.mark.parametrize("first_step", [1, 256])
def test_postgres_tenant_tiers_rank_like_in_memory(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, first_step: int
) -> None:
    """A whole tenant searched tier by tier ranks as in memory, bit for bit, stopping early.

    Every frequency class is fetched by some search, and some searches stop before their
    last tier (the first step is made tiny to walk many steps).
    """
    from synopsis.memory.postgres import plans as _pg_plans
    from synopsis.memory.postgres.tiers import TF_CEILINGS, parse_lexeme

    monkeypatch.setattr(q, "SCAN_SCOPE", 0)
    monkeypatch.setattr(_pg_plans, "FIRST_STEP", first_step)
    fetched: list[list[str]] = []
    tier_page = q.tier_page

    def recording(*args: Any, **kwargs: Any) -> q.Statement:
        fetched.append(list(kwargs["lexemes"]))
        return tier_page(*args, **kwargs)

    monkeypatch.setattr(q, "tier_page", recording)
    clock = FakeClock()
    reference = InMemoryStore(clock=clock)
    _fill_tiers(reference, clock)
    expected = _tier_rankings(reference)
    assert max(len(page) for page in expected.values()) > 300
    clock = FakeClock()
    for store in _postgres_store(postgres_url, clock):
        _fill_tiers(store, clock)
        assert _tier_rankings(store) == expected
        classes = {parse_lexeme(lexeme)[1] for step in fetched for lexeme in step}
        assert classes == set(range(1, len(TF_CEILINGS) + 1))
        fetched.clear()
        best = store.search("acme", query="coffee", limit=1)
        assert [(h.item.key, h.score) for h in best] == [
            (h.item.key, h.score) for h in reference.search("acme", query="coffee", limit=1)
        ]
        tiers = {parse_lexeme(lexeme) for lexeme in _tier_lexemes(postgres_url, store, "coffe")}
        assert len(tiers) > 20
        read = [lexeme for step in fetched for lexeme in step]
        assert 0 < len(read) < len(tiers)  # stopped early


def _tier_lexemes(url: str, store: Any, term: str) -> list[str]:
    """The tier lexemes of ``term`` that the tenant's counts hold (items > 0)."""
    import psycopg
    from psycopg import sql

    query = sql.SQL(
        "SELECT lexeme FROM {}.term_tiers WHERE tenant = 'acme' AND lexeme LIKE %s"
        " GROUP BY lexeme HAVING sum(items) > 0"
    ).format(sql.Identifier(store._backend.schema))
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute(query, (term + "/%",))]
