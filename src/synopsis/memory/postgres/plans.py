"""The PostgreSQL backend's plans: each operation as a pure generator of SQL statements.

A plan yields :class:`~synopsis.memory.postgres.sql.Statement` values (built by
:mod:`synopsis.memory.postgres.sql`), is sent each statement's rows and returns the
operation's result. Plans do no I/O; :mod:`.store` drives them, sync or
async, over one pooled connection inside one transaction.

Keyword search ranks with BM25 computed, as on the in-memory backend, over the live items in
the searched scope (tenant, prefix, kinds, tags): the database counts the scope and sums its
lengths, finds the items sharing a query term (among the scope's items when the scope is small,
``SCAN_SCOPE``, else through the GIN index), and scores them with
the arithmetic of :func:`~synopsis.memory.ranking.bm25_scores`, in the same order, sending
back only the requested page. A search of a whole large tenant (no prefix, kind or tags) reads
impact tiers instead (``_tiered``, :mod:`synopsis.memory.postgres.tiers`): each term's document
frequency from ``term_tiers``, then the best tiers first, until no unread item can reach the
page.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from synopsis import _sql
from synopsis._sql import Rows
from synopsis.errors import ConfigError, InvalidInput, MigrationError, StoreError
from synopsis.memory import _operations as ops
from synopsis.memory._checks import (
    MAX_LIMIT,
    PutRequest,
    SearchRequest,
    hit_order,
    stored_item,
    summary_save_action,
    to_datetime,
    to_expiry,
)
from synopsis.memory._guards import Claim, Guard
from synopsis.memory._sql_rows import read_outbox_entry, read_summary
from synopsis.memory._types import MemoryItem, Namespace, OutboxEntry, SearchHit, SessionSummary
from synopsis.memory.postgres import reembed as vq
from synopsis.memory.postgres import sql as q
from synopsis.memory.postgres import summaries as qs
from synopsis.memory.postgres.tiers import TierWalk, parse_lexeme, tier_plan
from synopsis.memory.ranking import indexed_terms

__all__ = ["Plan", "PostgresPlans", "Rows", "migrate"]

T = TypeVar("T")
#: A pure operation: yields statements, is sent each statement's rows, returns its result.
Plan = _sql.Plan[q.Statement, T]
#: The fewest items the first step of a tiered search fetches (see ``_tiered``).
FIRST_STEP = 256


# --- rows --------------------------------------------------------------------------------------


def _item_row(
    request: PutRequest, vector: Sequence[float] | None, now: float, embedder: str | None = None
) -> q.ItemRow:
    """The row a put of ``request`` at ``now`` writes (``vector`` made by ``embedder``)."""
    created = now if request.created_at is None else request.created_at
    return q.ItemRow(
        tenant=request.tenant,
        namespace=request.namespace,
        key=request.key,
        text=request.text,
        kind=request.kind,
        tags=request.tags,
        terms=indexed_terms(request.text, request.context),
        embedding=vector,
        created_at=created,
        updated_at=request.updated(now),
        expires_at=request.expiry(now),
        restored=request.created_at is not None,
        context=request.context,
        embedder=None if vector is None else embedder,
    )


def _check_schema(schema: object) -> str:
    if not isinstance(schema, str) or not schema or len(schema) > 63:
        raise ConfigError("schema must be a PostgreSQL identifier of 1 to 63 characters")
    if any(ord(c) < 32 for c in schema):
        raise ConfigError("schema must be printable text")
    return schema


def _check_max_depth(max_depth: object) -> int | None:
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
    ):
        raise InvalidInput("max_depth must be an integer >= 1 or None")
    return max_depth


# --- row decoding ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Found:
    item: MemoryItem
    updated: float


def _item(row: Sequence[Any]) -> _Found:
    tenant, namespace, key, text, kind, tags, created, updated, expires, context = row[:10]
    item = MemoryItem(
        tenant=tenant,
        namespace=tuple(namespace),
        key=key,
        text=text,
        kind=kind,
        tags=dict(tags),
        created_at=to_datetime(created),
        updated_at=to_datetime(updated),
        expires_at=to_expiry(expires),
        context=context,
    )
    return _Found(item, updated)


def _order(found: _Found, score: float | None) -> tuple[float, float, str, Namespace]:
    return hit_order(score, found.updated, found.item.key, found.item.namespace)


def _address(found: _Found) -> tuple[Namespace, str]:
    return (found.item.namespace, found.item.key)


# --- plans ---------------------------------------------------------------------------------------


def migrate(schema: str) -> Plan[int]:
    """Bring ``schema`` up to date; returns the version it was at."""
    yield q.migration_lock(schema)
    yield from _discard(q.migration_prelude(schema))
    have = int((yield q.current_version(schema))[0][0])
    if have > len(q.MIGRATIONS):
        raise MigrationError(
            f"schema {schema!r} is at version {have}, newer than this code knows"
            f" ({len(q.MIGRATIONS)}); upgrade synopsis"
        )
    for version in range(have + 1, len(q.MIGRATIONS) + 1):
        yield from _discard(q.migration(schema, version))
    return have


#: Rows per statement of a batch upsert: each chunk is sent (deferred) as soon as it is
#: prepared, so the server writes one chunk while the plan prepares the next. Each statement
#: also upserts the ``term_tiers`` counts of its distinct tier lexemes, which fewer, larger
#: chunks share more: 500 wrote a 1,000-item batch 1.08x faster than 250 (1,000: 1.09x).
UPSERT_CHUNK = 500
#: Rows per statement of a bulk load (see :func:`_bulk_load`).
BULK_CHUNK = 5_000


def _put_many(
    schema: str,
    requests: Sequence[PutRequest],
    vectors: Sequence[Sequence[float] | None],
    now: float,
    embedder: str | None,
) -> Plan[list[MemoryItem]]:
    """Upsert the whole batch in one transaction (a ``put`` is a batch of one).

    The rows go in (namespace, key) order, so every writer locks existing rows in one order
    and two batches of the same keys, however shuffled, cannot deadlock. Each chunk's rows
    (their terms) are built only when it is sent: every chunk but the last is deferred.
    """
    written = yield from _upsert(schema, requests, vectors, now, embedder, UPSERT_CHUNK)
    created = {(path, key): first for path, key, first in written}
    return [
        stored_item(r, created=created[("\x1f".join(r.namespace), r.key)], now=now)
        for r in requests
    ]


def _upsert(
    schema: str,
    requests: Sequence[PutRequest],
    vectors: Sequence[Sequence[float] | None],
    now: float,
    embedder: str | None,
    chunk_rows: int,
) -> Plan[Rows]:
    """The upsert statements of a batch, ``chunk_rows`` rows each; every row's
    ``path, key, created_at``."""
    order = sorted(range(len(requests)), key=lambda i: (requests[i].namespace, requests[i].key))
    written: Rows = []
    for start in range(0, len(order), chunk_rows):
        chunk = order[start : start + chunk_rows]
        rows = [_item_row(requests[i], vectors[i], now, embedder) for i in chunk]
        statement = q.upsert_items(schema, requests[0].tenant, rows, now)
        last = start + chunk_rows >= len(order)
        written = yield statement if last else replace(statement, deferred=True)
    return written


def _bulk_load(
    schema: str,
    requests: Sequence[PutRequest],
    vectors: Sequence[Sequence[float] | None],
    now: float,
    embedder: str | None,
) -> Plan[int]:
    """``_put_many`` in chunks of ``BULK_CHUNK`` rows, no items built: the statement-level
    triggers then fold a load's counter deltas (``tenant_totals``, ``term_tiers``: one
    upsert per distinct lexeme and statement) once per chunk rather than once per 500 rows."""
    yield from _upsert(schema, requests, vectors, now, embedder, BULK_CHUNK)
    return len(requests)


def _only(plan: Plan[list[T]]) -> Plan[T]:
    """The single result of a plan that returns a list of one."""
    (result,) = yield from plan
    return result


def _scope(request: SearchRequest, now: float) -> q.Scope:
    return q.Scope(
        tenant=request.tenant,
        prefix=request.prefix,
        kinds=request.kinds,
        exclude_kinds=request.exclude_kinds,
        tags=request.tags,
        now=now,
    )


def _keyword(
    schema: str, request: SearchRequest, now: float, *, limit: int = MAX_LIMIT, offset: int = 0
) -> Plan[list[tuple[_Found, float]]]:
    """A page of keyword hits, best first, scored in the database (see ``keyword_page``).

    A whole tenant larger than ``SCAN_SCOPE`` is searched tier by tier (``_tiered``).
    """
    scope = _scope(request, now)
    yield q.search_settings()
    if request.whole_tenant:
        plan = (yield q.tenant_terms(schema, request.tenant, request.terms, now))[0]
        size, length = int(plan[0]), int(plan[1])
        if size > q.SCAN_SCOPE:
            return (yield from _tiered(schema, request, now, plan, limit=limit, offset=offset))
    else:
        size, length = (yield q.scope_stats(schema, **scope))[0]
    if size == 0:
        return []
    rows = yield q.keyword_page(
        schema,
        terms=request.terms,
        scope_size=size,
        average=(length / size) or 1.0,
        limit=limit,
        offset=offset,
        **scope,
    )
    return [(_item(row), row[10]) for row in rows]


def _tiered(
    schema: str,
    request: SearchRequest,
    now: float,
    plan: Sequence[Any],
    *,
    limit: int,
    offset: int,
) -> Plan[list[tuple[_Found, float]]]:
    """A whole tenant's page of keyword hits, reading impact tiers best first (:mod:`.tiers`).

    ``plan`` is the row of ``tenant_terms``. BM25's n of each term is the sum of its tiers'
    counts less its expired items not yet swept; each step fetches the tiers
    :class:`TierWalk` picks (at least ``target`` items, 2x more each step), keeps the best
    ``offset + limit`` items scored exactly, and the search stops once the last of them
    scores strictly above every unfetched item's bound.
    """
    size, length, lexemes, items, expired = int(plan[0]), int(plan[1]), *plan[2:5]
    terms, wanted = request.terms, offset + limit
    found = dict.fromkeys(terms, 0)
    for lexeme, count in zip(lexemes, items, strict=True):
        found[parse_lexeme(lexeme)[0]] += int(count)
    counts = [found[term] - int(gone) for term, gone in zip(terms, expired, strict=True)]
    idf = [math.log(1 + (size - n + 0.5) / (n + 0.5)) for n in counts]
    average = (length / size) or 1.0
    tiers = [(lexeme, int(count)) for lexeme, count in zip(lexemes, items, strict=True)]
    walk = TierWalk(tier_plan(tiers, terms, idf, average), len(terms))
    best: dict[tuple[Namespace, str], tuple[_Found, float]] = {}
    target, top = max(4 * wanted, FIRST_STEP), []
    while not walk.done():
        page = yield q.tier_page(
            schema,
            tenant=request.tenant,
            now=now,
            terms=terms,
            lexemes=walk.step(target),
            idf=idf,
            average=average,
            limit=wanted,
        )
        for row in page:
            hit = _item(row)
            best[_address(hit)] = (hit, row[10])
        top = sorted(best.values(), key=lambda pair: _order(*pair))[:wanted]
        best = {_address(hit): (hit, score) for hit, score in top}
        if len(top) == wanted and top[-1][1] > walk.unseen():
            break
        target *= 2
    return top[offset:]


def _fused(
    schema: str,
    request: SearchRequest,
    now: float,
    query_vector: Sequence[float],
    embedder: str | None,
) -> Plan[list[tuple[_Found, float]]]:
    """Vector or hybrid scores; only embeddings of ``embedder`` take part."""
    rows = yield q.vector_candidates(schema, embedder, **_scope(request, now))
    found = [(_item(row), row[10]) for row in rows]
    records = {_address(item): item for item, _ in found}
    keyword = None
    if request.mode == "hybrid":
        ranked = sorted((yield from _keyword(schema, request, now)), key=lambda p: _order(*p))
        keyword = [(_address(item), score) for item, score in ranked]
    with_vectors = [(_address(item), vector) for item, vector in found if vector is not None]
    scores = ops.vector_scores(query_vector, with_vectors, keyword)
    return [(records[address], score) for address, score in scores.items()]


def _search(
    schema: str,
    request: SearchRequest,
    now: float,
    query_vector: Sequence[float] | None,
    embedder: str | None,
) -> Plan[list[SearchHit]]:
    if request.query is None:
        rows = yield q.search_newest(
            schema, limit=request.limit, offset=request.offset, **_scope(request, now)
        )
        return [SearchHit(item=_item(row).item, score=None) for row in rows]
    if request.mode == "keyword":
        page = yield from _keyword(schema, request, now, limit=request.limit, offset=request.offset)
        return [SearchHit(item=found.item, score=score) for found, score in page]
    assert query_vector is not None
    scored = yield from _fused(schema, request, now, query_vector, embedder)
    scored.sort(key=lambda pair: _order(*pair))
    page = scored[request.offset : request.offset + request.limit]
    return [SearchHit(item=found.item, score=score) for found, score in page]


def _discard(statements: Sequence[q.Statement]) -> Plan[None]:
    """Run statements whose rows nobody needs."""
    for statement in statements:
        _ = yield statement


def _rows(statement: q.Statement, decode: Callable[[Rows], T]) -> Plan[T]:
    """Run one statement; its rows, decoded."""
    return decode((yield statement))


def _count(rows: Rows) -> int:
    return int(rows[0][0])


def _first_item(rows: Rows) -> MemoryItem | None:
    return _item(rows[0]).item if rows else None


def _first_summary(rows: Rows) -> SessionSummary | None:
    return read_summary(rows[0]) if rows else None


def _outbox(rows: Rows) -> list[OutboxEntry]:
    return [read_outbox_entry(row) for row in rows]


def _attempts(rows: Rows) -> int:
    """The attempt count an outbox update returned; 0 when it matched no entry."""
    return int(rows[0][0]) if rows else 0


def _check_guard(schema: str, guard: Guard) -> Plan[None]:
    """Hold the user's deletion lock (shared) to commit; raise UserDeleted if ``guard`` fails."""
    yield qs.lock_user(guard.tenant, guard.user_id, exclusive=False)
    current = yield from _rows(qs.select_generation(schema, guard.tenant, guard.user_id), _count)
    refused = guard.refused(current)
    if refused is not None:
        raise refused


