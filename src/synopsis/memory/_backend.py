"""What a store backend is: the :class:`Backend` protocol and the steps it is handed.

A backend carries out the checked store operations of :mod:`synopsis.memory._operations`;
each of its methods returns a flow (:data:`Op`), whose steps its driver performs: an
:class:`Embed` step, or the backend's own (a PostgreSQL plan yields SQL statements); an
in-process backend has none (:func:`stepless`). Also here: the vector helpers every backend
scores with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar

from synopsis._flow import Flow
from synopsis.memory import _types
from synopsis.memory._checks import (
    MAX_LIMIT,
    PutRequest,
    SearchRequest,
    check_embeddings,
    query_embedder,
)
from synopsis.memory._guards import Claim, Guard
from synopsis.memory.ranking import convex_fusion, pack_vector, rank_by_vector, unpack_vector

__all__ = [
    "Backend",
    "Embed",
    "Op",
    "Start",
    "Unembedded",
    "Vector",
    "counted",
    "embed",
    "float32",
    "stepless",
    "vector_scores",
]

P = ParamSpec("P")
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
Vector = tuple[float, ...]
#: A live item stored without a vector: ``(namespace, key, text)``.
Unembedded = tuple[_types.Namespace, str, str]
#: A store operation: a flow of any steps (embeddings, SQL) that returns a ``T``.
Op = Flow[Any, T]
#: Builds a new flow of one operation call (every call of it starts the operation afresh).
Start = Callable[[], Op[T]]


@dataclass(frozen=True, slots=True)
class Embed:
    """Step: embed ``texts`` with the store's embedder (``queries``: as search queries)."""

    texts: tuple[str, ...]
    queries: bool = False


def embed(embedder: _types.Embedder | None, step: Embed) -> list[Vector]:
    """Carry out an :class:`Embed` step: one checked vector per text."""
    assert embedder is not None, "an Embed step needs a store built with an embedder"
    model = query_embedder(embedder) if step.queries else embedder
    return check_embeddings(model(list(step.texts)), len(step.texts))


def float32(vector: Sequence[float]) -> Vector:
    """``vector`` rounded through float32, the precision every backend stores."""
    return unpack_vector(pack_vector(vector))


def vector_scores(
    query_vector: Sequence[float],
    candidates: Sequence[tuple[K, Sequence[float] | bytes]],
    keyword_ranking: Sequence[tuple[K, float]] | None,
) -> dict[K, float]:
    """Scores of a ``vector`` search or, given the keyword hits (best first), ``hybrid``.

    Vector: cosine similarity of the best ``MAX_LIMIT`` candidates (ties keep their order).
    Hybrid: :func:`~synopsis.memory.ranking.convex_fusion` of the first ``MAX_LIMIT`` of each
    ranking, ``keyword_ranking`` being ``(id, BM25 score)`` pairs.
    """
    by_vector = rank_by_vector(query_vector, candidates)[:MAX_LIMIT]
    if keyword_ranking is None:
        return dict(by_vector)
    return convex_fusion(keyword_ranking[:MAX_LIMIT], by_vector)


def counted(flow: Op[list[T]]) -> Op[int]:
    """How many items ``flow`` returns: the bulk load of a backend without a faster path."""
    return len((yield from flow))


def stepless(method: Callable[P, T]) -> Callable[P, Op[T]]:
    """``method`` as a flow without steps, for backends that do their work in process."""

    @functools.wraps(method)
    def flow(*args: P.args, **kwargs: P.kwargs) -> Op[T]:
        yield from ()  # no steps: this only makes ``flow`` a generator
        return method(*args, **kwargs)

    return flow


