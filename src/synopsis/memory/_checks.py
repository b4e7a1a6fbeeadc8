"""Pure checks every memory backend shares: arguments in, frozen requests out; hit ordering.

Nothing here does I/O or reads a clock. The checks turn liberal call arguments into frozen
requests once, so every backend accepts and rejects exactly the same input (and the CLI checks
an import file with the very same rules before writing anything). Scoring lives in
:mod:`synopsis.memory.ranking`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from synopsis.errors import ConfigError, InvalidInput, InvalidNamespace, StoreError
from synopsis.memory._types import (
    Embedder,
    MemoryItem,
    Namespace,
    NamespaceLike,
    NewMemory,
    SearchMode,
    SessionSummary,
    has_control,
    normalize_namespace,
    normalize_tags,
    validate_tenant,
)
from synopsis.memory.kinds import check_kind, check_kind_filter
from synopsis.memory.ranking import query_terms

__all__ = [
    "MAX_INT",
    "MAX_KEY_CHARS",
    "MAX_LIMIT",
    "MAX_TTL_SECONDS",
    "PutRequest",
    "SearchRequest",
    "check_embeddings",
    "check_outbox_address",
    "check_owner",
    "check_page",
    "check_session",
    "check_summary",
    "check_tenant",
    "check_user_id",
    "hit_order",
    "item_error",
    "page_namespaces",
    "prepare_address",
    "prepare_memory",
    "prepare_prefix",
    "prepare_put",
    "prepare_put_many",
    "prepare_search",
    "query_embedder",
    "stored_item",
    "summary_save_action",
    "to_datetime",
    "to_expiry",
]

MAX_LIMIT: Final = 1000
MAX_KEY_CHARS: Final = 1024
MAX_INT: Final = 2**63 - 1
#: The longest ``ttl``: a hundred years, in seconds.
MAX_TTL_SECONDS: Final = 100 * 365.25 * 24 * 3600
#: Stored times are epoch seconds every backend can store and read back as a datetime.
_EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST: Final = datetime(9999, 12, 31, tzinfo=UTC)
_MODES: Final = ("keyword", "vector", "hybrid")


# --- argument checks -------------------------------------------------------------------------


def _encodable(value: str, what: str) -> str:
    """Reject strings some backend cannot store: lone surrogates (not UTF-8) and NUL.

    PostgreSQL text cannot hold NUL; refusing it on every backend keeps data portable
    between them (an export from SQLite always imports into PostgreSQL).
    """
    if not value.isascii():  # ASCII (the common case) is valid UTF-8 without encoding it
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{what} must be valid Unicode text (no lone surrogates)") from exc
    if "\x00" in value:
        raise InvalidInput(f"{what} must not contain NUL characters")
    return value


def check_tenant(tenant: object) -> str:
    """``validate_tenant`` plus a check that the id can be stored."""
    return _encodable(validate_tenant(tenant), "tenant")


def _check_namespace(namespace: NamespaceLike, *, allow_empty: bool = False) -> Namespace:
    labels = normalize_namespace(namespace, allow_empty=allow_empty)
    for label in labels:
        _encodable(label, "namespace label")
    return labels


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidInput("key must be a non-empty string")
    if len(key) > MAX_KEY_CHARS or has_control(key):
        raise InvalidInput(f"key must be at most {MAX_KEY_CHARS} printable characters")
    return _encodable(key, "key")


def _check_tags(tags: Mapping[str, object] | None) -> dict[str, str]:
    result = normalize_tags(tags)
    for name, value in result.items():
        _encodable(name, "tag name")
        _encodable(value, f"tag {name!r}")
    return result


def check_user_id(user_id: object) -> str:
    """A user id is a namespace label: non-empty printable text."""
    if not isinstance(user_id, str) or not user_id:
        raise InvalidInput("user_id must be a non-empty string")
    return _check_namespace(("user", user_id))[1]


def check_session(tenant: object, user_id: object, session_id: object) -> tuple[str, str, str]:
    """The (tenant, user, session) address of a session in the summary store."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("session_id must be a non-empty string")
    return check_tenant(tenant), check_user_id(user_id), _encodable(session_id, "session_id")


def check_outbox_address(
    tenant: object, user_id: object, session_id: object, version: object
) -> tuple[str, str, str, int]:
    """The (tenant, user, session, version) of an outbox entry."""
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_INT:
        raise InvalidInput("version must be an integer from 1 to 2**63 - 1")
    return (*check_session(tenant, user_id, session_id), version)


