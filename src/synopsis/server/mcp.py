"""synopsis over MCP: a user's memory and a session's archived history as tools for agents.

Built with the official ``mcp`` SDK (``synopsis[mcp]``). Four tools:

* ``recall`` — search the user's memories and session summaries (session memory's recall);
* ``remember`` — store a memory for the user (redacted first when the service redacts);
* ``search_history`` — search the archived, compacted-away history of one session;
* ``forget`` — delete a memory by the id ``recall`` or ``remember`` gave.

Each answer is text, bounded in size; a bad argument (an empty query, an unknown memory id)
answers a tool error (``isError``), never a crash of the server.

Two transports share the tools, which differ only in how a call finds its :class:`Scope` (the
tenant and the stores it may touch):

* **stdio** (``synopsis mcp``): one local store and one tenant from the settings, for an MCP
  client on the same machine (:func:`local_scope`);
* **streamable HTTP**, mounted at ``/mcp`` in ``synopsis serve`` (:func:`mount`): the tenant
  is the one of the request's bearer key, checked exactly as the REST API checks it
  (:func:`synopsis.server.deps.tenant_of`); a request without a valid key gets the REST
  API's 401, before MCP sees it.

``search_history`` searches, fused by reciprocal rank: the session's archive in the store
(:class:`~synopsis.compaction.store_archive.AsyncStoreArchive` with the user, where a
compactor given that archive writes), and, in the service, the part of the session's stored
history that its latest summary covers (the service keeps the whole history; what the summary
covers is what the model no longer sees); locally, also a JSONL archive directory when one is
given (``synopsis mcp --archive DIR``, what ``synopsis compact`` and the library write).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from synopsis.compaction.archive import (
    ArchiveHit,
    JsonlArchive,
    archived_text,
    check_search,
    search_messages,
)
from synopsis.compaction.history import format_hits
from synopsis.compaction.store_archive import AsyncStoreArchive
from synopsis.errors import InvalidInput, InvalidNamespace, SynopsisError
from synopsis.memory import AsyncSessionStore, SearchHit, normalize_namespace
from synopsis.memory.ranking import fused_order
from synopsis.redact import Redactor
from synopsis.session.memory import AsyncSessionMemory

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "MAX_ANSWER_CHARS",
    "MEMORIES",
    "Scope",
    "build_server",
    "local_scope",
    "memory_id",
    "mount",
]

#: The namespace under the user where ``remember`` stores: ``("user", user_id, "memories")``.
MEMORIES: Final = "memories"
#: The most characters of one tool answer.
MAX_ANSWER_CHARS: Final = 6_000
#: The most characters of one memory or message an answer quotes.
_ITEM_CHARS: Final = 1_000
_MAX_TEXT_CHARS: Final = 20_000
_DEFAULT_USER: Final = "default"

INSTRUCTIONS: Final = (
    "synopsis keeps this user's long-term memory and the history of their sessions. Call "
    "`recall` before answering anything that may depend on what the user said or decided "
    "before; `remember` a durable fact, preference or decision worth keeping across "
    "sessions; `search_history` when a session's summary lacks an exact detail; `forget` "
    "a memory the user asks you to drop or that is wrong."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scope:
    """What one tool call may touch: its tenant, the stores, and where histories are."""

    tenant: str
    store: AsyncSessionStore
    memory: AsyncSessionMemory
    redact: Redactor | None = None
    #: The user a call that names none acts for.
    default_user: str = _DEFAULT_USER
    #: A JSONL archive directory searched by ``search_history`` too (local only).
    archive: JsonlArchive | None = None
    #: ``(tenant, user, session) -> the messages the latest summary covers`` (the service).
    covered_history: Callable[[str, str, str], Awaitable[Sequence[dict[str, Any]]]] | None = None


Resolve = Callable[[Context], Awaitable[Scope]]


_RECALL: Final = (
    "Search the user's long-term memories and the summaries of their earlier "
    "sessions. Use it before answering anything that may depend on what the user "
    "said, prefers or decided before. Pass a few distinctive keywords (any "
    "language). Returns the best matches first, each with its id (for `forget`)."
)

_REMEMBER: Final = (
    "Store a memory for the user: a durable fact, preference or decision worth "
    "keeping across sessions, written as one self-contained sentence (say who and "
    "what, not 'he' or 'it'). The same text remembered twice is one memory. Returns "
    "its id."
)

_SEARCH_HISTORY: Final = (
    "Search the earlier part of a session that was compacted away (replaced by a "
    "summary to save space). Use it when you need an exact detail the summary does "
    "not give: a name, number, date, file path, command, error message or what "
    "someone said. Pass the session id and a few distinctive keywords rather than a "
    "whole question. Returns the best-matching archived messages, best first."
)

_FORGET: Final = (
    "Delete one of the user's memories by the id `recall` or `remember` gave "
    "(for example 'user/alice/memories/mem-3f2a...'). Use it when the user asks you "
    "to forget something, or a memory is wrong."
)


def build_server(resolve: Resolve, *, name: str = "synopsis") -> MCPServer:
    """An MCP server with the four tools; ``resolve`` gives each call its :class:`Scope`."""
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")

    _memory_tools(server, resolve)
    _history_tools(server, resolve)
    return server


def _memory_tools(server: MCPServer, resolve: Resolve) -> None:
    """``recall``, ``remember`` and ``forget``."""

    @server.tool(name="recall", description=_RECALL)
    async def recall(query: str, ctx: Context, user_id: str | None = None, limit: int = 5) -> str:
        scope = await resolve(ctx)
        query, limit = _checked(query, limit)
        user = _user(scope, user_id)
        hits = await _call(scope.memory.recall(scope.tenant, user, query, limit=limit))
        return _memories_answer(query, hits)

    @server.tool(name="remember", description=_REMEMBER)
    async def remember(
        text: str, ctx: Context, user_id: str | None = None, kind: str = "note"
    ) -> str:
        scope = await resolve(ctx)
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must be a non-empty sentence to remember")
        if len(text) > _MAX_TEXT_CHARS:
            raise ToolError(f"text must be at most {_MAX_TEXT_CHARS} characters")
        user = _user(scope, user_id)
        if scope.redact is not None:
            text = scope.redact.redact_text(text).text
        namespace = ("user", user, MEMORIES)
        item = await _call(
            scope.store.put(scope.tenant, namespace, _key(kind, text), text, kind=kind)
        )
        return f"Remembered as {memory_id(item.namespace, item.key)}."

    @server.tool(name="forget", description=_FORGET)
    async def forget(memory_id: str, ctx: Context) -> str:
        scope = await resolve(ctx)
        namespace, key = _address(memory_id)
        if not await _call(scope.store.delete(scope.tenant, namespace, key)):
            raise ToolError(f"no memory {memory_id!r}: recall shows the ids there are")
        return f"Forgot {memory_id}."


def _history_tools(server: MCPServer, resolve: Resolve) -> None:
    """``search_history``."""

    @server.tool(name="search_history", description=_SEARCH_HISTORY)
    async def search_history(
        query: str, session_id: str, ctx: Context, user_id: str | None = None, limit: int = 5
    ) -> str:
        scope = await resolve(ctx)
        query, limit = _checked(query, limit)
        if not isinstance(session_id, str) or not session_id.strip():
            raise ToolError("session_id must name the session to search")
        user = _user(scope, user_id)
        hits = await _call(_history_hits(scope, user, session_id, query, limit))
        return format_hits(query, hits, message_chars=_ITEM_CHARS, max_chars=MAX_ANSWER_CHARS)


def memory_id(namespace: Sequence[str], key: str) -> str:
    """The id a tool answer gives a memory: its namespace and key joined by ``/``."""
    return "/".join([*namespace, key])


def _address(ident: object) -> tuple[tuple[str, ...], str]:
    if not isinstance(ident, str) or "/" not in ident.strip("/"):
        raise ToolError("memory_id must be an id as recall gives it, such as user/alice/memories/k")
    path, key = ident.strip("/").rsplit("/", 1)
    try:
        return normalize_namespace(path), key
    except InvalidNamespace as exc:
        raise ToolError(f"memory_id is not a memory's id: {exc}") from None


def _checked(query: object, limit: object) -> tuple[str, int]:
    try:
        return check_search(query, limit)
    except InvalidInput as exc:
        raise ToolError(str(exc)) from None


def _user(scope: Scope, user_id: str | None) -> str:
    user = scope.default_user if user_id is None else user_id
    if not isinstance(user, str) or not user.strip() or "/" in user or len(user) > 256:
        raise ToolError("user_id must be a user's id (printable, no '/', at most 256 characters)")
    return user


async def _call(awaitable: Awaitable[Any]) -> Any:
    """Await a store call; synopsis's own errors (bad input, a missing session) become the
    tool's error message, for the model to correct its call."""
    try:
        return await awaitable
    except SynopsisError as exc:
        raise ToolError(str(exc)) from None


