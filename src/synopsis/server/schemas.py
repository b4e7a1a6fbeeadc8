"""The HTTP shapes (pydantic lives here and nowhere else in synopsis).

Requests are checked here for shape (types, ranges); the library checks meaning (tool-call
pairing, namespaces) and its errors name the field too. Responses are built from the library's
frozen values by the ``from_*`` helpers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from synopsis import CompactionResult
from synopsis.memory import SearchHit

__all__ = [
    "AppendRequest",
    "AppendResponse",
    "ChatCompletionRequest",
    "CompactReport",
    "CompactRequest",
    "CompactResponse",
    "ContextResponse",
    "DeleteUserResponse",
    "ErrorBody",
    "Health",
    "IssuedKeyOut",
    "KeyIn",
    "KeyList",
    "KeyOut",
    "MemoryIn",
    "MemoryOut",
    "Message",
    "Readiness",
    "SearchResponse",
    "SummaryList",
    "SummaryOut",
]


def _no_surrogates(text: str) -> str:
    """JSON can spell lone surrogates (``"\\ud800"``); no database can store them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return text


#: Any text a database can store.
Text = Annotated[str, AfterValidator(_no_surrogates)]
#: An id or label: printable, 1 to 256 characters.
Label = Annotated[
    str,
    Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$"),
    AfterValidator(_no_surrogates),
]
Count = Annotated[int, Field(ge=0, le=10_000_000)]


class ErrorDetail(BaseModel):
    """``type`` is the library's exception name; extra fields (``field``, ``index``) say where."""

    model_config = ConfigDict(extra="allow")
    type: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


#: The most text (characters over every string, keys included) one message may carry.
MAX_MESSAGE_CHARS = 4_000_000
#: How deep one message's values may nest (``meta``, content parts, tool-call arguments).
MAX_MESSAGE_DEPTH = 32


_SCALARS = (int, float, bool, type(None))


def _flat_checked(message: dict[Any, Any]) -> bool:
    """The common message, checked in one loop: string keys, and values that are strings or
    scalars (its depth is 1). False when a value nests: then the full walk decides."""
    size = 0
    for key, item in message.items():
        if isinstance(item, str):
            size += len(item)
            if not item.isascii():
                _no_surrogates(item)
        elif not isinstance(item, _SCALARS):
            return False
        if isinstance(key, str):
            size += len(key)
            if not key.isascii():
                _no_surrogates(key)
    if size > MAX_MESSAGE_CHARS:
        raise ValueError(f"a message may hold at most {MAX_MESSAGE_CHARS} characters")
    return True


def check_message_values(value: Any) -> None:
    """Refuse a message no store can keep or no response can carry: a lone surrogate
    anywhere, more than :data:`MAX_MESSAGE_CHARS` of text or :data:`MAX_MESSAGE_DEPTH` levels.
    One pass over the values, without recursion."""
    if isinstance(value, dict) and _flat_checked(value):
        return
    size = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_MESSAGE_DEPTH:
            raise ValueError(f"a message may nest at most {MAX_MESSAGE_DEPTH} levels deep")
        if isinstance(item, str):
            size += len(item)
            if not item.isascii():
                _no_surrogates(item)
        elif isinstance(item, dict):
            pending.extend((key, depth + 1) for key in item)
            pending.extend((entry, depth + 1) for entry in item.values())
        elif isinstance(item, list):
            pending.extend((entry, depth + 1) for entry in item)
        if size > MAX_MESSAGE_CHARS:
            raise ValueError(f"a message may hold at most {MAX_MESSAGE_CHARS} characters")


#: The roles a message may have.
Role = Literal["system", "developer", "user", "assistant", "tool"]
#: The most messages one request may carry.
MAX_MESSAGES: Final = 100_000


class Message(BaseModel):
    """An OpenAI chat-completions message; other fields are kept as sent."""

    model_config = ConfigDict(extra="allow")
    role: Role
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        check_message_values(data)
        return data


Messages = Annotated[list[Message], Field(max_length=MAX_MESSAGES)]


class CompactRequest(BaseModel):
    """Stateless compaction; without a trigger of its own, the server's trigger applies."""

    messages: Messages
    trigger_tokens: Count | None = None
    trigger_messages: Count | None = None
    keep_tail: Count = 0
    #: Compact even if no trigger fires.
    force: bool = False
    redact: bool = Field(
        default=False,
        description="Take secrets and personal data out of the summarizer's request and the "
        "response (the server's redaction mode). It can turn redaction on, never off: with "
        "the server's policy on, every request is redacted.",
    )


