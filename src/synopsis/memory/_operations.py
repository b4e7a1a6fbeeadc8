"""The store operations, written once for every backend, sync and async.

:class:`StoreOperations` is the one table of public store methods (the contracts are the
protocols in :mod:`synopsis.memory._types`). Each method is a *flow*: it checks its arguments,
asks for embeddings with an :class:`Embed` step, then hands the checked values to its
backend, whose answer is a flow too (a PostgreSQL plan yields SQL statements; the in-process
backends have no steps). The :func:`operation` decorator binds a flow to the store it is read
from: on a :class:`SyncDriver` store it runs with :func:`synopsis._flow.drive`, on an
:class:`AsyncDriver` store it is a coroutine function running it with ``adrive``. A store
pair is therefore one backend and two drivers; the drivers only say how a step is carried out
(an embedding model runs on a worker thread under asyncio, off the event loop).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, overload

from synopsis._flow import Flow, adrive, drive
from synopsis.memory._recall import (
    PutRequest,
    SearchRequest,
    check_embeddings,
    check_outbox_address,
    check_page,
    check_session,
    check_summary,
    check_tenant,
    check_user_id,
    pack_vector,
    prepare_address,
    prepare_prefix,
    prepare_put,
    prepare_put_many,
    prepare_search,
    query_embedder,
    unpack_vector,
)
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

__all__ = [
    "AsyncDriver",
    "Backend",
    "Embed",
    "StoreOperations",
    "SyncDriver",
    "Vector",
    "embed",
    "float32",
    "operation",
    "stepless",
]

P = ParamSpec("P")
T = TypeVar("T")
Vector = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Embed:
    """Step: embed ``texts`` with the store's embedder (``queries``: as search queries)."""

    texts: tuple[str, ...]
    queries: bool = False


def embed(embedder: Embedder | None, step: Embed) -> list[Vector]:
    """Carry out an :class:`Embed` step: one checked vector per text."""
    assert embedder is not None, "an Embed step needs a store built with an embedder"
    model = query_embedder(embedder) if step.queries else embedder
    return check_embeddings(model(list(step.texts)), len(step.texts))


def float32(vector: Sequence[float]) -> Vector:
    """``vector`` rounded through float32, the precision every backend stores."""
    return unpack_vector(pack_vector(vector))


def stepless(method: Callable[P, T]) -> Callable[P, Flow[Any, T]]:
    """``method`` as a flow without steps, for backends that do their work in process."""

    @functools.wraps(method)
    def flow(*args: P.args, **kwargs: P.kwargs) -> Flow[Any, T]:
        yield from ()  # no steps; the bare generator lets every backend answer with a flow
        return method(*args, **kwargs)

    return flow


class Backend(Protocol):
    """What a backend does with checked arguments; each call answers with a flow."""

    def put(self, request: PutRequest, vector: Vector | None) -> Flow[Any, MemoryItem]: ...

    def put_many(
        self, requests: list[PutRequest], vectors: list[Vector] | None
    ) -> Flow[Any, list[MemoryItem]]: ...

    def get(self, tenant: str, namespace: Namespace, key: str) -> Flow[Any, MemoryItem | None]: ...

    def delete(self, tenant: str, namespace: Namespace, key: str) -> Flow[Any, bool]: ...

    def search(
        self, request: SearchRequest, query_vector: Vector | None
    ) -> Flow[Any, list[SearchHit]]: ...

    def list_namespaces(
        self, tenant: str, prefix: Namespace, max_depth: int | None, limit: int, offset: int
    ) -> Flow[Any, list[Namespace]]: ...

    def delete_user(self, tenant: str, user_id: str) -> Flow[Any, int]: ...

    def sweep_expired(self) -> Flow[Any, int]: ...

    def save_summary(self, summary: SessionSummary) -> Flow[Any, SessionSummary]: ...

    def latest_summary(self, tenant: str, session_id: str) -> Flow[Any, SessionSummary | None]: ...

    def summary_history(self, tenant: str, session_id: str) -> Flow[Any, list[SessionSummary]]: ...

    def pending_outbox(self, tenant: str | None, limit: int) -> Flow[Any, list[OutboxEntry]]: ...

    def complete_outbox(self, tenant: str, session_id: str, version: int) -> Flow[Any, None]: ...

    def fail_outbox(self, tenant: str, session_id: str, version: int) -> Flow[Any, int]: ...

    def delete_user_summaries(self, tenant: str, user_id: str) -> Flow[Any, int]: ...


