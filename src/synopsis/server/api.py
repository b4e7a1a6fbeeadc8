"""The REST API: compaction, sessions, summaries, memories, recall, delete-user, export.

Every route is scoped by the tenant of the request's API key (:data:`~.deps.Tenant`); paths and
bodies name users, sessions and namespaces *within* that tenant only. Another tenant's object
is simply not there (404).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import StreamingResponse

from synopsis import (
    AsyncCompactor,
    KeepTail,
    NotFound,
    Redactor,
    Trigger,
)
from synopsis._flow import cpu
from synopsis.memory import MemoryItem, normalize_namespace
from synopsis.memory.kinds import MAX_FILTER_KINDS
from synopsis.memory.rules import default_key
from synopsis.redact import redact_history
from synopsis.server.deps import Services, Svc, Tenant
from synopsis.server.errors import ERRORS
from synopsis.server.schemas import (
    AppendRequest,
    AppendResponse,
    CompactRequest,
    CompactResponse,
    ContextResponse,
    DeleteUserResponse,
    Label,
    MemoryIn,
    MemoryOut,
    SearchResponse,
    SummaryList,
    SummaryOut,
    Text,
    compact_response,
    search_response,
)
from synopsis.server.turns import public_messages, record_turn

__all__ = ["router"]

router = APIRouter(responses=ERRORS)
User = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$")]
Session = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f/]+$")]
Query_ = Annotated[Text | None, Query(max_length=10_000)]
Mode = Literal["keyword", "vector", "hybrid"]
Limit = Annotated[int, Query(ge=1, le=100)]
#: A repeatable kind filter (``?kind=fact&kind=note``).
Kinds = Annotated[list[Label] | None, Query(max_length=MAX_FILTER_KINDS)]
_EXPORT_PAGE = 500
# --- compaction ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _compactor_for(
    trigger: Trigger, keep_tail: KeepTail, redact: Redactor | None, summarizer: Any, observe: Any
) -> AsyncCompactor:
    """A compactor with a request's own options (a few distinct ones are kept)."""
    return AsyncCompactor(
        summarizer=summarizer,
        trigger=trigger,
        keep_tail=keep_tail,
        redact=redact,
        on_event=[observe],
    )


def _request_compactor(s: Services, body: CompactRequest) -> AsyncCompactor:
    """The server's compactor, or one with the request's trigger, tail or redaction."""
    redact = s.redact or (s.redactor if body.redact else None)  # on, never off
    own = body.trigger_tokens is not None or body.trigger_messages is not None
    if not (own or body.keep_tail or redact is not s.redact):
        return s.compactor
    trigger = (
        Trigger(tokens=body.trigger_tokens or None, messages=body.trigger_messages or None)
        if own
        else s.options.trigger
    )
    keep_tail = KeepTail(messages=body.keep_tail)
    return _compactor_for(trigger, keep_tail, redact, s.summarizer, s.metrics.observe)


@router.post("/v1/compact", tags=["compaction"], response_model=CompactResponse)
async def compact(body: CompactRequest, tenant: Tenant, s: Svc) -> CompactResponse:
    """Compact a history (stateless): old messages become one structured summary.

    With redaction on (the server's policy, or ``redact`` in the request) the response holds
    no value the redactor finds, below the trigger too (the redacted copy comes back).
    """
    messages = [m.model_dump(exclude_unset=True) for m in body.messages]
    compactor = _request_compactor(s, body)
    result = await compactor.compact(messages, force=body.force)
    redact = compactor.options.redact
    if redact is not None and not result.triggered and not body.force:
        clean, counts = await cpu(functools.partial(redact_history, redact, result.messages))
        result = dataclasses.replace(result, messages=[dict(m) for m in clean], redacted=counts)
    return compact_response(result, public_messages(result.messages))


# --- sessions --------------------------------------------------------------------------------


