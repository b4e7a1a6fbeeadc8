"""The memory store and summary store contracts (pure types; no I/O).

Every call takes the tenant first. A store never returns, changes or deletes an item of a
tenant other than the one named in the call, whatever the namespace, query or filter say.

Namespaces are tuples of non-empty string labels, e.g. ``("user", "u1", "session", "s1")``.
Labels may contain any printable text (dots, slashes, ``%``, quotes); stores must not give any
character a special meaning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from synopsis.errors import InvalidInput, InvalidNamespace

__all__ = [
    "AsyncMemoryStore",
    "AsyncSessionStore",
    "AsyncSummaryStore",
    "Embedder",
    "MemoryItem",
    "MemoryStore",
    "Namespace",
    "NamespaceLike",
    "NewMemory",
    "OutboxEntry",
    "SearchHit",
    "SearchMode",
    "SessionStore",
    "SessionSummary",
    "SummaryStore",
    "has_control",
    "normalize_namespace",
    "normalize_tags",
    "validate_tenant",
]

Namespace = tuple[str, ...]
#: ``keyword``: BM25 over CJK-aware terms (no model needed). ``vector`` and ``hybrid`` need a
#: store built with an ``embedder``; ``hybrid`` fuses both rankings' scores (``memory.ranking``).
SearchMode = Literal["keyword", "vector", "hybrid"]
#: Turns texts into vectors. Any callable of this shape works; nothing downloads weights. An
#: ``embedder_id`` string attribute, if present, names its model and version (stored with every
#: vector it makes: see ``synopsis.memory._identity``).
Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]
#: Accepted at the edge: a tuple/list of labels, or a "/"-separated string ("user/u1").
NamespaceLike = Sequence[str] | str

MAX_LABEL_CHARS = 256
MAX_NAMESPACE_DEPTH = 16
MAX_TENANT_CHARS = 128


_CONTROL = re.compile("[\x00-\x1f]")


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (below U+0020)."""
    return _CONTROL.search(text) is not None


def validate_tenant(tenant: object) -> str:
    """Return ``tenant`` if it is a usable tenant id, else raise InvalidInput naming why."""
    if not isinstance(tenant, str) or not tenant.strip():
        raise InvalidInput("tenant must be a non-empty string")
    if len(tenant) > MAX_TENANT_CHARS or has_control(tenant):
        raise InvalidInput(f"tenant must be at most {MAX_TENANT_CHARS} printable characters")
    return tenant


def normalize_namespace(namespace: NamespaceLike, *, allow_empty: bool = False) -> Namespace:
    """Turn liberal input into a namespace tuple, or raise InvalidNamespace saying why."""
    if isinstance(namespace, str):
        labels: tuple[object, ...] = tuple(p for p in namespace.split("/") if p != "")
    elif isinstance(namespace, Sequence):
        labels = tuple(namespace)
    else:
        raise InvalidNamespace(
            f"namespace must be a tuple of strings, got {type(namespace).__name__}"
        )
    if not labels and not allow_empty:
        raise InvalidNamespace("namespace must have at least one label")
    if len(labels) > MAX_NAMESPACE_DEPTH:
        raise InvalidNamespace(f"namespace is deeper than {MAX_NAMESPACE_DEPTH} labels")
    for position, label in enumerate(labels):
        if not isinstance(label, str) or not label:
            raise InvalidNamespace(f"namespace label {position} must be a non-empty string")
        if len(label) > MAX_LABEL_CHARS or has_control(label):
            raise InvalidNamespace(
                f"namespace label {position} must be at most {MAX_LABEL_CHARS} printable characters"
            )
    return tuple(str(label) for label in labels)