class Backend(Protocol):
    """What a backend does with checked arguments; each call answers with a flow.

    ``embedder_id`` is the identity of the store's embedder (None: the store has none). A
    vector is stored with it; search and ``unembedded`` treat a vector stored with any other
    identity (or none) as missing.
    """

    def put(
        self, request: PutRequest, vector: Vector | None, embedder_id: str | None
    ) -> Op[_types.MemoryItem]: ...

    def guarded_put(
        self, request: PutRequest, vector: Vector | None, guard: Guard, embedder_id: str | None
    ) -> Op[_types.MemoryItem]:
        """``put``, in a transaction that first checks ``guard`` (UserDeleted if it fails)."""
        ...

    def put_many(
        self, requests: list[PutRequest], vectors: list[Vector] | None, embedder_id: str | None
    ) -> Op[list[_types.MemoryItem]]: ...

    def bulk_load(
        self, requests: list[PutRequest], vectors: list[Vector] | None, embedder_id: str | None
    ) -> Op[int]:
        """``put_many`` without its result, the derived data rebuilt once; how many written."""
        ...

    def get(
        self, tenant: str, namespace: _types.Namespace, key: str
    ) -> Op[_types.MemoryItem | None]: ...

    def delete(self, tenant: str, namespace: _types.Namespace, key: str) -> Op[bool]: ...

    def search(
        self, request: SearchRequest, query_vector: Vector | None, embedder_id: str | None
    ) -> Op[list[_types.SearchHit]]: ...

    def list_namespaces(
        self, tenant: str, prefix: _types.Namespace, max_depth: int | None, limit: int, offset: int
    ) -> Op[list[_types.Namespace]]: ...

    def delete_user(self, tenant: str, user_id: str) -> Op[int]: ...

    def deletion_generation(self, tenant: str, user_id: str) -> Op[int]: ...

    def sweep_expired(self) -> Op[int]: ...

    # --- reembed ------------------------------------------------------------------------
    # Embedding the memories that lack a vector of the store's embedder (none at all, or one
    # another model made): count them, read a batch of them (oldest first), write their
    # vectors with the embedder's identity; forget every vector of a tenant (``reembed
    # --all``); stamp vectors of an unknown model. A vector is written only while the item
    # still holds the text that was embedded, so a ``put`` that replaced the text meanwhile
    # keeps its own vector (or none), and the item is picked up by the next batch.

    def count_unembedded(self, tenant: str, embedder_id: str | None) -> Op[int]:
        """How many live items of the tenant have no vector of ``embedder_id``.

        None: no vector at all (of any identity).
        """
        ...

    def unembedded(self, tenant: str, limit: int, embedder_id: str) -> Op[list[Unembedded]]:
        """Up to ``limit`` live items of the tenant without a vector of ``embedder_id``,
        oldest first."""
        ...

    def set_vectors(
        self, tenant: str, rows: list[tuple[_types.Namespace, str, str, Vector]], embedder_id: str
    ) -> Op[int]:
        """Store vectors on items that still hold the embedded text; how many were stored."""
        ...

    def forget_vectors(self, tenant: str) -> Op[int]:
        """Drop the vector of every item of the tenant; how many were dropped."""
        ...

    def adopt_vectors(self, tenant: str, embedder_id: str) -> Op[int]:
        """Stamp the tenant's vectors of unknown model with ``embedder_id``; how many."""
        ...

    def save_summary(
        self, summary: _types.SessionSummary, guard: Guard | None
    ) -> Op[_types.SessionSummary]: ...

    def latest_summary(
        self, tenant: str, user_id: str, session_id: str
    ) -> Op[_types.SessionSummary | None]: ...

    def summary_history(
        self, tenant: str, user_id: str, session_id: str
    ) -> Op[list[_types.SessionSummary]]: ...

    def pending_outbox(self, tenant: str | None, limit: int) -> Op[list[_types.OutboxEntry]]: ...

    def complete_outbox(
        self, tenant: str, user_id: str, session_id: str, version: int
    ) -> Op[None]: ...

    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> Op[int]: ...

    def delete_user_summaries(self, tenant: str, user_id: str) -> Op[int]: ...

    def claim_summary_job(self, claim: Claim) -> Op[bool]: ...

    def release_summary_job(
        self, tenant: str, user_id: str, session_id: str, owner: str
    ) -> Op[bool]: ...
