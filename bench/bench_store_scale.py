"""Benchmark the memory stores at scale: bulk-ingest rate and keyword-search latency.

Run ``python bench/bench_store_scale.py`` (100,000 and 1,000,000 memories; the 1M runs take a
while) or ``--quick`` (10,000). ``--sizes 100000`` picks sizes; ``--sides ours`` skips the
baseline (its tenant-wide scans take minutes at 1M), for comparing two trees of synopsis run
one after the other with different ``PYTHONPATH``. Prints markdown tables on stdout and
progress on stderr.

For each backend and size the same synthetic memories are written twice, each time into a new,
empty database:

* **ours**: ``SQLiteStore`` (a file in a temporary folder) or ``PostgresStore`` (``--postgres-url``
  or ``SYNOPSIS_TEST_POSTGRES_URL``; skipped with a note when neither is set), written with
  ``put_many`` in batches, then searched with ``search(..., query=q)`` (keyword mode, BM25).
* **baseline**: the original design, measured in the same run: a plain table (``tenant,
  namespace, key, text, kind, created_at``, unique on the address) filled with ``executemany``
  in batches of the same size, searched with ``text LIKE '%term%'`` (SQLite) or ``ILIKE``
  (PostgreSQL), one condition per query word joined by OR, newest first. The namespace prefix
  is a range on the address index, so the baseline's scoped search is index-assisted.

On PostgreSQL both sides get a ``VACUUM ANALYZE`` after the ingest (what autovacuum would
do soon after a bulk load; not timed). The server's settings are left as they are.

Data is deterministic (``--seed``): English-like words made up from syllables with a Zipf
distribution (so there are very common and very rare words), Chinese sentences drawn from a
set of common characters, spread over 1,000 users x 10 sessions of one tenant plus three
smaller tenants. Queries (``--queries`` per scope, default 200) mix four kinds in equal
parts: a rare word, a common word, two words, and a two-character Chinese phrase; each runs
scoped to one user (``("user", uid)``) and tenant-wide.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Protocol

from synopsis.memory import NewMemory
from synopsis.memory.sqlite import SQLiteStore

MAIN_TENANT = "acme"
OTHER_TENANTS = ("globex", "initech", "umbrella")
USERS = 1_000
SESSIONS = 10
VOCABULARY = 5_000
KINDS = ("note", "fact", "summary")
#: Common characters of written Chinese; sentences are drawn from them (Zipf by position).
HANZI = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
    "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所"
    "本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全"
    "工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教"
    "西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性"
    "通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲"
    "界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认"
    "算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红"
)
_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v",
           "w", "z", "br", "cr", "dr", "st", "tr", "pl", "gr", "sh", "ch", "th", "sl")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "oo", "ou", "ie")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "x")


# ---------------------------------------------------------------------------------------------
# Data


def make_words(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct made-up words of one to three syllables (rank 0 = most frequent)."""
    words: dict[str, None] = {}
    while len(words) < count:
        syllables = rng.choice((1, 2, 2, 2, 3, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        words.setdefault(word, None)
    return list(words)


def zipf_weights(count: int) -> list[float]:
    """Cumulative Zipf(1) weights over ranks 0..count-1."""
    return list(accumulate(1.0 / (rank + 1) for rank in range(count)))


@dataclass(frozen=True, slots=True)
class Corpus:
    #: ``(tenant, items)`` batches, ready for ``put_many``.
    batches: list[tuple[str, list[NewMemory]]]
    words: list[str]
    chinese: list[str]
    size: int


def _english(rng: random.Random, words: list[str], weights: list[float]) -> str:
    return " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(8, 30))).capitalize()


def _chinese(rng: random.Random, weights: list[float]) -> str:
    return "".join(rng.choices(HANZI, cum_weights=weights, k=rng.randint(8, 24)))


def make_corpus(size: int, *, seed: int, batch: int, vocabulary: int = VOCABULARY) -> Corpus:
    """``size`` memories: ~95% in the main tenant, one tenant per batch; ~20% Chinese; the
    English words drawn (Zipf) from ``vocabulary`` made-up words."""
    rng = random.Random(seed)
    words = make_words(rng, vocabulary)
    word_weights, hanzi_weights = zipf_weights(len(words)), zipf_weights(len(HANZI))
    namespaces: dict[tuple[str, int, int], tuple[str, ...]] = {}
    batches: list[tuple[str, list[NewMemory]]] = []
    chinese: list[str] = []
    for start in range(0, size, batch):
        tenant = MAIN_TENANT if rng.random() < 0.95 else rng.choice(OTHER_TENANTS)
        items = []
        for index in range(start, min(size, start + batch)):
            user, session = rng.randrange(USERS), rng.randrange(SESSIONS)
            namespace = namespaces.setdefault(
                (tenant, user, session), ("user", f"u{user}", "session", f"s{session}")
            )
            if rng.random() < 0.2:
                text = _chinese(rng, hanzi_weights)
                chinese.append(text)
            else:
                text = _english(rng, words, word_weights)
            items.append(NewMemory(namespace, f"m{index}", text, kind=rng.choice(KINDS)))
        batches.append((tenant, items))
    return Corpus(batches=batches, words=words, chinese=chinese[:5_000], size=size)


@dataclass(frozen=True, slots=True)
class Query:
    kind: str
    scope: str
    prefix: tuple[str, ...]
    text: str
    #: The words the baseline looks for with LIKE (OR-ed).
    likes: tuple[str, ...]


def make_queries(corpus: Corpus, *, per_scope: int, seed: int) -> list[Query]:
    """``per_scope`` queries for each scope, the four kinds in equal parts."""
    rng = random.Random(seed + 1)
    words = corpus.words
    queries = []
    for scope in ("user", "tenant"):
        for index in range(per_scope):
            kind = ("rare", "common", "two words", "Chinese")[index % 4]
            if kind == "rare":
                likes: tuple[str, ...] = (rng.choice(words[len(words) // 2 :]),)
            elif kind == "common":
                likes = (rng.choice(words[5:20]),)
            elif kind == "two words":
                likes = (rng.choice(words[:50]), rng.choice(words[200:1000]))
            else:
                sentence = rng.choice(corpus.chinese)
                at = rng.randrange(len(sentence) - 1)
                likes = (sentence[at : at + 2],)
            prefix = ("user", f"u{rng.randrange(USERS)}") if scope == "user" else ()
            queries.append(Query(kind, scope, prefix, " ".join(likes), likes))
    return queries


# ---------------------------------------------------------------------------------------------
# Targets: one store under test, ours or the baseline


class Target(Protocol):
    def write(self, tenant: str, items: list[NewMemory]) -> None: ...

    def search(self, tenant: str, query: Query) -> int: ...

    def size_bytes(self) -> int: ...

    def close(self) -> None: ...


def _path(namespace: Sequence[str]) -> str:
    return "/".join(namespace) + "/"


def _prefix_bounds(prefix: Sequence[str]) -> tuple[str, str]:
    """``low <= path < high`` selects the prefix (paths end with "/"; "0" follows "/")."""
    low = _path(prefix) if prefix else ""
    return low, (low[:-1] + "0") if low else "\U0010ffff"


class OursSQLite:
    def __init__(self, folder: Path) -> None:
        self.file = folder / "ours.sqlite3"
        self.store = SQLiteStore(self.file)

    def write(self, tenant: str, items: list[NewMemory]) -> None:
        self.store.put_many(tenant, items)

    def search(self, tenant: str, query: Query) -> int:
        return len(self.store.search(tenant, query.prefix, query=query.text, limit=10))

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.file.parent.glob("ours.sqlite3*"))

    def close(self) -> None:
        self.store.close()


_PLAIN_SQLITE = (
    "CREATE TABLE plain (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, namespace TEXT NOT NULL,"
    " key TEXT NOT NULL, text TEXT NOT NULL, kind TEXT NOT NULL, created_at REAL NOT NULL,"
    " UNIQUE (tenant, namespace, key))"
)


class PlainSQLite:
    def __init__(self, folder: Path) -> None:
        self.file = folder / "plain.sqlite3"
        self.conn = sqlite3.connect(self.file, isolation_level=None)
        for pragma in ("PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"):
            self.conn.execute(pragma)
        self.conn.execute(_PLAIN_SQLITE)

    def write(self, tenant: str, items: list[NewMemory]) -> None:
        now = time.time()
        rows = [(tenant, _path(i.namespace), i.key, i.text, i.kind, now) for i in items]
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO plain (tenant, namespace, key, text, kind, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        self.conn.execute("COMMIT")

    def search(self, tenant: str, query: Query) -> int:
        likes = " OR ".join("text LIKE ?" for _ in query.likes)
        rows = self.conn.execute(
            "SELECT id, namespace, key, text, kind, created_at FROM plain WHERE tenant = ?"
            f" AND namespace >= ? AND namespace < ? AND ({likes}) ORDER BY id DESC LIMIT 10",
            (tenant, *_prefix_bounds(query.prefix), *(f"%{w}%" for w in query.likes)),
        ).fetchall()
        return len(rows)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.file.parent.glob("plain.sqlite3*"))

    def close(self) -> None:
        self.conn.close()


def _pg_size(conn: Any, schema: str) -> int:
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (schema,),
    ).fetchone()
    return int(row[0])


def _fresh_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class OursPostgres:
    def __init__(self, url: str) -> None:
        from synopsis.memory.postgres import PostgresStore

        self.url, self.schema = url, "bench_scale_ours"
        _fresh_schema(url, self.schema)
        self.store = PostgresStore(url, schema=self.schema, max_size=2)

    def write(self, tenant: str, items: list[NewMemory]) -> None:
        self.store.put_many(tenant, items)

    def search(self, tenant: str, query: Query) -> int:
        return len(self.store.search(tenant, query.prefix, query=query.text, limit=10))

    def analyze(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {self.schema}.memories")

    def size_bytes(self) -> int:
        import psycopg

        with psycopg.connect(self.url) as conn:
            return _pg_size(conn, self.schema)

    def close(self) -> None:
        self.store.close()
        _fresh_schema(self.url, self.schema)


class PlainPostgres:
    def __init__(self, url: str) -> None:
        import psycopg

        self.url, self.schema = url, "bench_scale_plain"
        _fresh_schema(url, self.schema)
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"CREATE SCHEMA {self.schema}")
        self.conn.execute(
            f"CREATE TABLE {self.schema}.plain (id bigserial PRIMARY KEY, tenant text NOT NULL,"
            " namespace text NOT NULL, key text NOT NULL, text text NOT NULL, kind text NOT NULL,"
            " created_at double precision NOT NULL, UNIQUE (tenant, namespace, key))"
        )

    def write(self, tenant: str, items: list[NewMemory]) -> None:
        now = time.time()
        rows = [(tenant, _path(i.namespace), i.key, i.text, i.kind, now) for i in items]
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.schema}.plain (tenant, namespace, key, text, kind, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )

    def search(self, tenant: str, query: Query) -> int:
        likes = " OR ".join("text ILIKE %s" for _ in query.likes)
        rows = self.conn.execute(
            f"SELECT id, namespace, key, text, kind, created_at FROM {self.schema}.plain"
            " WHERE tenant = %s AND namespace >= %s AND namespace < %s"
            f" AND ({likes}) ORDER BY id DESC LIMIT 10",
            (tenant, *_prefix_bounds(query.prefix), *(f"%{w}%" for w in query.likes)),
        ).fetchall()
        return len(rows)

    def analyze(self) -> None:
        self.conn.execute(f"VACUUM ANALYZE {self.schema}.plain")

    def size_bytes(self) -> int:
        return _pg_size(self.conn, self.schema)

    def close(self) -> None:
        self.conn.close()
        _fresh_schema(self.url, self.schema)


# ---------------------------------------------------------------------------------------------
# Measuring


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ingest(target: Target, corpus: Corpus, label: str) -> float:
    """Write every batch; return memories per second (time spent in ``write`` only)."""
    spent, done, next_report = 0.0, 0, 100_000
    for tenant, items in corpus.batches:
        start = time.perf_counter()
        target.write(tenant, items)
        spent += time.perf_counter() - start
        done += len(items)
        if done >= next_report:
            log(f"{label}: {done:,} written, {done / spent:,.0f}/s")
            next_report += 100_000
    return corpus.size / spent


def search_latencies(
    target: Target, queries: Sequence[Query]
) -> dict[tuple[str, str], list[float]]:
    """Seconds per query, by ``(scope, kind)``; a few warm-up queries run first, untimed."""
    for query in queries[:8]:
        target.search(MAIN_TENANT, query)
    timings: dict[tuple[str, str], list[float]] = {}
    for query in queries:
        start = time.perf_counter()
        target.search(MAIN_TENANT, query)
        timings.setdefault((query.scope, query.kind), []).append(time.perf_counter() - start)
    return timings


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The sample at ``fraction`` of the way up (nan without samples: a side not run)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass(frozen=True, slots=True)
class Result:
    backend: str
    size: int
    rate: dict[str, float]
    disk: dict[str, int]
    latencies: dict[str, dict[tuple[str, str], list[float]]]


def run(
    backend: str, corpus: Corpus, queries: Sequence[Query], makers: dict[str, Callable[[], Any]]
) -> Result:
    rate: dict[str, float] = {}
    disk: dict[str, int] = {}
    latencies = {}
    for side, make in makers.items():
        label = f"{backend} {side} {corpus.size:,}"
        target = make()
        try:
            rate[side] = ingest(target, corpus, label)
            if hasattr(target, "analyze"):
                target.analyze()
            disk[side] = target.size_bytes()
            log(f"{label}: ingest {rate[side]:,.0f}/s, searching")
            latencies[side] = search_latencies(target, queries)
        finally:
            target.close()
    return Result(backend, corpus.size, rate, disk, latencies)


# ---------------------------------------------------------------------------------------------
# Report


def fmt_time(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _pooled(
    timings: dict[tuple[str, str], list[float]], scope: str, kind: str | None
) -> list[float]:
    return [t for (s, k), ts in timings.items() if s == scope and kind in (None, k) for t in ts]


def ingest_table(results: Sequence[Result]) -> Iterator[str]:
    yield (
        "| backend | memories | ours (put_many) | baseline (executemany) | ours / baseline "
        "| on disk: ours | on disk: baseline |"
    )
    yield "|---|---:|---:|---:|---:|---:|---:|"
    for r in results:
        ours, base = r.rate.get("ours", math.nan), r.rate.get("baseline", math.nan)
        disk = {side: r.disk.get(side, math.nan) / 2**20 for side in ("ours", "baseline")}
        cells = [
            _shown(ours, f"{ours:,.0f}/s"), _shown(base, f"{base:,.0f}/s"),
            _shown(ours / base, f"{ours / base:.2f}x"),
            _shown(disk["ours"], f"{disk['ours']:,.0f} MiB"),
            _shown(disk["baseline"], f"{disk['baseline']:,.0f} MiB"),
        ]  # fmt: skip
        yield f"| {r.backend} | {r.size:,} | " + " | ".join(cells) + " |"


def _shown(value: float, text: str) -> str:
    """``text``, or n/a for a side that did not run (``--sides``)."""
    return "n/a" if math.isnan(value) else text


def search_table(results: Sequence[Result], kinds: Sequence[str | None]) -> Iterator[str]:
    yield (
        "| backend | memories | scope | queries | ours p50 | ours p95 | baseline p50 "
        "| baseline p95 | p50 ours / baseline | p95 ours / baseline |"
    )
    yield "|---|---:|---|---|---:|---:|---:|---:|---:|---:|"
    for r in results:
        for scope in ("user", "tenant"):
            for kind in kinds:
                ours = _pooled(r.latencies.get("ours", {}), scope, kind)
                base = _pooled(r.latencies.get("baseline", {}), scope, kind)
                o50, o95 = percentile(ours, 0.5), percentile(ours, 0.95)
                b50, b95 = percentile(base, 0.5), percentile(base, 0.95)
                yield (
                    f"| {r.backend} | {r.size:,} | {scope} | {kind or 'all'} ({len(ours)}) "
                    f"| {fmt_time(o50)} | {fmt_time(o95)} | {fmt_time(b50)} | {fmt_time(b95)} "
                    f"| {_shown(o50 / b50, f'{o50 / b50:.2f}x')} "
                    f"| {_shown(o95 / b95, f'{o95 / b95:.2f}x')} |"
                )


def header(postgres_url: str | None) -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = f"SQLite {sqlite3.sqlite_version}"
    if postgres_url:
        import psycopg

        with psycopg.connect(postgres_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            versions += f", PostgreSQL {row[0] if row else '?'}"
    return (
        f"# memory store scale, {time.strftime('%Y-%m-%d %H:%M %Z')}\n\n"
        f"{platform.machine()}, {os.cpu_count()} CPUs, {memory:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"{versions}; load average before the run: {os.getloadavg()[0]:.2f}\n"
        f"command: {' '.join(sys.argv)}\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 memories only")
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated sizes")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument("--postgres-url", default=os.environ.get("SYNOPSIS_TEST_POSTGRES_URL"))
    parser.add_argument("--queries", type=int, default=200, help="queries per scope")
    parser.add_argument("--batch", type=int, default=1_000, help="memories per put_many call")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--sides", default="ours,baseline", help="ours and/or baseline (the other: n/a)"
    )
    args = parser.parse_args(argv)
    sizes = [10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")
    if "postgres" in backends and not args.postgres_url:
        print("PostgreSQL skipped: no --postgres-url and no SYNOPSIS_TEST_POSTGRES_URL.\n")
        backends.remove("postgres")
    print(header(args.postgres_url if "postgres" in backends else None))
    results = []
    for size in sizes:
        log(f"generating {size:,} memories")
        corpus = make_corpus(size, seed=args.seed, batch=args.batch)
        queries = make_queries(corpus, per_scope=args.queries, seed=args.seed)
        for backend in backends:
            with tempfile.TemporaryDirectory(prefix="synopsis-bench-") as folder:
                results.append(run(backend, corpus, queries, _makers(backend, folder, args)))
    print(f"## Ingest (batches of {args.batch:,}; higher is better)\n")
    print("\n".join(ingest_table(results)))
    print(f"\n## Keyword search, top 10 ({args.queries} queries per scope; lower is better)\n")
    print("\n".join(search_table(results, [None])))
    print("\n## Keyword search by query kind\n")
    print("\n".join(search_table(results, ["rare", "common", "two words", "Chinese"])))


def _makers(backend: str, folder: str, args: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    if backend == "sqlite":
        lite = {
            "ours": lambda: OursSQLite(Path(folder)),
            "baseline": lambda: PlainSQLite(Path(folder)),
        }
        return {side: lite[side] for side in args.sides.split(",")}
    url = args.postgres_url
    makers = {"ours": lambda: OursPostgres(url), "baseline": lambda: PlainPostgres(url)}
    return {side: makers[side] for side in args.sides.split(",")}


if __name__ == "__main__":
    main()