def normalize_tags(tags: Mapping[str, object] | None) -> dict[str, str]:
    """Tags are a flat string-to-string mapping; anything else is rejected."""
    if tags is None:
        return {}
    if not isinstance(tags, Mapping):
        raise InvalidInput("tags must be an object of string keys and string values")
    result: dict[str, str] = {}
    for key, value in tags.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidInput(f"tag {key!r} must map a non-empty string to a string")
        result[key] = value
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryItem:
    """One stored memory: its address (tenant, namespace, key), text, kind, tags and times.

    ``context`` holds the words it was stored with to be found by, at half the weight of its
    text (see :mod:`synopsis.memory.ranking`); empty when none were given.
    """

    tenant: str
    namespace: Namespace
    key: str
    text: str
    kind: str
    tags: Mapping[str, str] = field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    context: str = ""


@dataclass(frozen=True, slots=True)
class NewMemory:
    """One item of a ``put_many`` batch: the arguments ``put`` takes after the tenant.

    ``created_at``, ``updated_at`` and ``expires_at`` (aware datetimes) *restore* an item,
    as ``memory import`` does from an export: each one given is stored as it is, instead of
    being stamped from the clock (``created_at`` then replaces that of an existing item).
    ``expires_at`` and ``ttl`` exclude each other. ``context``: as for ``put``.
    """

    namespace: NamespaceLike
    key: str
    text: str
    kind: str = "note"
    tags: Mapping[str, str] | None = None
    ttl: float | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    context: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    item: MemoryItem
    #: Higher is better. BM25-derived for keyword search, cosine for vector, 0..1 for hybrid,
    #: ``None`` when no query was given (then hits come newest first).
    score: float | None


# The store contracts, written compactly (as in typeshed stubs) so that each sync protocol and
# its async twin read side by side. Every backend implements them once, in ``_operations``.


@runtime_checkable
class MemoryStore(Protocol):
    """Synchronous long-term memory store, scoped by tenant."""

    # fmt: off
    def put(self, tenant: str, namespace: NamespaceLike, key: str, text: str, *,
            kind: str = "note", tags: Mapping[str, str] | None = None,
            ttl: float | None = None, generation: int | None = None,
            context: str = "") -> MemoryItem:
        """Insert or replace an item.

        ``context``: words to find the item by that are not its text (the turns around a
        chat turn, a title, a date); indexed at half the weight of the text, kept on the item.

        With ``generation``, the namespace must be a user's (``("user", user_id, ...)``) and
        the item is written only while that user's deletion generation is still
        ``generation``, checked in the transaction of the write; otherwise UserDeleted is
        raised and nothing is written.
        """
        ...

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        """Put a batch in one transaction: all items are written, or none.

        Every item is checked before anything is written; a bad one raises what ``put``
        would, with ``index`` (and the message) naming its position. An existing address is
        replaced as by ``put``. When an address occurs more than once in the batch, the last
        occurrence wins. Returns one item per distinct address, in order of first occurrence.
        Times an item gives (``NewMemory.created_at`` and the others) are restored as given.
        """
        ...

    def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None: ...

    def search(self, tenant: str, namespace_prefix: NamespaceLike = (), *,
               query: str | None = None, kind: str | Collection[str] | None = None,
               exclude_kinds: str | Collection[str] = (),
               tags: Mapping[str, str] | None = None, limit: int = 10, offset: int = 0,
               mode: SearchMode = "keyword") -> list[SearchHit]:
        """Live items under the prefix, best first for ``query`` (newest first without one).

        ``kind``: only items of this kind, or of any of these kinds. ``exclude_kinds``: never
        items of these kinds (``synopsis.memory.TRANSCRIPT_KINDS``: stored transcripts). ``tags``:
        only items carrying every one of them. Keyword scores describe the filtered scope.
        """
        ...

    def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool: ...

    def list_namespaces(self, tenant: str, *, prefix: NamespaceLike = (),
                        max_depth: int | None = None, limit: int = 100,
                        offset: int = 0) -> list[Namespace]: ...

    def delete_user(self, tenant: str, user_id: str) -> int:
        """Delete the user's memories, summaries, outbox entries and job claims; count them.

        In the same transaction the user's deletion generation goes up by one, so every
        write made with the generation read before (``put``/``save_summary`` with
        ``generation=``), by this process or any other, is refused afterwards.
        """
        ...

    def deletion_generation(self, tenant: str, user_id: str) -> int:
        """How many times the user was deleted (0 for a user never deleted)."""
        ...

    def sweep_expired(self) -> int: ...

    def count_unembedded(self, tenant: str) -> int:
        """How many live items of the tenant have no vector of this store's embedder.

        A vector another model made (another embedder identity, or an unknown one stored
        before identities were recorded) counts as missing. A store without an embedder
        counts the items without any vector.
        """
        ...

    def reembed(self, tenant: str, *, batch: int = 100) -> int:
        """Embed up to ``batch`` live items of the tenant lacking a vector of this store's
        embedder (``count_unembedded``), oldest first.

        Needs a store built with an embedder (ConfigError otherwise). Returns how many items
        got a vector, 0 when none is left: call it until then, and an interrupted run resumes
        where it stopped. An item whose text changed meanwhile waits for the next call.
        """
        ...

    def forget_vectors(self, tenant: str) -> int:
        """Drop the vector of every item of the tenant, whatever model made it; how many.

        The items stay (found by keyword) and count as unembedded until ``reembed``.
        """
        ...

    def adopt_vectors(self, tenant: str) -> int:
        """Record this store's embedder as the model of the tenant's vectors of unknown model
        (stored before synopsis recorded models); how many. Only when you know it made them.
        """
        ...

    @property
    def embedder_id(self) -> str | None:
        """The identity of the model its vectors are stored with; None without an embedder."""
        ...

    def close(self) -> None: ...
    # fmt: on


