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

from synopsis.memory import _operations as ops
from synopsis.memory import _types
from synopsis.memory._checks import (
    PutRequest,
    SearchRequest,
    hit_order,
    page_namespaces,
    stored_item,
    summary_save_action,
    to_datetime,
)
from synopsis.memory._guards import Claim, Guard
from synopsis.memory.ranking import bm25_scores, indexed_terms

__all__ = ["AsyncInMemoryStore", "InMemoryStore"]

_Address = tuple[str, _types.Namespace, str]
_User = tuple[str, str]
_Session = tuple[str, str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Record:
    item: _types.MemoryItem
    updated: float
    expires: float | None
    counts: Mapping[str, int]
    length: int
    vector: ops.Vector | None
    #: The identity of the embedder that made ``vector`` (None with no vector).
    embedder_id: str | None = None

    def live(self, now: float) -> bool:
        return self.expires is None or self.expires > now


@dataclass(frozen=True, slots=True)
class _Claim:
    owner: str
    covers_to: int
    expires: float


@dataclass(slots=True, kw_only=True)
class _Outbox:
    summary: _types.SessionSummary
    enqueued: float
    attempts: int = 0
    done: bool = False


class _Records:
    """The in-memory backend: plain dictionaries behind one lock (checked arguments only)."""

    def __init__(self, clock: Callable[[], float] | None) -> None:
        self._clock = clock or time.time
        self._lock = threading.RLock()
        self._items: dict[_Address, _Record] = {}
        self._summaries: dict[_Session, list[_types.SessionSummary]] = {}
        self._outbox: dict[tuple[str, str, str, int], _Outbox] = {}
        self._generations: dict[_User, int] = {}
        self._claims: dict[_Session, _Claim] = {}

    # --- memories ----------------------------------------------------------------------

    @ops.stepless
    def put(
        self, request: PutRequest, vector: ops.Vector | None, embedder_id: str | None
    ) -> _types.MemoryItem:
        with self._lock:
            return self._write(request, vector, embedder_id, self._clock())

    @ops.stepless
    def guarded_put(
        self, request: PutRequest, vector: ops.Vector | None, guard: Guard, embedder_id: str | None
    ) -> _types.MemoryItem:
        with self._lock:
            self._check(guard)
            return self._write(request, vector, embedder_id, self._clock())

    def _check(self, guard: Guard) -> None:
        """Raise UserDeleted unless ``guard`` holds (the caller holds the lock)."""
        refused = guard.refused(self._generations.get((guard.tenant, guard.user_id), 0))
        if refused is not None:
            raise refused

    @ops.stepless
    def put_many(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> list[_types.MemoryItem]:
        """Write the batch under one lock: other callers see all of it or none."""
        slots: list[ops.Vector | None] = [None] * len(requests) if vectors is None else [*vectors]
        with self._lock:
            now = self._clock()
            pairs = zip(requests, slots, strict=True)
            return [self._write(r, v, embedder_id, now) for r, v in pairs]

    def bulk_load(
        self, requests: list[PutRequest], vectors: list[ops.Vector] | None, embedder_id: str | None
    ) -> ops.Op[int]:
        """``put_many`` (no index or counters here to rebuild)."""
        return ops.counted(self.put_many(requests, vectors, embedder_id))

    def _write(
        self, request: PutRequest, vector: ops.Vector | None, embedder_id: str | None, now: float
    ) -> _types.MemoryItem:
        """Write one checked item at ``now`` (the caller holds the lock)."""
        terms = indexed_terms(request.text, request.context)
        address = (request.tenant, request.namespace, request.key)
        old = self._items.get(address)
        created = old.item.created_at.timestamp() if old and old.live(now) else now
        if request.created_at is not None:  # restored: stored as given
            created = request.created_at
        item = stored_item(request, created=created, now=now)
        self._items[address] = _Record(
            item=item,
            updated=request.updated(now),
            expires=request.expiry(now),
            counts=Counter(terms),
            length=len(terms),
            # Round through float32, as the database backends store vectors.
            vector=None if vector is None else ops.float32(vector),
            embedder_id=None if vector is None else embedder_id,
        )
        return item

    @ops.stepless
    def count_unembedded(self, tenant: str, embedder_id: str | None) -> int:
        return len(self._unembedded(tenant, embedder_id))

    @ops.stepless
    def unembedded(self, tenant: str, limit: int, embedder_id: str) -> list[ops.Unembedded]:
        pending = self._unembedded(tenant, embedder_id)[:limit]
        return [(r.item.namespace, r.item.key, r.item.text) for r in pending]

    def _unembedded(self, tenant: str, embedder_id: str | None) -> list[_Record]:
        """The tenant's live items without a vector of ``embedder_id`` (None: of any)."""
        with self._lock:
            now = self._clock()
            return [
                r
                for (owner, _, _), r in self._items.items()
                if owner == tenant
                and r.live(now)
                and (r.vector is None or embedder_id not in (None, r.embedder_id))
            ]

    @ops.stepless
    def set_vectors(
        self,
        tenant: str,
        rows: list[tuple[_types.Namespace, str, str, ops.Vector]],
        embedder_id: str,
    ) -> int:
        written = 0
        with self._lock:
            for namespace, key, text, vector in rows:
                record = self._items.get((tenant, namespace, key))
                if record is not None and record.item.text == text:
                    self._items[(tenant, namespace, key)] = replace(
                        record, vector=ops.float32(vector), embedder_id=embedder_id
                    )
                    written += 1
        return written

    @ops.stepless
    def forget_vectors(self, tenant: str) -> int:
        with self._lock:
            held = [a for a, r in self._items.items() if a[0] == tenant and r.vector is not None]
            for address in held:
                self._items[address] = replace(self._items[address], vector=None, embedder_id=None)
            return len(held)

    @ops.stepless
    def adopt_vectors(self, tenant: str, embedder_id: str) -> int:
        with self._lock:
            unknown = [
                a
                for a, r in self._items.items()
                if a[0] == tenant and r.vector is not None and r.embedder_id is None
            ]
            for address in unknown:
                self._items[address] = replace(self._items[address], embedder_id=embedder_id)
            return len(unknown)

    @ops.stepless
    def get(self, tenant: str, namespace: _types.Namespace, key: str) -> _types.MemoryItem | None:
        with self._lock:
            record = self._items.get((tenant, namespace, key))
            return record.item if record and record.live(self._clock()) else None

    @ops.stepless
    def delete(self, tenant: str, namespace: _types.Namespace, key: str) -> bool:
        with self._lock:
            record = self._items.pop((tenant, namespace, key), None)
            return record is not None and record.live(self._clock())

    @ops.stepless
    def search(
        self, request: SearchRequest, query_vector: ops.Vector | None, embedder_id: str | None
    ) -> list[_types.SearchHit]:
        with self._lock:
            records = list(self._scope(request, self._clock()))
        if request.query is None:
            scored: list[tuple[_Record, float | None]] = [(r, None) for r in records]
        elif request.mode == "keyword":
            scored = list(_keyword(request, records))
        else:
            assert query_vector is not None
            vector = ops.float32(query_vector)
            scored = list(_fused(request, records, vector, embedder_id))
        scored.sort(key=lambda pair: _order(*pair))
        page = scored[request.offset : request.offset + request.limit]
        return [_types.SearchHit(item=record.item, score=score) for record, score in page]

    def _scope(self, request: SearchRequest, now: float) -> Iterable[_Record]:
        size = len(request.prefix)
        for (owner, namespace, _), record in self._items.items():
            item = record.item
            if (
                owner == request.tenant
                and namespace[:size] == request.prefix
                and record.live(now)
                and (request.kinds is None or item.kind in request.kinds)
                and item.kind not in request.exclude_kinds
                and all(item.tags.get(k) == v for k, v in request.tags.items())
            ):
                yield record

    @ops.stepless
    def list_namespaces(
        self, tenant: str, prefix: _types.Namespace, max_depth: int | None, limit: int, offset: int
    ) -> list[_types.Namespace]:
        size = len(prefix)
        with self._lock:
            now = self._clock()
            found = [
                ns
                for (owner, ns, _), record in self._items.items()
                if owner == tenant and ns[:size] == prefix and record.live(now)
            ]
        return page_namespaces(found, max_depth=max_depth, limit=limit, offset=offset)

    @ops.stepless
    def delete_user(self, tenant: str, user_id: str) -> int:
        prefix = ("user", user_id)
        with self._lock:
            doomed = [a for a in self._items if a[0] == tenant and a[1][:2] == prefix]
            for address in doomed:
                del self._items[address]
            return len(doomed) + self._delete_summaries(tenant, user_id)

    @ops.stepless
    def deletion_generation(self, tenant: str, user_id: str) -> int:
        with self._lock:
            return self._generations.get((tenant, user_id), 0)

    @ops.stepless
    def sweep_expired(self) -> int:
        with self._lock:
            now = self._clock()
            doomed = [a for a, record in self._items.items() if not record.live(now)]
            for address in doomed:
                del self._items[address]
            return len(doomed)

    # --- summaries -----------------------------------------------------------------------

    @ops.stepless
    def save_summary(
        self, summary: _types.SessionSummary, guard: Guard | None
    ) -> _types.SessionSummary:
        session = (summary.tenant, summary.user_id, summary.session_id)
        with self._lock:
            if guard is not None:
                self._check(guard)
            versions = self._summaries.setdefault(session, [])
            existing = next((s for s in versions if s.version == summary.version), None)
            latest = versions[-1] if versions else None
            if summary_save_action(summary, existing=existing, latest=latest) == "noop":
                assert existing is not None
                return existing
            now = self._clock()
            created = summary.created_at.timestamp() if summary.created_at else now
            stored = replace(summary, created_at=to_datetime(created))
            versions.append(stored)
            self._outbox[(*session, summary.version)] = _Outbox(summary=stored, enqueued=now)
            return stored

    @ops.stepless
    def latest_summary(
        self, tenant: str, user_id: str, session_id: str
    ) -> _types.SessionSummary | None:
        with self._lock:
            versions = self._summaries.get((tenant, user_id, session_id), [])
            return versions[-1] if versions else None

    @ops.stepless
    def summary_history(
        self, tenant: str, user_id: str, session_id: str
    ) -> list[_types.SessionSummary]:
        with self._lock:
            return list(self._summaries.get((tenant, user_id, session_id), []))

    @ops.stepless
    def pending_outbox(self, tenant: str | None, limit: int) -> list[_types.OutboxEntry]:
        with self._lock:
            pending = [
                (entry.attempts, entry.enqueued, address, entry.summary)
                for address, entry in self._outbox.items()
                if not entry.done and tenant in (None, address[0])
            ]
            generations = dict(self._generations)
        pending.sort(key=lambda row: row[:3])
        return [
            _types.OutboxEntry(
                summary=summary,
                attempts=attempts,
                generation=generations.get((summary.tenant, summary.user_id), 0),
            )
            for attempts, _, _, summary in pending[:limit]
        ]

    @ops.stepless
    def complete_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> None:
        with self._lock:
            entry = self._outbox.get((tenant, user_id, session_id, version))
            if entry is not None:
                entry.done = True

    @ops.stepless
    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> int:
        with self._lock:
            entry = self._outbox.get((tenant, user_id, session_id, version))
            if entry is None or entry.done:
                return 0
            entry.attempts += 1
            return entry.attempts

    @ops.stepless
    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        return self._delete_summaries(tenant, user_id)

    def _delete_summaries(self, tenant: str, user_id: str) -> int:
        """Delete the user's summaries, outbox entries and claims; move the generation."""
        with self._lock:
            user = (tenant, user_id)
            self._generations[user] = self._generations.get(user, 0) + 1
            for session in [s for s in self._claims if s[:2] == user]:
                del self._claims[session]
            doomed = [s for s in self._summaries if s[:2] == user]
            removed = 0
            for session in doomed:
                versions = self._summaries.pop(session)
                removed += len(versions)
                for summary in versions:
                    self._outbox.pop((*session, summary.version), None)
            return removed

    @ops.stepless
    def claim_summary_job(self, claim: Claim) -> bool:
        session = (claim.tenant, claim.user_id, claim.session_id)
        with self._lock:
            now = self._clock()
            held = self._claims.get(session)
            if held is not None and held.owner != claim.owner and held.expires > now:
                return False
            self._claims[session] = _Claim(claim.owner, claim.covers_to, now + claim.lease_seconds)
            return True

    @ops.stepless
    def release_summary_job(self, tenant: str, user_id: str, session_id: str, owner: str) -> bool:
        with self._lock:
            held = self._claims.get((tenant, user_id, session_id))
            if held is None or held.owner != owner:
                return False
            del self._claims[(tenant, user_id, session_id)]
            return True


def _keyword(request: SearchRequest, records: list[_Record]) -> Iterable[tuple[_Record, float]]:
    scores = bm25_scores(request.terms, [r.counts for r in records], [r.length for r in records])
    return (
        (record, score)
        for record, score in zip(records, scores, strict=True)
        if any(term in record.counts for term in request.terms)
    )


def _fused(
    request: SearchRequest,
    records: list[_Record],
    query_vector: ops.Vector,
    embedder_id: str | None,
) -> Iterable[tuple[_Record, float]]:
    """Vector or hybrid scores; only vectors of ``embedder_id`` take part."""
    index = {_address(r): r for r in records}
    keyword = None
    if request.mode == "hybrid":
        ranked = sorted(_keyword(request, records), key=lambda pair: _order(*pair))
        keyword = [(_address(r), score) for r, score in ranked]
    with_vectors = [
        (_address(r), r.vector)
        for r in records
        if r.vector is not None and r.embedder_id == embedder_id
    ]
    scores = ops.vector_scores(query_vector, with_vectors, keyword)
    return ((index[address], score) for address, score in scores.items())


def _address(record: _Record) -> _Address:
    return (record.item.tenant, record.item.namespace, record.item.key)


def _order(record: _Record, score: float | None) -> tuple[float, float, str, _types.Namespace]:
    return hit_order(score, record.updated, record.item.key, record.item.namespace)


class _InMemoryStores(ops.StoreOperations):
    """What both in-memory stores share: the constructor."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] | None = None,
        embedder: _types.Embedder | None = None,
        embedder_id: str | None = None,
    ) -> None:
        super().__init__(_Records(clock), embedder, embedder_id)


class InMemoryStore(ops.SyncDriver, _InMemoryStores):
    """A :class:`MemoryStore` and :class:`SummaryStore` kept in process memory.

    ``clock`` returns epoch seconds (default ``time.time``); ``embedder`` enables the
    ``vector`` and ``hybrid`` search modes; ``embedder_id`` overrides the identity its
    vectors are stored with (see :attr:`embedder_id`). ``close`` releases nothing; it is there for
    parity with the database backends.
    """


class AsyncInMemoryStore(ops.AsyncDriver, _InMemoryStores):
    """The async twin of :class:`InMemoryStore` (same behaviour).

    Calls that embed text run the embedder on a worker thread, off the event loop.
    """