def _guarded_put(
    schema: str,
    guard: Guard,
    request: PutRequest,
    vector: Sequence[float] | None,
    now: float,
    embedder: str | None,
) -> Plan[MemoryItem]:
    yield from _check_guard(schema, guard)
    return (yield from _only(_put_many(schema, [request], [vector], now, embedder)))


def _delete_summaries(schema: str, tenant: str, user_id: str) -> Plan[int]:
    """Move the user's generation, drop the user's claims and summaries (the outbox cascades).

    The caller holds the user's deletion lock exclusively.
    """
    yield qs.bump_generation(schema, tenant, user_id)
    yield qs.delete_user_claims(schema, tenant, user_id)
    return (yield from _rows(qs.delete_user_summaries(schema, tenant, user_id), _count))


def _delete_user(schema: str, tenant: str, user_id: str, *, memories: bool) -> Plan[int]:
    yield qs.lock_user(tenant, user_id, exclusive=True)
    deleted = 0
    if memories:
        deleted = yield from _rows(q.delete_user_memories(schema, tenant, user_id), _count)
    return deleted + (yield from _delete_summaries(schema, tenant, user_id))


def _save_summary(
    schema: str, summary: SessionSummary, guard: Guard | None, now: float
) -> Plan[SessionSummary]:
    if guard is not None:  # the user's lock first, as delete_user takes it: no lock cycle
        yield from _check_guard(schema, guard)
    session = (summary.tenant, summary.user_id, summary.session_id)
    yield qs.lock_session(*session)
    same = yield qs.summary_version(schema, *session, summary.version)
    newest = yield qs.summary_history(schema, *session, latest=True)
    existing = read_summary(same[0]) if same else None
    latest = read_summary(newest[0]) if newest else None
    if summary_save_action(summary, existing=existing, latest=latest) == "noop":
        assert existing is not None
        return existing
    created = summary.created_at.timestamp() if summary.created_at else now
    insert_summary, insert_outbox = qs.insert_summary(schema, summary, created_at=created, now=now)
    if not (yield insert_summary):  # pragma: no cover - the session lock prevents this
        raise StoreError(f"summary {summary.session_id!r} version {summary.version} conflicted")
    yield insert_outbox
    return replace(summary, created_at=summary.created_at or to_datetime(now))