@runtime_checkable
class AsyncMemoryStore(Protocol):
    """The async twin of :class:`MemoryStore`: same methods, awaited (``aclose`` to close)."""

    # fmt: off
    async def put(self, tenant: str, namespace: NamespaceLike, key: str, text: str, *,
                  kind: str = "note", tags: Mapping[str, str] | None = None,
                  ttl: float | None = None, generation: int | None = None,
                  context: str = "") -> MemoryItem: ...

    async def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]: ...

    async def get(self, tenant: str, namespace: NamespaceLike, key: str) -> MemoryItem | None: ...

    async def search(self, tenant: str, namespace_prefix: NamespaceLike = (), *,
                     query: str | None = None, kind: str | Collection[str] | None = None,
                     exclude_kinds: str | Collection[str] = (),
                     tags: Mapping[str, str] | None = None, limit: int = 10, offset: int = 0,
                     mode: SearchMode = "keyword") -> list[SearchHit]: ...

    async def delete(self, tenant: str, namespace: NamespaceLike, key: str) -> bool: ...

    async def list_namespaces(self, tenant: str, *, prefix: NamespaceLike = (),
                              max_depth: int | None = None, limit: int = 100,
                              offset: int = 0) -> list[Namespace]: ...

    async def delete_user(self, tenant: str, user_id: str) -> int: ...

    async def deletion_generation(self, tenant: str, user_id: str) -> int: ...

    async def sweep_expired(self) -> int: ...

    async def count_unembedded(self, tenant: str) -> int: ...

    async def reembed(self, tenant: str, *, batch: int = 100) -> int: ...

    async def forget_vectors(self, tenant: str) -> int: ...

    async def adopt_vectors(self, tenant: str) -> int: ...

    @property
    def embedder_id(self) -> str | None: ...

    async def aclose(self) -> None: ...
    # fmt: on


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """One version of one session's summary; a session is (tenant, user_id, session_id)."""

    tenant: str
    user_id: str
    session_id: str
    version: int
    text: str
    #: The summary covers messages ``[covers_from, covers_to)`` of the session's history.
    covers_from: int
    covers_to: int
    model: str
    content_hash: str
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    """A pending second write of a dual write: make ``summary`` a long-term memory."""

    summary: SessionSummary
    #: How many times the write failed (recorded by ``fail_outbox``).
    attempts: int = 0
    #: The user's deletion generation when the entry was read: replay the write with it
    #: (``put(..., generation=...)``) so that a ``delete_user`` since then wins.
    generation: int = 0