def _key(kind: str, text: str) -> str:
    """A key derived from the content, so remembering the same text twice is one memory."""
    digest = hashlib.sha256(f"{kind}\x00{text}".encode()).hexdigest()
    return f"mem-{digest[:24]}"


def _memories_answer(query: str, hits: Sequence[SearchHit]) -> str:
    if not hits:
        return f"No memory matches {query[:100]!r}. Try other keywords."
    lines = [f"Memories matching {query[:100]!r}, best first:"]
    used = len(lines[0])
    for number, hit in enumerate(hits, start=1):
        text = " ".join(hit.item.text.split())
        if len(text) > _ITEM_CHARS:
            text = text[: _ITEM_CHARS - 1] + "…"
        ident = memory_id(hit.item.namespace, hit.item.key)
        entry = f"[{number}] ({hit.item.kind}, id {ident}) {text}"
        if used + 1 + len(entry) > MAX_ANSWER_CHARS - 70:
            lines.append(f"({len(hits) - number + 1} more left out to keep this short)")
            break
        lines.append(entry)
        used += 1 + len(entry)
    return "\n".join(lines)


async def _history_hits(
    scope: Scope, user: str, session: str, query: str, limit: int
) -> list[ArchiveHit]:
    """The session's archived messages that match, from every source, fused by rank."""
    archive = AsyncStoreArchive(scope.store, scope.tenant, user_id=user)
    rankings = [await archive.search(query, session_id=session, limit=limit)]
    if scope.archive is not None:
        search = partial(scope.archive.search, query, session_id=session, limit=limit)
        rankings.append(await asyncio.to_thread(search))
    if scope.covered_history is not None:
        covered = await scope.covered_history(scope.tenant, user, session)
        rankings.append(search_messages(covered, query, limit=limit))
    by_id: dict[tuple[int, int], ArchiveHit] = {}
    ids: list[list[tuple[int, int]]] = []
    for source, hits in enumerate(rankings):
        ids.append([(source, rank) for rank in range(len(hits))])
        by_id.update({(source, rank): hit for rank, hit in enumerate(hits)})
    seen: set[str] = set()
    fused: list[ArchiveHit] = []
    for ident in fused_order(ids):
        hit = by_id[ident]
        text = archived_text(hit.message)
        if text not in seen:  # the same message archived in two places is shown once
            seen.add(text)
            fused.append(hit)
    return fused[:limit]