# --- the backend ---------------------------------------------------------------------------------


class PostgresPlans:
    """The PostgreSQL backend (see :class:`~synopsis.memory._operations.Backend`).

    Each call reads the clock and answers with the plan of its operation, on checked
    arguments. Vectors are rounded through float32, as ``real[]`` stores them.
    """

    def __init__(self, schema: str, clock: Callable[[], float] | None) -> None:
        self.schema = _check_schema(schema)
        self.clock = clock or time.time

    def put(
        self, request: PutRequest, vector: ops.Vector | None, embedder_id: str | None
    ) -> Plan[MemoryItem]:
        return _only(self.put_many([request], None if vector is None else [vector], embedder_id))

    def guarded_put(
        self, request: PutRequest, vector: ops.Vector | None, guard: Guard, embedder_id: str | None
    ) -> Plan[MemoryItem]:
        now = self.clock()
        rounded = None if vector is None else ops.float32(vector)
        return _guarded_put(self.schema, guard, request, rounded, now, embedder_id)

    def put_many(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> Plan[list[MemoryItem]]:
        rounded = [None] * len(requests) if vectors is None else [*map(ops.float32, vectors)]
        now = self.clock()
        return _put_many(self.schema, requests, rounded, now, embedder_id)

    def bulk_load(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> Plan[int]:
        rounded = [None] * len(requests) if vectors is None else [*map(ops.float32, vectors)]
        return _bulk_load(self.schema, requests, rounded, self.clock(), embedder_id)

    def get(self, tenant: str, namespace: Namespace, key: str) -> Plan[MemoryItem | None]:
        statement = q.get_item(self.schema, tenant, namespace, key, self.clock())
        return _rows(statement, _first_item)

    def delete(self, tenant: str, namespace: Namespace, key: str) -> Plan[bool]:
        statement = q.delete_item(self.schema, tenant, namespace, key, self.clock())
        return _rows(statement, lambda rows: bool(rows and rows[0][0]))

    def search(
        self, request: SearchRequest, query_vector: ops.Vector | None, embedder_id: str | None
    ) -> Plan[list[SearchHit]]:
        vector = None if query_vector is None else ops.float32(query_vector)
        return _search(self.schema, request, self.clock(), vector, embedder_id)

    def list_namespaces(
        self, tenant: str, prefix: Namespace, max_depth: int | None, limit: int, offset: int
    ) -> Plan[list[Namespace]]:
        statement = q.list_namespaces(
            self.schema,
            tenant=tenant,
            prefix=prefix,
            max_depth=_check_max_depth(max_depth),
            now=self.clock(),
            limit=limit,
            offset=offset,
        )
        return _rows(statement, lambda rows: [tuple(row[0]) for row in rows])

    def delete_user(self, tenant: str, user_id: str) -> Plan[int]:
        return _delete_user(self.schema, tenant, user_id, memories=True)

    def deletion_generation(self, tenant: str, user_id: str) -> Plan[int]:
        return _rows(qs.select_generation(self.schema, tenant, user_id), _count)

    def sweep_expired(self) -> Plan[int]:
        return _rows(q.sweep_expired(self.schema, self.clock()), _count)

    def count_unembedded(self, tenant: str, embedder_id: str | None) -> Plan[int]:
        statement = vq.pg_count_unembedded(self.schema, tenant, self.clock(), embedder_id)
        return _rows(statement, _count)

    def unembedded(self, tenant: str, limit: int, embedder_id: str) -> Plan[list[ops.Unembedded]]:
        statement = vq.pg_unembedded(self.schema, tenant, self.clock(), limit, embedder_id)
        return _rows(statement, lambda rows: [(tuple(ns), key, text) for ns, key, text in rows])

    def set_vectors(
        self, tenant: str, rows: list[tuple[Namespace, str, str, ops.Vector]], embedder_id: str
    ) -> Plan[int]:
        rounded = [(ns, key, text, ops.float32(vector)) for ns, key, text, vector in rows]
        return _rows(vq.pg_set_vectors(self.schema, tenant, rounded, embedder_id), len)

    def forget_vectors(self, tenant: str) -> Plan[int]:
        return _rows(vq.pg_forget_vectors(self.schema, tenant), _count)

    def adopt_vectors(self, tenant: str, embedder_id: str) -> Plan[int]:
        return _rows(vq.pg_adopt_vectors(self.schema, tenant, embedder_id), _count)

    def save_summary(self, summary: SessionSummary, guard: Guard | None) -> Plan[SessionSummary]:
        return _save_summary(self.schema, summary, guard, self.clock())

    def latest_summary(
        self, tenant: str, user_id: str, session_id: str
    ) -> Plan[SessionSummary | None]:
        statement = qs.summary_history(self.schema, tenant, user_id, session_id, latest=True)
        return _rows(statement, _first_summary)

    def summary_history(
        self, tenant: str, user_id: str, session_id: str
    ) -> Plan[list[SessionSummary]]:
        statement = qs.summary_history(self.schema, tenant, user_id, session_id, latest=False)
        return _rows(statement, lambda rows: [read_summary(row) for row in rows])

    def pending_outbox(self, tenant: str | None, limit: int) -> Plan[list[OutboxEntry]]:
        return _rows(qs.pending_outbox(self.schema, tenant, limit), _outbox)

    def complete_outbox(
        self, tenant: str, user_id: str, session_id: str, version: int
    ) -> Plan[None]:
        statement = qs.complete_outbox(self.schema, tenant, user_id, session_id, version)
        return _rows(statement, lambda _: None)

    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> Plan[int]:
        statement = qs.fail_outbox(self.schema, tenant, user_id, session_id, version)
        return _rows(statement, _attempts)

    def delete_user_summaries(self, tenant: str, user_id: str) -> Plan[int]:
        return _delete_user(self.schema, tenant, user_id, memories=False)

    def claim_summary_job(self, claim: Claim) -> Plan[bool]:
        return _rows(qs.claim_job(self.schema, claim, self.clock()), bool)

    def release_summary_job(
        self, tenant: str, user_id: str, session_id: str, owner: str
    ) -> Plan[bool]:
        statement = qs.release_job(self.schema, tenant, user_id, session_id, owner)
        return _rows(statement, bool)
