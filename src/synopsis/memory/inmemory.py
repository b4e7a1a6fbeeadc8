"""The in-memory backend: the reference implementation every other backend is tested against.

Plain dictionaries behind one lock; keyword search is BM25 over the same terms the database
backends index, computed over the items in the tenant (and prefix) being searched. Nothing
survives the process. Good for tests, notebooks and small single-process agents.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from synopsis.memory._checks import (
    MAX_LIMIT,
    PutRequest,
    SearchRequest,
    check_embeddings,
    check_outbox_address,
    check_page,
    check_session,
    check_summary,
    check_tenant,
    check_user_id,
    hit_order,
    page_namespaces,
    prepare_address,
    prepare_prefix,
    prepare_put,
    prepare_put_many,
    prepare_search,
    query_embedder,
    stored_item,
    summary_save_action,
    to_datetime,
)
from synopsis.memory._offload import off_loop
from synopsis.memory._types import (
    Embedder,
    MemoryItem,
    Namespace,
    NamespaceLike,
    NewMemory,
    OutboxEntry,
    SearchHit,
    SearchMode,
    SessionSummary,
)
from synopsis.memory.ranking import (
    bm25_scores,
    document_terms,
    pack_vector,
    rank_by_vector,
    reciprocal_rank_fusion,
    unpack_vector,
)

__all__ = ["AsyncInMemoryStore", "InMemoryStore"]

_Address = tuple[str, Namespace, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    item: MemoryItem
    updated: float
    expires: float | None
    counts: Mapping[str, int]
    length: int
    vector: tuple[float, ...] | None

    def live(self, now: float) -> bool:
        return self.expires is None or self.expires > now


@dataclass(slots=True, kw_only=True)
class _Outbox:
    summary: SessionSummary
    enqueued: float
    attempts: int = 0
    done: bool = False


class InMemoryStore:
    """A :class:`MemoryStore` and :class:`SummaryStore` kept in process memory.

    ``clock`` returns epoch seconds (default ``time.time``); ``embedder`` enables the
    ``vector`` and ``hybrid`` search modes.
    """

    def __init__(
        self, *, clock: Callable[[], float] | None = None, embedder: Embedder | None = None
    ) -> None:
        self._clock = clock or time.time
        self._embedder = embedder
        self._lock = threading.RLock()
        self._items: dict[_Address, _Record] = {}
        self._summaries: dict[tuple[str, str], list[SessionSummary]] = {}
        self._outbox: dict[tuple[str, str, int], _Outbox] = {}

    # --- memories ----------------------------------------------------------------------

    def put(
        self,
        tenant: str,
        namespace: NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str = "note",
        tags: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """Insert or replace an item; a replace keeps ``created_at``."""
        request = prepare_put(tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl)
        vector = self._embed([request.text])[0] if self._embedder else None
        with self._lock:
            return self._write(request, vector, self._clock())

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """Put a batch atomically (see :meth:`MemoryStore.put_many`); last duplicate wins."""
        requests = prepare_put_many(tenant, items)
        if not requests:
            return []
        vectors: list[tuple[float, ...] | None] = [None] * len(requests)
        if self._embedder:
            vectors = list(self._embed([request.text for request in requests]))
        with self._lock:
            now = self._clock()
            return [self._write(r, v, now) for r, v in zip(requests, vectors, strict=True)]

    def _write(
        self, request: PutRequest, vector: tuple[float, ...] | None, now: float
    ) -> MemoryItem:
        """Write one checked item at ``now`` (the caller holds the lock)."""
        terms = document_terms(request.text)
        address = (request.tenant, request.namespace, request.key)
        old = self._items.get(address)
        created = old.item.created_at.timestamp() if old and old.live(now) else now
        item = stored_item(request, created=created, now=now)
        self._items[address] = _Record(
            item=item,
            updated=now,
            expires=None if request.ttl is None else now + request.ttl,
            counts=Counter(terms),
            length=len(terms),
            vector=vector,
        )
        return item

    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """The live item at this address, or None."""
        address = prepare_address(tenant, namespace, key)
        with self._lock:
            record = self._items.get(address)
            return record.item if record and record.live(self._clock()) else None

    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """Remove an item; True when a live item was removed."""
        address = prepare_address(tenant, namespace, key)
        with self._lock:
            record = self._items.pop(address, None)
            return record is not None and record.live(self._clock())

    def search(
        self,
        tenant: str,
        namespace_prefix: NamespaceLike = (),
        *,
        query: str | None = None,
        kind: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = 10,
        offset: int = 0,
        mode: SearchMode = "keyword",
    ) -> list[SearchHit]:
        """Items under the prefix, ranked by the query (or newest first without one)."""
        request = prepare_search(
            tenant, namespace_prefix, query=query, kind=kind, tags=tags,
            limit=limit, offset=offset, mode=mode, embedder=self._embedder,
        )  # fmt: skip
        if request.query is not None and not request.terms:
            return []
        with self._lock:
            records = list(self._scope(request, self._clock()))
        if request.query is None:
            scored: list[tuple[_Record, float | None]] = [(r, None) for r in records]
        elif request.mode == "keyword":
            scored = list(self._keyword(request, records))
        else:
            scored = list(self._fused(request, records))
        scored.sort(key=lambda pair: _order(*pair))
        page = scored[request.offset : request.offset + request.limit]
        return [SearchHit(item=record.item, score=score) for record, score in page]

    def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """Distinct namespaces holding live items, cut to ``max_depth``, sorted, paged."""
        checked_limit, checked_offset = check_page(limit, offset)
        checked_tenant, checked_prefix = prepare_prefix(tenant, prefix)
        size = len(checked_prefix)
        with self._lock:
            now = self._clock()
            found = [
                ns
                for (owner, ns, _), record in self._items.items()
                if owner == checked_tenant and ns[:size] == checked_prefix and record.live(now)
            ]
        return page_namespaces(
            found, max_depth=max_depth, limit=checked_limit, offset=checked_offset
        )

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories (namespace ``("user", user_id, ...)``) and summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        prefix = ("user", checked_user)
        with self._lock:
            doomed = [
                address
                for address in self._items
                if address[0] == checked_tenant and address[1][:2] == prefix
            ]
            for address in doomed:
                del self._items[address]
            return len(doomed) + self.delete_user_summaries(checked_tenant, checked_user)

    def sweep_expired(self) -> int:
        """Delete every expired item (all tenants); return how many."""
        with self._lock:
            now = self._clock()
            doomed = [a for a, record in self._items.items() if not record.live(now)]
            for address in doomed:
                del self._items[address]
            return len(doomed)

    def close(self) -> None:
        """Nothing to release; present for parity with the database backends."""

    # --- summaries -----------------------------------------------------------------------

    def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """Store a new summary version and enqueue its outbox entry (idempotent per hash)."""
        check_summary(summary)
        with self._lock:
            versions = self._summaries.setdefault((summary.tenant, summary.session_id), [])
            existing = next((s for s in versions if s.version == summary.version), None)
            latest = versions[-1] if versions else None
            if summary_save_action(summary, existing=existing, latest=latest) == "noop":
                assert existing is not None
                return existing
            now = self._clock()
            created = summary.created_at.timestamp() if summary.created_at else now
            stored = replace(summary, created_at=to_datetime(created))
            versions.append(stored)
            self._outbox[(summary.tenant, summary.session_id, summary.version)] = _Outbox(
                summary=stored, enqueued=now
            )
            return stored

    def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """The newest version of a session's summary, or None."""
        with self._lock:
            versions = self._summaries.get(check_session(tenant, session_id), [])
            return versions[-1] if versions else None

    def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """Every version of a session's summary, oldest first."""
        with self._lock:
            return list(self._summaries.get(check_session(tenant, session_id), []))

    def pending_outbox(self, tenant: str | None = None, *, limit: int = 100) -> list[OutboxEntry]:
        """Entries not completed yet, fewest attempts then oldest first (optionally one tenant)."""
        owner = None if tenant is None else check_tenant(tenant)
        checked_limit, _ = check_page(limit, 0)
        with self._lock:
            pending = [
                (entry.attempts, entry.enqueued, address, entry.summary)
                for address, entry in self._outbox.items()
                if not entry.done and owner in (None, address[0])
            ]
        pending.sort(key=lambda row: row[:3])
        return [
            OutboxEntry(summary=summary, attempts=attempts)
            for attempts, _, _, summary in pending[:checked_limit]
        ]

    def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """Mark an outbox entry done; completing it again (or a missing one) is a no-op."""
        with self._lock:
            entry = self._outbox.get(check_outbox_address(tenant, session_id, version))
            if entry is not None:
                entry.done = True

    def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """Count a failed write of a pending entry; return its attempts (0: no such entry)."""
        with self._lock:
            entry = self._outbox.get(check_outbox_address(tenant, session_id, version))
            if entry is None or entry.done:
                return 0
            entry.attempts += 1
            return entry.attempts

    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """Delete every summary (and outbox entry) of the user; return how many summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        removed = 0
        with self._lock:
            for (owner, session), versions in list(self._summaries.items()):
                if owner != checked_tenant or versions[0].user_id != checked_user:
                    continue
                removed += len(versions)
                del self._summaries[(owner, session)]
                for summary in versions:
                    self._outbox.pop((owner, session, summary.version), None)
        return removed

    # --- helpers -------------------------------------------------------------------------

    def _embed(self, texts: list[str], *, queries: bool = False) -> list[tuple[float, ...]]:
        assert self._embedder is not None
        embed = query_embedder(self._embedder) if queries else self._embedder
        vectors = check_embeddings(embed(texts), len(texts))
        # Round through float32, as the database backends store vectors.
        return [unpack_vector(pack_vector(vector)) for vector in vectors]

    def _scope(self, request: SearchRequest, now: float) -> Iterable[_Record]:
        size = len(request.prefix)
        for (owner, namespace, _), record in self._items.items():
            item = record.item
            if (
                owner == request.tenant
                and namespace[:size] == request.prefix
                and record.live(now)
                and request.kind in (None, item.kind)
                and all(item.tags.get(k) == v for k, v in request.tags.items())
            ):
                yield record

    def _keyword(
        self, request: SearchRequest, records: list[_Record]
    ) -> Iterable[tuple[_Record, float]]:
        scores = bm25_scores(
            request.terms, [r.counts for r in records], [r.length for r in records]
        )
        return (
            (record, score)
            for record, score in zip(records, scores, strict=True)
            if any(term in record.counts for term in request.terms)
        )

    def _fused(
        self, request: SearchRequest, records: list[_Record]
    ) -> Iterable[tuple[_Record, float]]:
        assert request.query is not None
        query_vector = self._embed([request.query], queries=True)[0]
        with_vectors = [(_address(r), r.vector) for r in records if r.vector is not None]
        by_vector = rank_by_vector(query_vector, with_vectors)[:MAX_LIMIT]
        if request.mode == "vector":
            index = {_address(r): r for r in records}
            return ((index[address], score) for address, score in by_vector)
        keyword = sorted(self._keyword(request, records), key=lambda pair: _order(*pair))
        fused = reciprocal_rank_fusion(
            [[_address(r) for r, _ in keyword[:MAX_LIMIT]], [a for a, _ in by_vector]]
        )
        return ((r, fused[_address(r)]) for r in records if _address(r) in fused)


def _address(record: _Record) -> _Address:
    return (record.item.tenant, record.item.namespace, record.item.key)


def _order(record: _Record, score: float | None) -> tuple[float, float, str, Namespace]:
    return hit_order(score, record.updated, record.item.key, record.item.namespace)


class AsyncInMemoryStore:
    """The async twin of :class:`InMemoryStore` (same behaviour).

    Calls that embed text run the embedder on a worker thread, off the event loop.
    """

    def __init__(
        self, *, clock: Callable[[], float] | None = None, embedder: Embedder | None = None
    ) -> None:
        self._store = InMemoryStore(clock=clock, embedder=embedder)

    @property
    def _embeds(self) -> bool:
        return self._store._embedder is not None

    async def put(
        self,
        tenant: str,
        namespace: NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str = "note",
        tags: Mapping[str, str] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """See :meth:`InMemoryStore.put`."""
        return await off_loop(
            self._embeds, self._store.put, tenant, namespace, key, text, kind=kind, tags=tags,
            ttl=ttl,
        )  # fmt: skip

    async def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """See :meth:`InMemoryStore.put_many`."""
        return await off_loop(self._embeds, self._store.put_many, tenant, items)

    async def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None:
        """See :meth:`InMemoryStore.get`."""
        return self._store.get(tenant, namespace, key)

    async def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool:
        """See :meth:`InMemoryStore.delete`."""
        return self._store.delete(tenant, namespace, key)

    async def search(
        self,
        tenant: str,
        namespace_prefix: NamespaceLike = (),
        *,
        query: str | None = None,
        kind: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int = 10,
        offset: int = 0,
        mode: SearchMode = "keyword",
    ) -> list[SearchHit]:
        """See :meth:`InMemoryStore.search`."""
        return await off_loop(
            self._embeds and mode != "keyword", self._store.search, tenant, namespace_prefix,
            query=query, kind=kind, tags=tags, limit=limit, offset=offset, mode=mode,
        )  # fmt: skip

    async def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """See :meth:`InMemoryStore.list_namespaces`."""
        return self._store.list_namespaces(
            tenant, prefix=prefix, max_depth=max_depth, limit=limit, offset=offset
        )

    async def delete_user(self, tenant: str, user_id: str) -> int:
        """See :meth:`InMemoryStore.delete_user`."""
        return self._store.delete_user(tenant, user_id)

    async def sweep_expired(self) -> int:
        """See :meth:`InMemoryStore.sweep_expired`."""
        return self._store.sweep_expired()

    async def aclose(self) -> None:
        """Nothing to release."""

    async def save_summary(self, summary: SessionSummary) -> SessionSummary:
        """See :meth:`InMemoryStore.save_summary`."""
        return self._store.save_summary(summary)

    async def latest_summary(self, tenant: str, session_id: str) -> SessionSummary | None:
        """See :meth:`InMemoryStore.latest_summary`."""
        return self._store.latest_summary(tenant, session_id)

    async def summary_history(self, tenant: str, session_id: str) -> list[SessionSummary]:
        """See :meth:`InMemoryStore.summary_history`."""
        return self._store.summary_history(tenant, session_id)

    async def pending_outbox(
        self, tenant: str | None = None, *, limit: int = 100
    ) -> list[OutboxEntry]:
        """See :meth:`InMemoryStore.pending_outbox`."""
        return self._store.pending_outbox(tenant, limit=limit)

    async def complete_outbox(self, tenant: str, session_id: str, version: int) -> None:
        """See :meth:`InMemoryStore.complete_outbox`."""
        self._store.complete_outbox(tenant, session_id, version)

    async def fail_outbox(self, tenant: str, session_id: str, version: int) -> int:
        """See :meth:`InMemoryStore.fail_outbox`."""
        return self._store.fail_outbox(tenant, session_id, version)

    async def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """See :meth:`InMemoryStore.delete_user_summaries`."""
        return self._store.delete_user_summaries(tenant, user_id)