def check_page(limit: object, offset: object) -> tuple[int, int]:
    """``limit`` in 1..MAX_LIMIT and ``offset`` >= 0, both plain ints."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset must be an integer >= 0")
    return limit, offset


@dataclass(frozen=True, slots=True, kw_only=True)
class PutRequest:
    tenant: str
    namespace: Namespace
    key: str
    text: str
    kind: str
    tags: dict[str, str]
    ttl: float | None
    #: Restored times (epoch seconds), stored as given instead of stamped from the clock.
    created_at: float | None = None
    updated_at: float | None = None
    expires_at: float | None = None
    #: Words to find the item by besides its text (``ranking.indexed_terms``).
    context: str = ""

    def updated(self, now: float) -> float:
        """``updated_at`` of the item a write at ``now`` stores."""
        return now if self.updated_at is None else self.updated_at

    def expiry(self, now: float) -> float | None:
        """``expires_at`` of the item a write at ``now`` stores (None: never expires)."""
        if self.expires_at is not None:
            return self.expires_at
        return None if self.ttl is None else now + self.ttl


def _check_ttl(ttl: object) -> float | None:
    """A TTL is finite, positive and at most a hundred years (so every expiry is readable)."""
    if ttl is None:
        return None
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not math.isfinite(ttl)
        or not 0 < ttl <= MAX_TTL_SECONDS
    ):
        raise InvalidInput(
            "ttl must be a positive number of seconds up to 100 years, or None for no expiry"
        )
    return float(ttl)


def _check_time(value: object, what: str) -> float | None:
    """An aware datetime between 1970 and 9999 (UTC), as epoch seconds; None stays None."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidInput(f"{what} must be a timezone-aware datetime, or None")
    if not _EARLIEST <= value <= _LATEST:
        raise InvalidInput(f"{what} must lie between 1970-01-01 and 9999-12-31 (UTC)")
    return value.timestamp()


def _check_times(
    ttl: object, created_at: object, updated_at: object, expires_at: object
) -> dict[str, float | None]:
    """The time values of a put, each checked, and consistent with one another."""
    times = {
        "ttl": _check_ttl(ttl),
        "created_at": _check_time(created_at, "created_at"),
        "updated_at": _check_time(updated_at, "updated_at"),
        "expires_at": _check_time(expires_at, "expires_at"),
    }
    if times["ttl"] is not None and times["expires_at"] is not None:
        raise InvalidInput("give ttl or expires_at, not both")
    created, updated = times["created_at"], times["updated_at"]
    if created is not None and updated is not None and created > updated:
        raise InvalidInput("created_at must not be later than updated_at")
    return times


def prepare_put(
    tenant: object,
    namespace: NamespaceLike,
    key: object,
    text: object,
    *,
    kind: object,
    tags: Mapping[str, object] | None,
    ttl: object,
    created_at: object = None,
    updated_at: object = None,
    expires_at: object = None,
    context: object = "",
    namespaces: dict[object, Namespace] | None = None,
) -> PutRequest:
    """Check every argument of ``put`` (and the restored times of a batch item), normalized.

    Every time value is checked here, before any backend writes: a value no backend could
    store or read back fails the call and leaves nothing behind. ``namespaces``: a batch's.
    """
    if not isinstance(text, str):
        raise InvalidInput("text must be a string")
    if not isinstance(context, str):
        raise InvalidInput("context must be a string (empty for none)")
    times = _check_times(ttl, created_at, updated_at, expires_at)
    return PutRequest(
        tenant=check_tenant(tenant),
        namespace=_batch_namespace(namespace, namespaces),
        key=_check_key(key),
        text=_encodable(text, "text"),
        kind=check_kind(kind),
        tags=_check_tags(tags),
        context=_encodable(context, "context"),
        **times,
    )


def _batch_namespace(namespace: NamespaceLike, seen: dict[object, Namespace] | None) -> Namespace:
    """Checked once per batch (``seen``); only a str or tuple is remembered (a list may change)."""
    if seen is None or type(namespace) not in (str, tuple):
        return _check_namespace(namespace)
    try:
        checked = seen.get(namespace)
    except TypeError:  # a label is unhashable: not a valid namespace, say why
        return _check_namespace(namespace)
    if checked is None:
        checked = seen[namespace] = _check_namespace(namespace)
    return checked


def item_error(
    index: int, error: InvalidInput | InvalidNamespace
) -> InvalidInput | InvalidNamespace:
    """``error`` located at item ``index`` of a batch (same type).

    The index is in the message and in ``index``; ``error`` (the bare reason) is the cause.
    """
    located = type(error)(f"item {index}: {error}")
    located.index = index
    located.__cause__ = error
    return located


