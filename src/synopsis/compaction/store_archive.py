"""An archive over any memory store: a service's archived history lives in its database.

:class:`StoreArchive` (over a :class:`~synopsis.memory.MemoryStore`) and
:class:`AsyncStoreArchive` (over an :class:`~synopsis.memory.AsyncMemoryStore`) write each
archived message as one item of kind :data:`~synopsis.memory.ARCHIVED_MESSAGE_KIND` in the
session's namespace of one tenant, and search them with the store's own ranking (keyword BM25
with each message's neighbours as its context; hybrid when the store has an embedder). Both
drive the same two flows (:func:`write_flow`, :func:`search_flow`), so they cannot drift.

Where a session's messages go: ``("user", user_id, "archive", session_id)`` when the archive
is built with a ``user_id`` (so ``delete_user`` erases them with the user's memories),
``("archive", session_id)`` otherwise. The kind is one of
:data:`~synopsis.memory.TRANSCRIPT_KINDS`, so session recall never offers archived messages
as memories. An item's text is the message's text with its tool calls' names and arguments
(:func:`~synopsis.compaction.archive.archived_text`), and its tags keep the role (and the tool
call id or name when the message has one); a search gives the message back in that form,
``{"role": ..., "content": text}``, not its raw JSON. Neighbour context, and the dated
heading in force at a message (tag ``dated``), are taken within one written batch (the batch
is one contiguous part of the history).

Keys order the messages: ``<nanoseconds since the epoch>-<random>-<index in the batch>``, so two
replicas writing at once never collide, and keys sort in the order messages were archived.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from synopsis._flow import Flow, StoreCall, adrive, drive
from synopsis.compaction.archive import (
    ArchiveHit,
    archived_text,
    check_neighbours,
    check_search,
    dated_headings,
)
from synopsis.errors import InvalidInput
from synopsis.memory import (
    ARCHIVED_MESSAGE_KIND,
    AsyncMemoryStore,
    MemoryItem,
    MemoryStore,
    Namespace,
    NewMemory,
    SearchHit,
    normalize_namespace,
)
from synopsis.memory.ranking import neighbour_contexts

__all__ = ["AsyncStoreArchive", "StoreArchive", "search_flow", "write_flow"]

#: Message fields kept as tags besides the role (when they are short strings).
_KEPT_FIELDS = ("tool_call_id", "name")
#: The tag of the dated heading in force at a message, within its batch (see
#: :func:`~synopsis.compaction.archive.dated_headings`).
_DATED = "dated"


def session_namespace(user_id: str | None, session_id: str | None) -> Namespace:
    """Where the messages of ``session_id`` are archived (see the module docstring)."""
    session = session_id or "session"
    labels = ("user", user_id, "archive", session) if user_id else ("archive", session)
    return normalize_namespace(labels)


def write_flow(
    tenant: str,
    namespace: Namespace,
    messages: Sequence[Mapping[str, Any]],
    *,
    stamp: str,
) -> Flow[StoreCall, str]:
    """Write a batch as one ``put_many`` (all or nothing); the result names where it went."""
    texts = [archived_text(message) for message in messages]
    items = [
        NewMemory(
            namespace,
            f"{stamp}-{index:06d}",
            text,
            kind=ARCHIVED_MESSAGE_KIND,
            tags=_tags(message, dated),
            context=context,
        )
        for index, (message, text, context, dated) in enumerate(
            zip(messages, texts, neighbour_contexts(texts), dated_headings(texts), strict=True)
        )
    ]
    if items:
        yield StoreCall("put_many", (tenant, items), {})
    return f"the memory store (tenant {tenant}, namespace {'/'.join(namespace)})"


def search_flow(
    tenant: str,
    namespace: Namespace,
    query: str,
    limit: int,
    *,
    hybrid: bool,
    neighbours: int = 0,
) -> Flow[StoreCall, list[ArchiveHit]]:
    """The archived messages under ``namespace`` that match ``query``, best first, each with
    up to ``neighbours`` messages of its batch either side (one ``get`` each)."""
    query, limit = check_search(query, limit)
    neighbours = check_neighbours(neighbours)
    hits: list[SearchHit] = yield StoreCall(
        "search",
        (tenant, namespace),
        {
            "query": query,
            "kind": ARCHIVED_MESSAGE_KIND,
            "limit": limit,
            "mode": "hybrid" if hybrid else "keyword",
        },
    )
    found = []
    for hit in hits:
        before = yield from _around(tenant, namespace, hit.item.key, range(-1, -neighbours - 1, -1))
        after = yield from _around(tenant, namespace, hit.item.key, range(1, neighbours + 1))
        found.append(replace(_hit(hit), before=tuple(reversed(before)), after=tuple(after)))
    return found


def _around(
    tenant: str, namespace: Namespace, key: str, steps: range
) -> Flow[StoreCall, list[dict[str, Any]]]:
    """The messages of the batch at ``steps`` from the one at ``key``, up to the batch's edge."""
    stamp, _, index = key.rpartition("-")
    messages: list[dict[str, Any]] = []
    for step in steps:
        at = int(index) + step if index.isdigit() else -1
        if at < 0:
            break
        item = yield StoreCall("get", (tenant, namespace, f"{stamp}-{at:06d}"), {})
        if item is None:
            break
        messages.append(_message(item))
    return messages


