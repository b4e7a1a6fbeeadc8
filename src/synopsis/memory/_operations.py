"""The store operations, written once for every backend, sync and async.

:class:`StoreOperations` is the one table of public store methods (the contracts are the
protocols in :mod:`synopsis.memory._types`). Each method is a *flow*: it checks its arguments,
asks for embeddings with an :class:`Embed` step, then hands the checked values to its
backend (:class:`~synopsis.memory._backend.Backend`), whose answer is a flow too (a
PostgreSQL plan yields SQL statements; the in-process backends have no steps). The
:func:`operation` decorator binds a flow to the store it is read from: on a
:class:`SyncDriver` store it runs with :func:`synopsis._flow.drive`, on an
:class:`AsyncDriver` store it is a coroutine function running it with ``adrive``. A store
pair is therefore one backend and two drivers; the drivers only say how a step is carried
out (an embedding model runs on a worker thread under asyncio, off the event loop).

A driver is handed a :data:`Start`, which builds the operation's flow, rather than the flow
itself: a driver that must run an operation again (PostgreSQL, after a deadlock) starts a
fresh flow, in a fresh transaction.

Every vector a backend stores is stamped with the store's embedder identity
(:mod:`synopsis.memory._identity`), and every backend reads only vectors with that stamp: a
vector of another model counts as missing, for search and for ``reembed`` alike.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from synopsis._flow import adrive, drive
from synopsis.errors import ConfigError
from synopsis.memory import _types
from synopsis.memory._backend import (
    Backend,
    Embed,
    Op,
    Start,
    Unembedded,
    Vector,
    counted,
    embed,
    float32,
    stepless,
    vector_scores,
)
from synopsis.memory._checks import (
    check_outbox_address,
    check_owner,
    check_page,
    check_session,
    check_summary,
    check_tenant,
    check_user_id,
    prepare_address,
    prepare_prefix,
    prepare_put,
    prepare_put_many,
    prepare_search,
)
from synopsis.memory._guards import Guard, check_claim, check_generation, guard_put
from synopsis.memory._identity import embedder_identity

__all__ = [
    "AsyncDriver",
    "Backend",
    "Embed",
    "Op",
    "Start",
    "StoreOperations",
    "SyncDriver",
    "Unembedded",
    "Vector",
    "counted",
    "embed",
    "float32",
    "operation",
    "stepless",
    "vector_scores",
]

P = ParamSpec("P")
T = TypeVar("T")


class operation(Generic[P, T]):
    """A store method written once as a flow, run by the driver of the store it is read from."""

    def __init__(self, build: Callable[Concatenate[Any, P], Op[T]]) -> None:
        name = build.__name__

        @functools.wraps(build)
        def run(store: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result: T = store._run(functools.partial(build, store, *args, **kwargs), name)
            return result

        @functools.wraps(build)
        async def arun(store: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
            result: T = await store._run(functools.partial(build, store, *args, **kwargs), name)
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
    """Runs a store's flows in the calling thread; the store is a context manager."""

    _embedder: _types.Embedder | None

    def _run(self, start: Start[T], name: str) -> T:
        """Carry out the flow ``start`` builds, of the operation ``name`` (for error messages)."""
        return drive(start(), self._perform)

    def _perform(self, step: Any) -> Any:
        if isinstance(step, Embed):
            return embed(self._embedder, step)
        raise TypeError(f"this store cannot carry out {step!r}")  # pragma: no cover

    def close(self) -> None:
        """Release what the store holds; nothing, unless the backend says otherwise."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncDriver:
    """Runs a store's flows on the event loop; the embedding model runs on a worker thread."""

    _embedder: _types.Embedder | None

    async def _run(self, start: Start[T], name: str) -> T:
        """Carry out the flow ``start`` builds, of the operation ``name`` (for error messages)."""
        return await adrive(start(), self._perform)

    async def _perform(self, step: Any) -> Any:
        if isinstance(step, Embed):
            return await asyncio.to_thread(embed, self._embedder, step)
        raise TypeError(f"this store cannot carry out {step!r}")  # pragma: no cover

    async def aclose(self) -> None:
        """Release what the store holds; nothing, unless the backend says otherwise."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class StoreOperations:
    """The public methods of every store (the contracts: ``MemoryStore``, ``SummaryStore``)."""

    def __init__(
        self, backend: Backend, embedder: _types.Embedder | None, embedder_id: str | None = None
    ) -> None:
        self._backend = backend
        self._embedder = embedder
        self._embedder_id = embedder_identity(embedder, embedder_id)

    @property
    def embedder_id(self) -> str | None:
        """The identity stored with this store's vectors (None without an embedder).

        See :mod:`synopsis.memory._identity`: the ``embedder_id`` the store was given, else
        the embedder's own, else ``callable:<module>.<name>``.
        """
        return self._embedder_id

    def _embed(self, texts: Sequence[str]) -> Op[list[Vector] | None]:
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
        namespace: _types.NamespaceLike,
        key: str,
        text: str,
        *,
        kind: str = "note",
        tags: Mapping[str, str] | None = None,
        ttl: float | None = None,
        generation: int | None = None,
        context: str = "",
    ) -> Op[_types.MemoryItem]:
        """Insert or replace an item; a replace keeps ``created_at``.

        With ``generation``: only while the namespace's user still has that deletion
        generation (see :meth:`MemoryStore.put`).
        """
        request = prepare_put(
            tenant, namespace, key, text, kind=kind, tags=tags, ttl=ttl, context=context
        )
        guard = None if generation is None else guard_put(request, generation)
        vectors = yield from self._embed([request.text])
        vector = vectors[0] if vectors else None
        if guard is None:
            return (yield from self._backend.put(request, vector, self._embedder_id))
        return (yield from self._backend.guarded_put(request, vector, guard, self._embedder_id))

    @operation
    def put_many(
        self, tenant: str, items: Iterable[_types.NewMemory]
    ) -> Op[list[_types.MemoryItem]]:
        """Put a batch in one transaction (see :meth:`MemoryStore.put_many`)."""
        requests = prepare_put_many(tenant, items)
        if not requests:
            return []
        vectors = yield from self._embed([request.text for request in requests])
        return (yield from self._backend.put_many(requests, vectors, self._embedder_id))

    @operation
    def bulk_load(self, tenant: str, items: Iterable[_types.NewMemory]) -> Op[int]:
        """``put_many`` for a large load: the same items stored, checked and replaced the same
        way, in one transaction (all or none), and how many distinct addresses were written.

        What the stores derive from the items (the full-text index, the tenant-wide search
        statistics) is rebuilt once for the whole load instead of row by row, inside the same
        transaction, so a failed load leaves nothing half-counted and a finished one leaves
        exactly the statistics (and search scores) ``put_many`` would. No items are returned.
        """
        requests = prepare_put_many(tenant, items)
        if not requests:
            return 0
        vectors = yield from self._embed([request.text for request in requests])
        return (yield from self._backend.bulk_load(requests, vectors, self._embedder_id))

    @operation
    def get(
        self, tenant: str, namespace: _types.NamespaceLike, key: str
    ) -> Op[_types.MemoryItem | None]:
        """The live item at this address, or None."""
        return (yield from self._backend.get(*prepare_address(tenant, namespace, key)))

    @operation
    def delete(self, tenant: str, namespace: _types.NamespaceLike, key: str) -> Op[bool]:
        """Remove an item; True when a live item was removed."""
        return (yield from self._backend.delete(*prepare_address(tenant, namespace, key)))

    @operation
    def search(
        self,
        tenant: str,
        namespace_prefix: _types.NamespaceLike = (),
        *,
        query: str | None = None,
        kind: str | Collection[str] | None = None,
        exclude_kinds: str | Collection[str] = (),
        tags: Mapping[str, str] | None = None,
        limit: int = 10,
        offset: int = 0,
        mode: _types.SearchMode = "keyword",
    ) -> Op[list[_types.SearchHit]]:
        """Items under the prefix, ranked by the query (or newest first without one)."""
        request = prepare_search(
            tenant,
            namespace_prefix,
            query=query,
            kind=kind,
            exclude_kinds=exclude_kinds,
            tags=tags,
            limit=limit,
            offset=offset,
            mode=mode,
            embedder=self._embedder,
        )
        if request.query is None:
            return (yield from self._backend.search(request, None, self._embedder_id))
        if not request.terms:
            return []
        vector: Vector | None = None
        if request.mode != "keyword":
            vector = (yield Embed((request.query,), queries=True))[0]
        return (yield from self._backend.search(request, vector, self._embedder_id))

    @operation
    def list_namespaces(
        self,
        tenant: str,
        *,
        prefix: _types.NamespaceLike = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> Op[list[_types.Namespace]]:
        """Distinct namespaces holding live items, cut to ``max_depth``, sorted, paged."""
        checked_limit, checked_offset = check_page(limit, offset)
        checked_tenant, checked_prefix = prepare_prefix(tenant, prefix)
        return (
            yield from self._backend.list_namespaces(
                checked_tenant, checked_prefix, max_depth, checked_limit, checked_offset
            )
        )

    @operation
    def delete_user(self, tenant: str, user_id: str) -> Op[int]:
        """Delete the user's memories (namespace ``("user", user_id, ...)``) and summaries."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        return (yield from self._backend.delete_user(checked_tenant, checked_user))

    @operation
    def deletion_generation(self, tenant: str, user_id: str) -> Op[int]:
        """How many times the user was deleted (0 for a user never deleted)."""
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        return (yield from self._backend.deletion_generation(checked_tenant, checked_user))

    @operation
    def sweep_expired(self) -> Op[int]:
        """Delete every expired item (all tenants); return how many."""
        return (yield from self._backend.sweep_expired())

    @operation
    def count_unembedded(self, tenant: str) -> Op[int]:
        """How many live items of the tenant have no vector of this store's embedder.

        A vector made by another model (or by an unknown one) counts as missing; a store
        without an embedder counts the items that have no vector at all.
        """
        checked = check_tenant(tenant)
        return (yield from self._backend.count_unembedded(checked, self._embedder_id))

    @operation
    def reembed(self, tenant: str, *, batch: int = 100) -> Op[int]:
        """Embed up to ``batch`` live items of the tenant without a vector of this store's
        embedder (none, or another model's), oldest first.

        Returns how many got a vector; 0 once none is left. Each call is one batch, so a
        loop of calls resumes where an interrupted one stopped. An item whose text changed
        while it was being embedded is left for the next call.
        """
        checked_tenant, (limit, _) = check_tenant(tenant), check_page(batch, 0)
        if self._embedder is None or self._embedder_id is None:
            raise ConfigError("reembed needs a store built with an embedder")
        model = self._embedder_id
        pending = yield from self._backend.unembedded(checked_tenant, limit, model)
        if not pending:
            return 0
        vectors: list[Vector] = yield Embed(tuple(text for _, _, text in pending))
        rows = [(*item, vector) for item, vector in zip(pending, vectors, strict=True)]
        return (yield from self._backend.set_vectors(checked_tenant, rows, model))

    @operation
    def forget_vectors(self, tenant: str) -> Op[int]:
        """Drop the vectors of all the tenant's items, whatever model made them; how many.

        The items stay, found by keyword; they count as unembedded until ``reembed`` gives
        them vectors again (``synopsis memory reembed --all`` does both).
        """
        return (yield from self._backend.forget_vectors(check_tenant(tenant)))

    @operation
    def adopt_vectors(self, tenant: str) -> Op[int]:
        """Record this store's embedder as the model of the tenant's vectors of unknown model.

        Those are the vectors stored before synopsis recorded models; they count as missing
        until reembedded. When you know this store's embedder made them, adopting them is
        instant where re-embedding may take hours. Returns how many were adopted.
        """
        checked = check_tenant(tenant)
        if self._embedder_id is None:
            raise ConfigError("adopt_vectors needs a store built with an embedder")
        return (yield from self._backend.adopt_vectors(checked, self._embedder_id))

    # --- summaries -------------------------------------------------------------------------

    @operation
    def save_summary(
        self, summary: _types.SessionSummary, *, generation: int | None = None
    ) -> Op[_types.SessionSummary]:
        """Store a new summary version and enqueue its outbox entry, in one transaction.

        With ``generation``: only while the user still has that deletion generation.
        """
        checked = check_summary(summary)
        guard = None
        if generation is not None:
            guard = Guard(checked.tenant, checked.user_id, check_generation(generation))
        return (yield from self._backend.save_summary(checked, guard))

    @operation
    def latest_summary(
        self, tenant: str, user_id: str, session_id: str
    ) -> Op[_types.SessionSummary | None]:
        """The newest version of the user's session summary, or None."""
        address = check_session(tenant, user_id, session_id)
        return (yield from self._backend.latest_summary(*address))

    @operation
    def summary_history(
        self, tenant: str, user_id: str, session_id: str
    ) -> Op[list[_types.SessionSummary]]:
        """Every version of the user's session summary, oldest first."""
        address = check_session(tenant, user_id, session_id)
        return (yield from self._backend.summary_history(*address))

    @operation
    def pending_outbox(
        self, tenant: str | None = None, *, limit: int = 100
    ) -> Op[list[_types.OutboxEntry]]:
        """Entries not completed yet, fewest attempts then oldest first (optionally one tenant)."""
        owner = None if tenant is None else check_tenant(tenant)
        checked_limit, _ = check_page(limit, 0)
        return (yield from self._backend.pending_outbox(owner, checked_limit))

    @operation
    def complete_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> Op[None]:
        """Mark an outbox entry done; completing it again (or a missing one) is a no-op."""
        address = check_outbox_address(tenant, user_id, session_id, version)
        return (yield from self._backend.complete_outbox(*address))

    @operation
    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> Op[int]:
        """Count a failed write of a pending entry; return its attempts (0: no such entry)."""
        address = check_outbox_address(tenant, user_id, session_id, version)
        return (yield from self._backend.fail_outbox(*address))

    @operation
    def delete_user_summaries(self, tenant: str, user_id: str) -> Op[int]:
        """Delete every summary, outbox entry and claim of the user; return how many summaries.

        Moves the user's deletion generation, as ``delete_user`` does.
        """
        checked_tenant, checked_user = check_tenant(tenant), check_user_id(user_id)
        return (yield from self._backend.delete_user_summaries(checked_tenant, checked_user))

    @operation
    def claim_summary_job(
        self,
        tenant: str,
        user_id: str,
        session_id: str,
        *,
        covers_to: int,
        owner: str,
        lease_seconds: float,
    ) -> Op[bool]:
        """Claim the session's summary job for ``owner``; False while another owner holds it."""
        claim = check_claim(
            tenant,
            user_id,
            session_id,
            covers_to=covers_to,
            owner=owner,
            lease_seconds=lease_seconds,
        )
        return (yield from self._backend.claim_summary_job(claim))

    @operation
    def release_summary_job(
        self, tenant: str, user_id: str, session_id: str, *, owner: str
    ) -> Op[bool]:
        """Drop ``owner``'s claim on the session's summary job; True if it held one."""
        address = check_session(tenant, user_id, session_id)
        return (yield from self._backend.release_summary_job(*address, check_owner(owner)))
