"""OpenAI Agents SDK: a ``Session`` that keeps its items in a synopsis store and compacts them.

::

    from agents import Agent, Runner
    from synopsis import AsyncCompactor
    from synopsis.adapters.openai_agents import SynopsisSession
    from synopsis.memory import SQLiteStore

    session = SynopsisSession(
        "chat-42", store=SQLiteStore("agents.db"), tenant="acme", user_id="u-7",
        compactor=AsyncCompactor(model="openai:gpt-4o-mini", trigger_tokens=100_000, keep_tail=8),
    )
    result = await Runner.run(agent, "hello", session=session, run_config=session.run_config())

:class:`SynopsisSession` implements the SDK's ``Session`` protocol (``get_items``,
``add_items``, ``pop_item``, ``clear_session``) as the SDK's own ``SQLiteSession`` does, on any
synopsis store, sync or async (a sync store and a sync compactor run in worker threads).

**Compaction.** The runner loads a session's history with ``get_items()`` before a run. When
the items then cross the compactor's trigger, they are converted to chat messages
(:func:`synopsis.convert.from_responses_items`; a turn's reasoning, text and ``function_call``
items make one assistant message, each ``function_call_output`` a tool message), compacted,
and converted back: the items the compactor kept are returned exactly as they were stored (ids,
statuses, reasoning), a tool call is never separated from its output, and the summary is a user
message marked ``<synopsis:summary>``. The compacted list replaces the stored one. A read with a
``limit`` only reads the newest stored items: the SDK uses such reads to check what it wrote,
and a compaction must not move them. (So do not set ``SessionSettings(limit=...)`` on a
compacting session: the runner then never loads the whole history.) The Responses items carry
no provider usage, so the trigger counts by estimate.

**Every model call.** Within one ``Runner.run`` the agent's tool calls and their outputs pile
up after the history without passing through the session, so a run of many tool calls can
outgrow the trigger after ``get_items``. :meth:`SynopsisSession.run_config` (or
``RunConfig(call_model_input_filter=session.call_model_input_filter)``) bounds every call: the
filter compacts the model's input when it crosses the trigger, and carries the compacted
prefix over to the next call of the run (only what came after it is added, and compacted
again when the trigger fires again), so one summary is written per crossing, not per call.
What the filter compacts is only what the model is sent; the session stores the run's items
as the runner gives them, and compacts them on the next ``get_items``.

**Storage.** Everything lives under the namespace ``("user", user_id, "agents", session_id)``
of the tenant, so ``store.delete_user`` erases it with the rest of the user's data. There, a
``head`` memory (kind ``agents_session``) holds the session's generation and the range of item
numbers in use; each item is one memory (kind ``agents_item``, its JSON as the text) in the
namespace of its generation, ``(..., "generation-<n>")``, keyed by its zero-padded number.
Both kinds are :data:`synopsis.memory.TRANSCRIPT_KINDS`: the user's session recall and
``build_context`` never return these items as memories.
One memory per item keeps ``add_items`` O(new items): a read of the head and one
``put_many`` (the new items and the new head, in one transaction), where one memory holding the
list would rewrite the whole history on every turn. A compaction writes the compacted items as
the next generation, in one ``put_many`` with the head; the replaced generation stays in the
store untouched, so nothing is lost (:meth:`SynopsisSession.generations` reads them back).
``clear_session`` deletes every generation. Operations on one session object run one at a
time; two processes must not write the same session at once (the head is read, then
written).

**Searching the archive.** :func:`search_history_tool` gives the agent the compactor's archive
as a ``search_history`` function tool (``Agent(..., tools=[search_history_tool(compactor)])``);
the summary's pointer to the archive then names it. A bad call is answered ``Error: ...`` for
the model to correct.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from synopsis._flow import Flow, StoreCall, adrive
from synopsis.adapters._carried import reattach, split_carried
from synopsis.compaction import AsyncCompactor, CompactionResult, Compactor
from synopsis.compaction.history import DESCRIPTION, SEARCH_HISTORY, history_tool
from synopsis.convert import from_responses_items, to_responses_items
from synopsis.errors import ConfigError, InvalidInput, StoreError
from synopsis.memory import (
    AsyncMemoryStore,
    MemoryItem,
    MemoryStore,
    Namespace,
    NewMemory,
    normalize_namespace,
)
from synopsis.memory.kinds import AGENTS_ITEM_KIND, AGENTS_SESSION_KIND
from synopsis.memory.rules import validate_tenant

if TYPE_CHECKING:
    from agents import FunctionTool, RunConfig
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run import CallModelData, ModelInputData

__all__ = [
    "HEAD_KIND",
    "ITEM_KIND",
    "SynopsisSession",
    "search_history_tool",
    "session_namespace",
]

#: Kind of the memory holding one session item (one of ``synopsis.memory.TRANSCRIPT_KINDS``).
ITEM_KIND: Final = AGENTS_ITEM_KIND
#: Kind of the memory holding a session's head (generation and item range); a transcript kind.
HEAD_KIND: Final = AGENTS_SESSION_KIND
_HEAD_KEY: Final = "head"
_KEY_DIGITS: Final = 12
_PAGE: Final = 1000  # the stores' largest page
_HEAD_ARGS: Final = {"kind": HEAD_KIND}

Item = dict[str, Any]


def session_namespace(user_id: str, session_id: str) -> Namespace:
    """Where a session's head lives; its items live one label deeper, per generation."""
    return normalize_namespace(("user", user_id, "agents", session_id))