def prepare_memory(
    tenant: object, item: NewMemory, namespaces: dict[object, Namespace] | None = None
) -> PutRequest:
    """Check a batch item as :func:`prepare_put` checks the arguments of ``put``."""
    return prepare_put(
        tenant,
        item.namespace,
        item.key,
        item.text,
        kind=item.kind,
        tags=item.tags,
        ttl=item.ttl,
        created_at=item.created_at,
        updated_at=item.updated_at,
        expires_at=item.expires_at,
        context=item.context,
        namespaces=namespaces,
    )


def _prepare_item(
    tenant: str, index: int, item: object, namespaces: dict[object, Namespace]
) -> PutRequest:
    if not isinstance(item, NewMemory):
        raise item_error(index, InvalidInput(f"expected a NewMemory, got {type(item).__name__}"))
    try:
        return prepare_memory(tenant, item, namespaces)
    except (InvalidInput, InvalidNamespace) as exc:
        raise item_error(index, exc) from exc


def prepare_put_many(tenant: object, items: Iterable[object]) -> list[PutRequest]:
    """Check every item of ``put_many``; a bad one raises naming its index.

    One request per distinct (namespace, key), in order of first occurrence, holding the
    values of the last occurrence (a later item of the batch replaces an earlier one).
    """
    checked_tenant = check_tenant(tenant)
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInput("items must be an iterable of NewMemory")
    batch: dict[tuple[Namespace, str], PutRequest] = {}
    namespaces: dict[object, Namespace] = {}
    for index, item in enumerate(items):
        request = _prepare_item(checked_tenant, index, item, namespaces)
        batch[(request.namespace, request.key)] = request
    return list(batch.values())


def prepare_address(
    tenant: object, namespace: NamespaceLike, key: object
) -> tuple[str, Namespace, str]:
    """Check the (tenant, namespace, key) address of ``get`` and ``delete``."""
    return check_tenant(tenant), _check_namespace(namespace), _check_key(key)