class CompactReport(BaseModel):
    triggered: bool
    compacted: bool
    reason: str | None
    tokens_before: int
    tokens_after: int
    model: str | None
    attempts: int
    skipped: str | None
    fallback: str | None
    error: dict[str, Any] | None
    #: Values redacted, by kind (never the values); empty when redaction is off.
    redacted: dict[str, int] = Field(default_factory=dict)


class CompactResponse(BaseModel):
    messages: list[dict[str, Any]]
    report: CompactReport


class AppendRequest(BaseModel):
    messages: Annotated[list[Message], Field(min_length=1, max_length=10_000)]


class AppendResponse(BaseModel):
    user_id: str
    session_id: str
    #: The session's length after the append.
    messages: int
    appended: int
    #: A background summary was queued (it runs on any replica).
    summary_scheduled: bool
    #: Messages not covered by the latest summary.
    pending_messages: int


class ContextResponse(BaseModel):
    """The messages to send to the model next: system prompt with the summary, [notes], window."""

    messages: list[dict[str, Any]]
    summary_version: int | None


class SummaryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    version: int
    text: str
    covers_from: int
    covers_to: int
    model: str
    content_hash: str
    created_at: datetime | None


class SummaryList(BaseModel):
    summaries: list[SummaryOut]


class MemoryIn(BaseModel):
    """A long-term memory; ``namespace`` as a list of labels or ``"a/b/c"``."""

    namespace: Annotated[list[Label], Field(min_length=1, max_length=16)] | Label
    #: Default: derived from kind and text, so putting the same memory twice is one memory.
    key: Label | None = None
    text: Annotated[Text, Field(max_length=1_000_000)]
    kind: Label = "note"
    tags: dict[Label, Text] = Field(default_factory=dict, max_length=64)
    #: Seconds until the memory expires.
    ttl: Annotated[float, Field(gt=0, le=1e10)] | None = None
    #: Words to find the memory by besides its text (e.g. the chat turns around it), indexed
    #: at half the weight of the text.
    context: Annotated[Text, Field(max_length=1_000_000)] = ""


class MemoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    namespace: list[str]
    key: str
    text: str
    kind: str
    tags: dict[str, str]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    context: str = ""


class Hit(BaseModel):
    memory: MemoryOut
    #: Higher is better; null when no query was given (newest first).
    score: float | None


class SearchResponse(BaseModel):
    hits: list[Hit]


class DeleteUserResponse(BaseModel):
    user_id: str
    #: Memories, summaries and outbox entries removed from the store.
    deleted: int
    #: Session histories removed from the server.
    sessions: int


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready"]
    database: Literal["sqlite", "postgres"]
    schema_version: int


class KeyIn(BaseModel):
    """A tenant key to create (admin API)."""

    tenant: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$")]
    label: Annotated[str, Field(max_length=200, pattern=r"^[^\x00-\x1f]*$")] = ""
    #: Seconds from now until the key stops working (none: it never expires).
    expires_in: Annotated[float, Field(gt=0, le=1e10)] | None = None
    #: Requests a minute the key may make on each replica (none: no limit).
    rate_per_minute: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] | None = None


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    key_id: str
    tenant: str
    label: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None
    rate_per_minute: int | None


class IssuedKeyOut(KeyOut):
    #: The key itself: shown once, stored nowhere.
    key: str


class KeyList(BaseModel):
    keys: list[KeyOut]


class ChatCompletionRequest(BaseModel):
    """What the proxy reads of a chat-completions request; the rest is forwarded as sent."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    #: Strict, so a body forwarded as it came means to the upstream what it meant to us.
    stream: Annotated[bool | None, Field(strict=True)] = None


# --- from library values ---------------------------------------------------------------------


def search_response(hits: list[SearchHit]) -> SearchResponse:
    return SearchResponse(
        hits=[Hit(memory=MemoryOut.model_validate(h.item), score=h.score) for h in hits]
    )


def compact_response(result: CompactionResult, messages: list[dict[str, Any]]) -> CompactResponse:
    report = result.report()
    report.pop("archive", None)
    return CompactResponse(messages=messages, report=CompactReport(**report))