# ---------------------------------------------------------------------------------------------
# Values and steps


@dataclass(frozen=True, slots=True)
class _Head:
    """The live items are numbers ``first .. next - 1`` of generation ``generation``."""

    generation: int = 0
    first: int = 0
    next: int = 0

    @property
    def count(self) -> int:
        return self.next - self.first

    @classmethod
    def parse(cls, item: MemoryItem | None) -> _Head:
        if item is None:
            return cls()
        try:
            data = json.loads(item.text)
            head = cls(int(data["generation"]), int(data["first"]), int(data["next"]))
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"unreadable agents session head in {item.namespace}") from exc
        if not 0 <= head.first <= head.next or head.generation < 0:
            raise StoreError(f"inconsistent agents session head in {item.namespace}")
        return head

    def text(self) -> str:
        return json.dumps({"generation": self.generation, "first": self.first, "next": self.next})


@dataclass(frozen=True, slots=True)
class _Address:
    tenant: str
    namespace: Namespace

    def generation(self, number: int) -> Namespace:
        return (*self.namespace, f"generation-{number}")

    def head(self, head: _Head) -> NewMemory:
        return NewMemory(self.namespace, _HEAD_KEY, head.text(), kind=HEAD_KIND)

    def items(self, generation: int, start: int, items: Sequence[Item]) -> list[NewMemory]:
        namespace = self.generation(generation)
        return [
            NewMemory(namespace, _key(start + offset), _encode(item), kind=ITEM_KIND)
            for offset, item in enumerate(items)
        ]


@dataclass(frozen=True, slots=True)
class _Compact:
    """Compact ``messages`` if the trigger fires; the flow is sent the CompactionResult."""

    messages: tuple[dict[str, Any], ...]


_Step = StoreCall | _Compact


def _key(number: int) -> str:
    return f"{number:0{_KEY_DIGITS}d}"


def _encode(item: Item) -> str:
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: stores take only valid UTF-8, JSON escapes do
        text = json.dumps(item, separators=(",", ":"))
    return text