# --- stdio: one local store and tenant --------------------------------------------------------


def local_scope(
    store: AsyncSessionStore,
    tenant: str,
    *,
    user: str = _DEFAULT_USER,
    archive: JsonlArchive | None = None,
) -> Resolve:
    """The resolver of a local server: every call acts in ``tenant`` over ``store`` (recall is
    hybrid when the store has an embedder)."""
    scope = Scope(
        tenant=tenant,
        store=store,
        memory=AsyncSessionMemory(
            store=store,
            summarizer=None,
            recall_mode="keyword" if store.embedder_id is None else "hybrid",
        ),
        default_user=user,
        archive=archive,
    )

    async def resolve(ctx: Context) -> Scope:
        return scope

    return resolve


# --- streamable HTTP: mounted in the service ---------------------------------------------------


def mount(app: FastAPI, path: str = "/mcp") -> None:
    """Serve the tools over streamable HTTP at ``path`` of the service's app.

    Each request is authenticated as the REST API's are (a bearer key; 401 otherwise) and
    acts in the key's tenant. The MCP session manager runs inside the app's lifespan.
    """
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    server = build_server(_service_scope)
    # Stateless, JSON answers: any replica serves any request. Every request carries a bearer
    # key, so the SDK's DNS-rebinding guard for unauthenticated local servers is not needed.
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    handler = StreamableHTTPASGIApp(server.session_manager)
    app.router.routes.append(
        Route(path, endpoint=_Authenticated(handler), methods=["GET", "POST", "DELETE"])
    )
    started = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> Any:
        async with started(application) as state, server.session_manager.run():
            yield state

    app.router.lifespan_context = lifespan


_TENANT: Final = "synopsis.tenant"


class _Authenticated:
    """The MCP endpoint behind the REST API's key check; the tenant goes in the ASGI scope."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from fastapi import Request
        from fastapi.security import HTTPBearer

        from synopsis.server.deps import tenant_of

        request = Request(scope, receive)
        credentials = await HTTPBearer(auto_error=False)(request)
        tenant = await tenant_of(request, credentials)  # Unauthorized -> the REST API's 401
        scope.setdefault("state", {})[_TENANT] = tenant
        await self.app(scope, receive, send)


async def _service_scope(ctx: Context) -> Scope:
    from synopsis.server.deps import services

    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state", {})
    tenant = state.get(_TENANT)
    if not isinstance(tenant, str):  # pragma: no cover - every request passes _Authenticated
        raise ToolError("unauthenticated request")
    found = services(request)  # type: ignore[arg-type]

    async def covered(tenant: str, user: str, session: str) -> Sequence[dict[str, Any]]:
        if await found.histories.owned(tenant, user, session) is None:
            return []
        latest = await found.store.latest_summary(tenant, user, session)
        if latest is None:
            return []
        history = await found.histories.history(tenant, session)
        return history[: latest.covers_to]

    return Scope(
        tenant=tenant,
        store=found.store,
        memory=found.memory,
        redact=found.redact,
        covered_history=covered,
    )