def prepare_prefix(tenant: object, prefix: NamespaceLike) -> tuple[str, Namespace]:
    """Check a tenant and a (possibly empty) namespace prefix."""
    return check_tenant(tenant), _check_namespace(prefix, allow_empty=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    tenant: str
    prefix: Namespace
    #: ``None``: no query (newest first). Otherwise the raw query text.
    query: str | None
    #: The keyword terms of ``query`` (empty when there is no query or it has no terms).
    terms: tuple[str, ...]
    #: Only items of these kinds (None: any kind); sorted, without repeats.
    kinds: tuple[str, ...] | None
    #: Never items of these kinds (empty: none left out); sorted, without repeats.
    exclude_kinds: tuple[str, ...]
    tags: dict[str, str]
    limit: int
    offset: int
    mode: SearchMode

    @property
    def whole_tenant(self) -> bool:
        """Whether the scope is the whole tenant: no prefix, kind filter or tags."""
        return not (self.prefix or self.kinds is not None or self.exclude_kinds or self.tags)


def prepare_search(
    tenant: object,
    namespace_prefix: NamespaceLike,
    *,
    query: object,
    kind: object,
    tags: Mapping[str, object] | None,
    limit: object,
    offset: object,
    mode: object,
    embedder: Embedder | None,
    exclude_kinds: object = (),
) -> SearchRequest:
    """Check every argument of ``search``; vector modes need an embedder (ConfigError).

    ``kind`` and ``exclude_kinds`` as :func:`~synopsis.memory.kinds.check_kind_filter` reads
    them.
    """
    if mode not in _MODES:
        raise InvalidInput(f"mode must be one of {', '.join(_MODES)}")
    if mode != "keyword" and embedder is None:
        raise ConfigError(f"search mode {mode!r} needs a store built with an embedder")
    if query is not None and not isinstance(query, str):
        raise InvalidInput("query must be a string or None")
    kinds, excluded = check_kind_filter(kind, exclude_kinds)
    checked_limit, checked_offset = check_page(limit, offset)
    checked_tenant, prefix = prepare_prefix(tenant, namespace_prefix)
    return SearchRequest(
        tenant=checked_tenant,
        prefix=prefix,
        query=query,
        terms=tuple(query_terms(query)) if query is not None else (),
        kinds=kinds,
        exclude_kinds=excluded,
        tags=_check_tags(tags),
        limit=checked_limit,
        offset=checked_offset,
        mode=mode,
    )


def check_summary(summary: object) -> SessionSummary:
    """A summary must name its tenant, user and session and cover a sane message range."""
    if not isinstance(summary, SessionSummary):
        raise InvalidInput("summary must be a SessionSummary")
    check_tenant(summary.tenant)
    check_user_id(summary.user_id)
    for name in ("session_id", "content_hash", "model", "text"):
        value = getattr(summary, name)
        if not isinstance(value, str) or (name != "text" and not value):
            raise InvalidInput(f"summary.{name} must be a non-empty string")
        _encodable(value, f"summary.{name}")
    for name in ("version", "covers_from", "covers_to"):
        value = getattr(summary, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
            raise InvalidInput(f"summary.{name} must be an integer from 0 to 2**63 - 1")
    if summary.version < 1:
        raise InvalidInput("summary.version must be >= 1")
    if summary.covers_from > summary.covers_to:
        raise InvalidInput("summary.covers_from must not be greater than summary.covers_to")
    return summary


def check_embeddings(vectors: Sequence[Sequence[float]], count: int) -> list[tuple[float, ...]]:
    """The embedder must return one vector of numbers per text."""
    result = [tuple(float(x) for x in vector) for vector in vectors]
    if len(result) != count:
        raise ConfigError(f"embedder returned {len(result)} vectors for {count} texts")
    return result


def query_embedder(embedder: Embedder) -> Embedder:
    """How to embed search queries: the embedder's ``embed_queries`` if it has one.

    Asymmetric models (E5, for one) encode a query differently from a stored text.
    """
    method = getattr(embedder, "embed_queries", None)
    return method if callable(method) else embedder


def stored_item(request: PutRequest, *, created: float, now: float) -> MemoryItem:
    """The item a put of ``request`` at ``now`` wrote; ``created`` survives a replace."""
    updated = request.updated(now)
    updated_at = to_datetime(updated)
    return MemoryItem(
        tenant=request.tenant,
        namespace=request.namespace,
        key=request.key,
        text=request.text,
        kind=request.kind,
        tags=dict(request.tags),
        created_at=updated_at if created == updated else to_datetime(created),
        updated_at=updated_at,
        expires_at=to_expiry(request.expiry(now)),
        context=request.context,
    )


# --- ordering --------------------------------------------------------------------------------


def to_datetime(epoch_seconds: float) -> datetime:
    """Stored epoch seconds as an aware UTC datetime.

    A value no datetime can hold (written by a version that did not check it) reads as the
    earliest or latest datetime, so one bad row never makes a whole search fail.
    """
    try:
        return datetime.fromtimestamp(epoch_seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.max.replace(tzinfo=UTC) if epoch_seconds > 0 else _EARLIEST


def to_expiry(epoch_seconds: float | None) -> datetime | None:
    """A stored expiry as a datetime; None (never expires) also for one past the year 9999.

    Earlier versions accepted any finite ``ttl`` and could store such an expiry; every
    backend treats it as live, so reading it as "never expires" is exact enough, and a
    database holding one keeps working.
    """
    if epoch_seconds is None or not epoch_seconds <= _LATEST.timestamp():
        return None
    return to_datetime(epoch_seconds)


def hit_order(
    score: float | None, updated_at: float, key: str, namespace: Namespace
) -> tuple[float, float, str, Namespace]:
    """Sort key shared by every backend: best score, then newest, then key, then namespace."""
    return (-(score or 0.0), -updated_at, key, namespace)


def page_namespaces(
    namespaces: Sequence[Namespace], *, max_depth: int | None, limit: int, offset: int
) -> list[Namespace]:
    """Cut namespaces to ``max_depth`` labels, drop duplicates, sort, then page."""
    if max_depth is not None and (
        isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1
    ):
        raise InvalidInput("max_depth must be an integer >= 1 or None")
    cut = {ns[:max_depth] if max_depth is not None else ns for ns in namespaces}
    return sorted(cut)[offset : offset + limit]


# --- summaries -------------------------------------------------------------------------------


def summary_save_action(
    new: SessionSummary, *, existing: SessionSummary | None, latest: SessionSummary | None
) -> Literal["insert", "noop"]:
    """Decide what ``save_summary`` does, given the same version and the newest stored one.

    Same version and hash: a no-op (idempotent retry). Same version, other hash: conflict.
    A version not above the newest: conflict. A session never changes user.
    """
    where = f"summary {new.session_id!r} version {new.version}"
    if existing is not None:
        if existing.content_hash == new.content_hash:
            return "noop"
        raise StoreError(f"{where} already exists with a different content hash")
    if latest is not None:
        if latest.user_id != new.user_id:
            raise StoreError(f"session {new.session_id!r} belongs to another user")
        if new.version <= latest.version:
            raise StoreError(f"{where} is not newer than the stored version {latest.version}")
    return "insert"


def check_owner(owner: object) -> str:
    """The name of a job claim's owner: non-empty text."""
    if not isinstance(owner, str) or not owner:
        raise InvalidInput("owner must be a non-empty string")
    return _encodable(owner, "owner")