def _decode(item: MemoryItem) -> Item | None:
    """The stored item, or None when its text is not a JSON object (skipped, as the SDK does)."""
    try:
        value = json.loads(item.text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------------------
# Flows: each operation written once, pure; the session only carries out the steps


def _read_head(at: _Address) -> Flow[_Step, _Head]:
    item: MemoryItem | None = yield StoreCall("get", (at.tenant, at.namespace, _HEAD_KEY))
    return _Head.parse(item)


def _read_generation(at: _Address, generation: int) -> Flow[_Step, list[tuple[int, Item]]]:
    """Every item of ``generation``, numbered, in order."""
    found: list[tuple[int, Item]] = []
    offset = 0
    while True:
        kwargs = {"kind": ITEM_KIND, "limit": _PAGE, "offset": offset}
        hits = yield StoreCall("search", (at.tenant, at.generation(generation)), kwargs)
        for hit in hits:
            item = _decode(hit.item)
            if item is not None and hit.item.key.isdigit():
                found.append((int(hit.item.key), item))
        if len(hits) < _PAGE:
            return sorted(found, key=lambda pair: pair[0])
        offset += _PAGE


def _read_live(at: _Address, head: _Head) -> Flow[_Step, list[Item]]:
    numbered = yield from _read_generation(at, head.generation)
    # Numbers outside the range are leftovers of an interrupted pop: not part of the history.
    return [item for number, item in numbered if head.first <= number < head.next]


def _read_newest(at: _Address, head: _Head, limit: int) -> Flow[_Step, list[Item]]:
    """The newest ``limit`` items, one point read each (the SDK reads a few to check a write)."""
    namespace = at.generation(head.generation)
    items: list[Item] = []
    for number in range(max(head.first, head.next - limit), head.next):
        stored: MemoryItem | None = yield StoreCall("get", (at.tenant, namespace, _key(number)))
        if stored is not None and (item := _decode(stored)) is not None:
            items.append(item)
    return items


def _get_items(at: _Address, limit: int | None, compacting: bool) -> Flow[_Step, list[Item]]:
    head = yield from _read_head(at)
    if limit is not None and limit >= 0:
        return (yield from _read_newest(at, head, limit)) if limit else []
    items = yield from _read_live(at, head)
    if not compacting or limit is not None:
        return items
    compacted = yield from _compacted(items)
    if compacted is None:
        return items
    new = _Head(head.generation + 1, head.next, head.next + len(compacted))
    batch = [*at.items(new.generation, new.first, compacted), at.head(new)]
    yield StoreCall("put_many", (at.tenant, batch))
    return compacted


def _compacted(items: list[Item]) -> Flow[_Step, list[Item] | None]:
    """The items compacted, or None when the trigger did not fire (or nothing was worth it)."""
    plain, carried = split_carried(from_responses_items(items, keep_extras=True))
    result: CompactionResult = yield _Compact(tuple(plain))
    if not result.compacted:
        return None
    return to_responses_items(reattach(result.messages, plain, carried))


@dataclass(frozen=True, slots=True)
class _Filtered:
    items: list[Item]
    remember: bool  # what the next call of the run can start from


def _filtered(
    items: list[Item], sent: tuple[list[Item], list[Item]] | None
) -> Flow[_Step, _Filtered]:
    """One model call's input: the last compaction's result for the part it covered, then
    what came after, compacted when the whole crosses the trigger."""
    candidate = items
    if sent is not None and len(items) >= len(sent[0]) and items[: len(sent[0])] == sent[0]:
        candidate = [*sent[1], *items[len(sent[0]) :]]
    compacted = yield from _compacted(candidate)
    if compacted is None:
        return _Filtered(candidate, remember=candidate is not items)
    return _Filtered(compacted, remember=True)


def _add_items(at: _Address, items: Sequence[Item]) -> Flow[_Step, None]:
    if not items:
        return
    head = yield from _read_head(at)
    new = _Head(head.generation, head.first, head.next + len(items))
    batch = [*at.items(head.generation, head.next, items), at.head(new)]
    yield StoreCall("put_many", (at.tenant, batch))


def _pop_item(at: _Address) -> Flow[_Step, Item | None]:
    head = yield from _read_head(at)
    namespace = at.generation(head.generation)
    while head.count:
        key = _key(head.next - 1)
        stored: MemoryItem | None = yield StoreCall("get", (at.tenant, namespace, key))
        head = _Head(head.generation, head.first, head.next - 1)
        # The head moves first: if the delete is lost, the item is outside the range (unseen).
        yield StoreCall("put", (at.tenant, at.namespace, _HEAD_KEY, head.text()), _HEAD_ARGS)
        yield StoreCall("delete", (at.tenant, namespace, key))
        item = _decode(stored) if stored is not None else None
        if item is not None:
            return item
    return None


def _clear(at: _Address) -> Flow[_Step, None]:
    head = yield from _read_head(at)
    # An empty range in a new generation first: whatever the deletes leave behind is unseen.
    empty = _Head(head.generation + 1, head.next, head.next)
    yield StoreCall("put", (at.tenant, at.namespace, _HEAD_KEY, empty.text()), _HEAD_ARGS)
    for generation in range(head.generation + 1):
        yield from _delete_generation(at, generation)


def _delete_generation(at: _Address, generation: int) -> Flow[_Step, None]:
    namespace = at.generation(generation)
    while True:
        kwargs = {"kind": ITEM_KIND, "limit": _PAGE}
        hits = yield StoreCall("search", (at.tenant, namespace), kwargs)
        for hit in hits:
            yield StoreCall("delete", (at.tenant, namespace, hit.item.key))
        if len(hits) < _PAGE:
            return


def _generations(at: _Address) -> Flow[_Step, list[list[Item]]]:
    head = yield from _read_head(at)
    history: list[list[Item]] = []
    for generation in range(head.generation):
        numbered = yield from _read_generation(at, generation)
        history.append([item for _, item in numbered])
    history.append((yield from _read_live(at, head)))
    return history


# ---------------------------------------------------------------------------------------------
# The session


class SynopsisSession:
    """An Agents SDK session in a synopsis store, compacted by ``compactor``. See the module.

    ``store`` is any synopsis memory store, sync or async; ``tenant`` and ``user_id`` scope
    every call. ``compactor`` (a :class:`~synopsis.Compactor` or
    :class:`~synopsis.AsyncCompactor`) compacts the history when the runner loads it; without
    one the session only stores. ``session_settings`` is the SDK's ``SessionSettings``.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        store: MemoryStore | AsyncMemoryStore,
        tenant: str,
        user_id: str,
        compactor: Compactor | AsyncCompactor | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if compactor is not None and not isinstance(compactor, Compactor | AsyncCompactor):
            kind = type(compactor).__name__
            raise ConfigError(f"compactor must be a Compactor or an AsyncCompactor, got {kind}")
        self.session_id = session_id
        self.session_settings = session_settings
        self.store = store
        self.compactor = compactor
        self._at = _Address(validate_tenant(tenant), session_namespace(user_id, session_id))
        self._lock = asyncio.Lock()
        # The filter's last compaction: the input it compacted and what it sent instead.
        self._sent: tuple[list[Item], list[Item]] | None = None

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` (with ``options``) whose model calls are bounded by this session's
        compactor: pass it to ``Runner.run(..., session=session, run_config=...)``."""
        from agents import RunConfig

        return RunConfig(call_model_input_filter=self.call_model_input_filter, **options)

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: the model's input, compacted when it crosses
        the trigger (see the module docstring); unchanged without a compactor."""
        from agents.run import ModelInputData

        given = data.model_data
        if self.compactor is None:
            return given
        items = [dict(item) for item in given.input]
        async with self._lock:
            sent = await adrive(_filtered(items, self._sent), self._perform)
        if sent.remember:
            self._sent = (items, sent.items)
        return ModelInputData(input=_as_items(sent.items), instructions=given.instructions)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first, compacted first when it crossed the trigger; with a
        ``limit``, the newest ``limit`` stored items (never compacted)."""
        items = await self._run(_get_items(self._at, limit, self.compactor is not None))
        return _as_items(items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items``: one read and one transaction, whatever the history's length."""
        await self._run(_add_items(self._at, [dict(item) for item in items]))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; None when the session is empty."""
        item = await self._run(_pop_item(self._at))
        return None if item is None else _as_items([item])[0]

    async def clear_session(self) -> None:
        """Delete every item of the session, the replaced generations included."""
        await self._run(_clear(self._at))

    async def generations(self) -> list[list[TResponseInputItem]]:
        """Every generation of the history, oldest first; the last is the live one. Each
        earlier generation is the history as it was when a compaction replaced it."""
        return [_as_items(items) for items in await self._run(_generations(self._at))]

    async def _run(self, flow: Flow[_Step, Any]) -> Any:
        async with self._lock:
            return await adrive(flow, self._perform)

    async def _perform(self, step: _Step) -> Any:
        if isinstance(step, _Compact):
            return await self._compact(list(step.messages))
        method = getattr(self.store, step.method)
        return await _call(method, *step.args, **step.kwargs)

    async def _compact(self, messages: list[dict[str, Any]]) -> CompactionResult:
        if isinstance(self.compactor, AsyncCompactor):
            return await self.compactor.compact(messages, force=False)
        if self.compactor is None:  # pragma: no cover - the flow asks only when there is one
            raise AssertionError("compaction without a compactor")
        return await asyncio.to_thread(self.compactor.compact, messages, force=False)


async def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Await an async store's method; run a sync store's in a worker thread."""
    if inspect.iscoroutinefunction(method):
        return await method(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


def _as_items(items: list[Item]) -> list[TResponseInputItem]:
    return cast("list[TResponseInputItem]", items)  # stored items are the SDK's JSON items


def search_history_tool(
    compactor: Compactor | AsyncCompactor,
    *,
    name: str = SEARCH_HISTORY,
    description: str = DESCRIPTION,
    max_chars: int = 6_000,
) -> FunctionTool:
    """An Agents SDK function tool searching what ``compactor`` archived of its session.

    The compactor's summaries name the tool from then on (see
    :func:`synopsis.compaction.history.history_tool`); its archive must be searchable.
    """
    from agents import FunctionTool

    found = history_tool(compactor, name=name, description=description, max_chars=max_chars)

    async def invoke(context: Any, arguments: str) -> str:
        try:
            query, limit = found.arguments({"function": {"arguments": arguments}})
            return await found.arun(query, limit)
        except InvalidInput as exc:
            return f"Error: {exc}"

    return FunctionTool(
        name=found.name,
        description=found.description,
        params_json_schema=found.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