def _tags(message: Mapping[str, Any], dated: str | None = None) -> dict[str, str]:
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise InvalidInput("an archived message needs a role")
    tags = {"role": role}
    for name in _KEPT_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value and len(value) <= 256:
            tags[name] = value
    if dated and len(dated) <= 256:
        tags[_DATED] = dated
    return tags


def _message(item: MemoryItem) -> dict[str, Any]:
    message: dict[str, Any] = {"role": item.tags.get("role", "user"), "content": item.text}
    for name in _KEPT_FIELDS:
        if name in item.tags:
            message[name] = item.tags[name]
    return message


def _hit(hit: SearchHit) -> ArchiveHit:
    message = _message(hit.item)
    return ArchiveHit(message=message, score=hit.score or 0.0, dated=hit.item.tags.get(_DATED))


def _stamp(clock: Callable[[], int]) -> str:
    return f"{clock():020d}-{secrets.token_hex(4)}"


class _Base:
    def __init__(
        self,
        tenant: str,
        *,
        user_id: str | None,
        clock: Callable[[], int] | None,
    ) -> None:
        if not isinstance(tenant, str) or not tenant:
            raise InvalidInput("tenant must be a non-empty string")
        if user_id is not None and (not isinstance(user_id, str) or not user_id):
            raise InvalidInput("user_id must be a non-empty string or None")
        self.tenant = tenant
        self.user_id = user_id
        self._clock = clock or time.time_ns

    def namespace(self, session_id: str | None) -> Namespace:
        """Where this archive keeps the messages of ``session_id``."""
        return session_namespace(self.user_id, session_id)

    def _write(
        self, messages: Sequence[Mapping[str, Any]], session_id: str | None
    ) -> Flow[StoreCall, str]:
        return write_flow(
            self.tenant, self.namespace(session_id), messages, stamp=_stamp(self._clock)
        )

    def _search(
        self,
        query: str,
        session_id: str | None,
        limit: int,
        embedder_id: str | None,
        neighbours: int,
    ) -> Flow[StoreCall, list[ArchiveHit]]:
        return search_flow(
            self.tenant,
            self.namespace(session_id),
            query,
            limit,
            hybrid=embedder_id is not None,
            neighbours=neighbours,
        )


class StoreArchive(_Base):
    """Archives messages in a :class:`~synopsis.memory.MemoryStore` (see the module docstring).

    ``clock`` (nanoseconds) orders the keys; the default is :func:`time.time_ns`.
    """

    def __init__(
        self,
        store: MemoryStore,
        tenant: str,
        *,
        user_id: str | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(tenant, user_id=user_id, clock=clock)
        self.store = store

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        return drive(self._write(messages, session_id), self._perform)

    def search(
        self, query: str, *, session_id: str | None, limit: int = 10, neighbours: int = 0
    ) -> list[ArchiveHit]:
        """The session's archived messages that match ``query``, best first (with up to
        ``neighbours`` messages of their batch either side)."""
        flow = self._search(query, session_id, limit, self.store.embedder_id, neighbours)
        return drive(flow, self._perform)

    def _perform(self, step: StoreCall) -> Any:
        return step.on(self.store)


class AsyncStoreArchive(_Base):
    """The async twin of :class:`StoreArchive`, over an :class:`~synopsis.memory.AsyncMemoryStore`:
    ``await archive.write(...)``, ``await archive.search(...)``. An :class:`AsyncCompactor`
    awaits its ``write``."""

    def __init__(
        self,
        store: AsyncMemoryStore,
        tenant: str,
        *,
        user_id: str | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(tenant, user_id=user_id, clock=clock)
        self.store = store

    async def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        return await adrive(self._write(messages, session_id), self._perform)

    async def search(
        self, query: str, *, session_id: str | None, limit: int = 10, neighbours: int = 0
    ) -> list[ArchiveHit]:
        """The session's archived messages that match ``query``, best first (with up to
        ``neighbours`` messages of their batch either side)."""
        flow = self._search(query, session_id, limit, self.store.embedder_id, neighbours)
        return await adrive(flow, self._perform)

    async def _perform(self, step: StoreCall) -> Any:
        return await step.on(self.store)