# fmt: off
@runtime_checkable
class SummaryStore(Protocol):
    """Versioned session summaries, an outbox for their memory copies, and job claims.

    A session is addressed by (tenant, user_id, session_id): two users of one tenant may use
    the same session id and never see each other's summaries.

    ``save_summary`` writes the summary and its outbox entry in one transaction. Saving the
    same version with the same content hash again is a no-op returning the stored row; a
    different hash for an existing version raises StoreError. With ``generation``, the save
    happens only while the user's deletion generation is still ``generation`` (checked in
    the same transaction); otherwise UserDeleted is raised and nothing is written.

    ``pending_outbox`` lists the fewest-attempted entries first, oldest first among equals, so
    entries that keep failing (``fail_outbox`` counts each failure) queue behind fresh ones
    instead of blocking them. ``fail_outbox`` returns the entry's new attempt count, or 0 when
    there is no such pending entry (missing, completed or deleted).

    ``claim_summary_job`` lets one replica summarize a session while the others skip it: it
    succeeds (True) when no other owner holds a live claim on the session, taking over an
    expired one; the claim lasts ``lease_seconds`` (by the store's clock) unless released or
    renewed by its owner. ``covers_to`` records how far into the history the owner's job
    reaches. ``release_summary_job`` drops the owner's claim (True if it held one).
    """

    def save_summary(self, summary: SessionSummary, *,
                     generation: int | None = None) -> SessionSummary: ...

    def latest_summary(self, tenant: str, user_id: str,
                       session_id: str) -> SessionSummary | None: ...

    def summary_history(self, tenant: str, user_id: str,
                        session_id: str) -> list[SessionSummary]: ...

    def pending_outbox(self, tenant: str | None = None, *,
                       limit: int = 100) -> list[OutboxEntry]: ...

    def complete_outbox(self, tenant: str, user_id: str, session_id: str,
                        version: int) -> None: ...

    def fail_outbox(self, tenant: str, user_id: str, session_id: str, version: int) -> int: ...

    def delete_user_summaries(self, tenant: str, user_id: str) -> int:
        """Delete the user's summaries, outbox entries and claims; moves the generation."""
        ...

    def claim_summary_job(self, tenant: str, user_id: str, session_id: str, *,
                          covers_to: int, owner: str, lease_seconds: float) -> bool: ...

    def release_summary_job(self, tenant: str, user_id: str, session_id: str, *,
                            owner: str) -> bool: ...


@runtime_checkable
class AsyncSummaryStore(Protocol):
    """The async twin of :class:`SummaryStore`."""

    async def save_summary(self, summary: SessionSummary, *,
                           generation: int | None = None) -> SessionSummary: ...

    async def latest_summary(self, tenant: str, user_id: str,
                             session_id: str) -> SessionSummary | None: ...

    async def summary_history(self, tenant: str, user_id: str,
                              session_id: str) -> list[SessionSummary]: ...

    async def pending_outbox(self, tenant: str | None = None, *,
                             limit: int = 100) -> list[OutboxEntry]: ...

    async def complete_outbox(self, tenant: str, user_id: str, session_id: str,
                              version: int) -> None: ...

    async def fail_outbox(self, tenant: str, user_id: str, session_id: str,
                          version: int) -> int: ...

    async def delete_user_summaries(self, tenant: str, user_id: str) -> int: ...

    async def claim_summary_job(self, tenant: str, user_id: str, session_id: str, *,
                                covers_to: int, owner: str, lease_seconds: float) -> bool: ...

    async def release_summary_job(self, tenant: str, user_id: str, session_id: str, *,
                                  owner: str) -> bool: ...
# fmt: on


class SessionStore(MemoryStore, SummaryStore, Protocol):
    """A store that keeps both long-term memories and session summaries."""


class AsyncSessionStore(AsyncMemoryStore, AsyncSummaryStore, Protocol):
    """The async twin of :class:`SessionStore`."""