@router.post(
    "/v1/sessions/{user}/{session}/messages",
    tags=["sessions"],
    status_code=202,
    response_model=AppendResponse,
    responses={409: {"model": ERRORS[404]["model"], "description": "Another user's session."}},
)
async def append_messages(
    user: User, session: Session, body: AppendRequest, tenant: Tenant, s: Svc
) -> AppendResponse:
    """Append turns; every ``summarize_every`` messages a background summary is queued."""
    messages = [m.model_dump(exclude_unset=True) for m in body.messages]
    return await record_turn(s, tenant, (user, session), messages)


async def _owned(s: Services, tenant: str, user: str, session: str) -> None:
    if await s.histories.owned(tenant, user, session) is None:
        raise NotFound(f"user {user!r} has no session {session!r}")


@router.get(
    "/v1/sessions/{user}/{session}/context", tags=["sessions"], response_model=ContextResponse
)
async def context(
    user: User,
    session: Session,
    tenant: Tenant,
    s: Svc,
    system_prompt: Annotated[Text | None, Query(max_length=20_000)] = None,
    query: Query_ = None,
) -> ContextResponse:
    """The messages for the next model call: summary injected, recent window, [recalled notes]."""
    await _owned(s, tenant, user, session)
    history = await s.histories.history(tenant, session)
    built = await s.memory.build_context(
        tenant, user, session, history, system_prompt=system_prompt, query=query
    )
    latest = await s.store.latest_summary(tenant, user, session)
    return ContextResponse(
        messages=public_messages(built), summary_version=latest.version if latest else None
    )


@router.get("/v1/sessions/{user}/{session}/summary", tags=["sessions"], response_model=SummaryOut)
async def summary(user: User, session: Session, tenant: Tenant, s: Svc) -> SummaryOut:
    """The session's latest summary and its version."""
    await _owned(s, tenant, user, session)
    latest = await s.store.latest_summary(tenant, user, session)
    if latest is None:
        raise NotFound(f"session {session!r} has no summary yet")
    return SummaryOut.model_validate(latest)


@router.get(
    "/v1/sessions/{user}/{session}/summaries", tags=["sessions"], response_model=SummaryList
)
async def summaries(user: User, session: Session, tenant: Tenant, s: Svc) -> SummaryList:
    """Every version of the session's summary, oldest first."""
    await _owned(s, tenant, user, session)
    history = await s.store.summary_history(tenant, user, session)
    return SummaryList(summaries=[SummaryOut.model_validate(v) for v in history])


# --- memories --------------------------------------------------------------------------------


def _policy(s: Services, value: str) -> str:
    """``value`` as the server's redaction policy stores it (itself when the policy is off)."""
    return value if s.redact is None else s.redact.redact_text(value).text


@router.post("/v1/memories", tags=["memories"], status_code=201, response_model=MemoryOut)
async def put_memory(body: MemoryIn, tenant: Tenant, s: Svc) -> MemoryOut:
    """Insert or replace a long-term memory (redacted first when the server's policy is on:
    its text, context, key and tags; the namespace is an address, kept as it is)."""
    text, context = body.text, body.context
    key, tags = body.key, body.tags
    if s.redact is not None:
        text, context = _policy(s, text), _policy(s, context)
        key = None if key is None else _policy(s, key)
        tags = {_policy(s, name): _policy(s, value) for name, value in tags.items()}
    item = await s.store.put(
        tenant,
        body.namespace,
        key or default_key(body.kind, text),
        text,
        kind=body.kind,
        tags=tags,
        ttl=body.ttl,
        context=context,
    )
    return MemoryOut.model_validate(item)