class operation(Generic[P, T]):
    """A store method written once as a flow, run by the driver of the store it is read from."""

    def __init__(self, build: Callable[Concatenate[Any, P], Flow[Any, T]]) -> None:
        name = build.__name__

        @functools.wraps(build)
        def run(store: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result: T = store._run(build(store, *args, **kwargs), name)
            return result

        @functools.wraps(build)
        async def arun(store: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result: T = await store._run(build(store, *args, **kwargs), name)
            return result

        self._run, self._arun = run, arun

    @overload
    def __get__(self, store: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, store: SyncDriver, owner: type[Any]) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, store: AsyncDriver, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, store: object, owner: type[Any]) -> Any:
        if store is None:
            return self
        return MethodType(self._arun if isinstance(store, AsyncDriver) else self._run, store)


class SyncDriver:
    """Runs a store's flows in the calling thread."""

    _embedder: Embedder | None

    def _run(self, flow: Flow[Any, T], operation: str) -> T:
        return drive(flow, self._perform)

    def _perform(self, step: Any) -> Any:
        if isinstance(step, Embed):
            return embed(self._embedder, step)
        raise TypeError(f"this store cannot carry out {step!r}")  # pragma: no cover


class AsyncDriver:
    """Runs a store's flows on the event loop; the embedding model runs on a worker thread."""

    _embedder: Embedder | None

    async def _run(self, flow: Flow[Any, T], operation: str) -> T:
        return await adrive(flow, self._perform)

    async def _perform(self, step: Any) -> Any:
        if isinstance(step, Embed):
            return await asyncio.to_thread(embed, self._embedder, step)
        raise TypeError(f"this store cannot carry out {step!r}")  # pragma: no cover


class StoreOperations:
    """The public methods of every store (the contracts: ``MemoryStore``, ``SummaryStore``)."""

    def __init__(self, backend: Backend, embedder: Embedder | None) -> None:
        self._backend = backend
        self._embedder = embedder

    def _embed(self, texts: Sequence[str]) -> Flow[Any, list[Vector] | None]:
        """Vectors of ``texts`` when the store has an embedder, else None."""
        if self._embedder is None:
            return None
        vectors: list[Vector] = yield Embed(tuple(texts))
        return vectors

    # --- memories --------------------------------------------------------------------------

    @operation
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
    ) -> Flow[Any, MemoryItem]:
        """Insert or replace an item; a replace keeps ``created_at``."""
        request = prepare_put(tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl)
        vectors = yield from self._embed([request.text])
        return (yield from self._backend.put(request, vectors[0] if vectors else None))

    @operation
    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> Flow[Any, list[MemoryItem]]:
        """Put a batch in one transaction (see :meth:`MemoryStore.put_many`)."""
        requests = prepare_put_many(tenant, items)
        if not requests:
            return []
        vectors = yield from self._embed([request.text for request in requests])
        return (yield from self._backend.put_many(requests, vectors))

    @operation
    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> Flow[Any, MemoryItem | None]:
        """The live item at this address, or None."""
        return (yield from self._backend.get(*prepare_address(tenant, namespace, key)))

    @operation
    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> Flow[Any, bool]:
        """Remove an item; True when a live item was removed."""
        return (yield from self._backend.delete(*prepare_address(tenant, namespace, key)))

    @operation
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
    ) -> Flow[Any, list[SearchHit]]:
        """Items under the prefix, ranked by the query (or newest first without one)."""
        request = prepare_search(
            tenant, namespace_prefix, query=query, kind=kind, tags=tags,
            limit=limit, offset=offset, mode=mode, embedder=self._embedder,
        )  # fmt: skip
        if request.query is None:
            return (yield from self._backend.search(request, None))
        if not request.terms:
            return []
        vector: Vector | None = None
        if request.mode != "keyword":
            vector = (yield Embed((request.query,), queries=True))[0]
        return (yield from self._backend.search(request, vector))

    @operation
    def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Flow[Any, list[Namespace]]:
        """Distinct namespaces holding live items, cut to ``max_depth``, sorted, paged."""
        checked_limit, checked_offset = check_page(limit, offset)
        checked_tenant, checked_prefix = prepare_prefix(tenant, prefix)
        return (
            yield from self._backend.list_namespaces(
                checked_tenant, checked_prefix, max_depth, checked_limit, checked_offset
            )
        )

    @operation
    def delete_user(self, tenant: str, user_id: str) -> Flow[Any, int]:
        """Delete the user's memories (namespace ``("user", user_id, ...)``) and summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        return (yield from self._backend.delete_user(checked_tenant, checked_user))

    @operation
    def sweep_expired(self) -> Flow[Any, int]:
        """Delete every expired item (all tenants); return how many."""
        return (yield from self._backend.sweep_expired())

    # --- summaries -------------------------------------------------------------------------

    @operation
    def save_summary(self, summary: SessionSummary) -> Flow[Any, SessionSummary]:
        """Store a new summary version and enqueue its outbox entry, in one transaction."""
        return (yield from self._backend.save_summary(check_summary(summary)))

    @operation
    def latest_summary(self, tenant: str, session_id: str) -> Flow[Any, SessionSummary | None]:
        """The newest version of a session's summary, or None."""
        return (yield from self._backend.latest_summary(*check_session(tenant, session_id)))

    @operation
    def summary_history(self, tenant: str, session_id: str) -> Flow[Any, list[SessionSummary]]:
        """Every version of a session's summary, oldest first."""
        return (yield from self._backend.summary_history(*check_session(tenant, session_id)))

    @operation
    def pending_outbox(
        self, tenant: str | None = None, *, limit: int = 100
    ) -> Flow[Any, list[OutboxEntry]]:
        """Entries not completed yet, fewest attempts then oldest first (optionally one tenant)."""
        owner = None if tenant is None else check_tenant(tenant)
        checked_limit, _ = check_page(limit, 0)
        return (yield from self._backend.pending_outbox(owner, checked_limit))

    @operation
    def complete_outbox(self, tenant: str, session_id: str, version: int) -> Flow[Any, None]:
        """Mark an outbox entry done; completing it again (or a missing one) is a no-op."""
        address = check_outbox_address(tenant, session_id, version)
        return (yield from self._backend.complete_outbox(*address))

    @operation
    def fail_outbox(self, tenant: str, session_id: str, version: int) -> Flow[Any, int]:
        """Count a failed write of a pending entry; return its attempts (0: no such entry)."""
        address = check_outbox_address(tenant, session_id, version)
        return (yield from self._backend.fail_outbox(*address))

    @operation
    def delete_user_summaries(self, tenant: str, user_id: str) -> Flow[Any, int]:
        """Delete every summary (and outbox entry) of the user; return how many summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        return (yield from self._backend.delete_user_summaries(checked_tenant, checked_user))