@router.get("/v1/memories/search", tags=["memories"], response_model=SearchResponse)
async def search_memories(
    tenant: Tenant,
    s: Svc,
    namespace_prefix: Annotated[Text, Query(max_length=4096)] = "",
    q: Query_ = None,
    kind: Kinds = None,
    exclude_kind: Kinds = None,
    limit: Limit = 10,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
    mode: Mode = "keyword",
) -> SearchResponse:
    """Memories under a namespace prefix (``a/b``), ranked by ``q`` or newest first.

    ``kind`` (repeatable): only these kinds; ``exclude_kind`` (repeatable): never these.
    """
    prefix = normalize_namespace(namespace_prefix, allow_empty=True)
    hits = await s.store.search(
        tenant,
        prefix,
        query=q,
        kind=kind,
        exclude_kinds=exclude_kind or (),
        limit=limit,
        offset=offset,
        mode=mode,
    )
    return search_response(hits)


_ADDRESS = "/v1/memories/{namespace:path}/{key}"


@router.get(_ADDRESS, tags=["memories"], response_model=MemoryOut)
async def get_memory(namespace: str, key: str, tenant: Tenant, s: Svc) -> MemoryOut:
    """One memory by namespace (``a/b/c``) and key."""
    item = await s.store.get(tenant, normalize_namespace(namespace), _policy(s, key))
    if item is None:
        raise NotFound(f"no memory {key!r} in {namespace!r}")
    return MemoryOut.model_validate(item)


@router.delete(_ADDRESS, tags=["memories"], status_code=204, response_class=Response)
async def delete_memory(namespace: str, key: str, tenant: Tenant, s: Svc) -> Response:
    """Delete one memory."""
    if not await s.store.delete(tenant, normalize_namespace(namespace), _policy(s, key)):
        raise NotFound(f"no memory {key!r} in {namespace!r}")
    return Response(status_code=204)


# --- users -----------------------------------------------------------------------------------


@router.get("/v1/users/{user}/recall", tags=["users"], response_model=SearchResponse)
async def recall(
    user: User,
    tenant: Tenant,
    s: Svc,
    q: Annotated[Text, Query(min_length=1, max_length=10_000)],
    limit: Limit = 10,
    kind: Kinds = None,
    exclude_kind: Kinds = None,
    mode: Mode | None = None,
) -> SearchResponse:
    """Recall over every memory of the user, across all their sessions.

    ``kind`` (repeatable): only these kinds. ``exclude_kind`` (repeatable): never these;
    without it, stored transcripts (an agents session's items) are left out unless ``kind``
    asks for them.
    """
    hits = await s.memory.recall(
        tenant, user, q, limit=limit, kind=kind, exclude_kinds=exclude_kind, mode=mode
    )
    return search_response(hits)


@router.delete("/v1/users/{user}", tags=["users"], response_model=DeleteUserResponse)
async def delete_user(user: User, tenant: Tenant, s: Svc) -> DeleteUserResponse:
    """Delete everything of the user: memories, summaries, outbox entries, session histories."""
    sessions = await s.histories.delete_user(tenant, user)
    deleted = await s.memory.delete_user(tenant, user)
    return DeleteUserResponse(user_id=user, deleted=deleted, sessions=sessions)


def _export_line(item: MemoryItem) -> str:
    """One memory in the shape ``synopsis memory import`` reads."""
    record = {
        "namespace": list(item.namespace),
        "kind": item.kind,
        "text": item.text,
        "key": item.key,
        "tags": dict(item.tags),
    }
    return json.dumps(record, ensure_ascii=False) + "\n"


@router.get(
    "/v1/export",
    tags=["memories"],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}},
)
async def export(
    tenant: Tenant, s: Svc, namespace_prefix: Annotated[Text, Query(max_length=4096)] = ""
) -> StreamingResponse:
    """Every memory of the tenant as JSON Lines (streamed; ``synopsis memory import`` reads it)."""
    prefix = normalize_namespace(namespace_prefix, allow_empty=True)

    async def lines() -> AsyncIterator[str]:
        offset = 0
        while True:
            hits = await s.store.search(tenant, prefix, limit=_EXPORT_PAGE, offset=offset)
            for hit in hits:
                yield _export_line(hit.item)
            if len(hits) < _EXPORT_PAGE:
                return
            offset += _EXPORT_PAGE

    return StreamingResponse(lines(), media_type="application/x-ndjson")
