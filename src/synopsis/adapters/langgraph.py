"""LangGraph: a ``BaseStore`` over any synopsis store, and a compacting pre-model hook.

:class:`SynopsisStore` gives a LangGraph graph (``compile(store=...)``, ``create_agent(...,
store=...)``) a tenant-scoped store with CJK-aware keyword search, and vector or hybrid search
when the synopsis store has an embedder. Every operation runs in the one tenant the adapter
was built with; two adapters with different tenants over one store never see each other's
items. Items are stored as described in :mod:`synopsis.adapters._langgraph_items`; memories
synopsis writes itself (session summaries) are visible, too, but ``search`` never returns
stored transcripts (:data:`synopsis.memory.TRANSCRIPT_KINDS`, such as the items of an OpenAI
Agents session kept under the same user), which are not memories.

Mapping of LangGraph's API: ``get``, ``put`` (``index=[paths]`` picks the searched fields,
``index=False`` makes an item unsearchable by query), ``delete``, ``search`` (``query`` ranks by
BM25, or by the ``mode`` given; ``filter`` with LangGraph's operators; ``limit``/``offset``),
``list_namespaces`` (prefix, suffix, ``"*"`` wildcards, ``max_depth``, paging). ``ttl`` is in
minutes, as in LangGraph, and counts from the last write: reads do not refresh it
(``ttl_config`` says ``refresh_on_read: False``). A query matches only items that share a term
with it; without a query, results come newest first.

``batch`` needs a sync synopsis store; ``abatch`` takes either (a sync store runs in a worker
thread). Both drive one flow of store calls (:func:`run_ops`), in the order of the ops;
consecutive puts go to the store as one ``put_many`` (one transaction).

:func:`pre_model_hook` is the compaction node for any graph with a ``messages`` state, put
before its model node (LangGraph's prebuilt ``create_react_agent`` is deprecated since 1.0;
``langchain.agents.create_agent`` takes :class:`~synopsis.adapters.langchain.CompactionMiddleware`).
:func:`search_history_tool` gives the agent the hook's compactor's archive as a
``search_history`` tool (a LangChain tool, for a ``ToolNode``), and the summary's pointer to
the archive then names it.

Needs ``synopsis[langgraph]``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, get_args

from langchain_core.runnables import RunnableLambda
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from synopsis._flow import Flow, StoreCall, adrive, drive
from synopsis.adapters._langgraph_items import (
    encode_value,
    literal_prefix,
    matches,
    namespace_matches,
    split_filter,
    value_of,
)
from synopsis.adapters._lc_tool import search_history_tool
from synopsis.adapters._state import (
    acompact_messages,
    check_compactor,
    compact_messages,
    replace_all,
)
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory import (
    TRANSCRIPT_KINDS,
    AsyncMemoryStore,
    MemoryItem,
    MemoryStore,
    Namespace,
    NewMemory,
    SearchHit,
    SearchMode,
)
from synopsis.memory.rules import MAX_LIMIT, check_tenant

__all__ = ["StoreCall", "SynopsisStore", "pre_model_hook", "run_ops", "search_history_tool"]

_MINUTE: Final = 60.0


# --- the store -------------------------------------------------------------------------------


class SynopsisStore(BaseStore):
    """A LangGraph store over ``store`` (any synopsis memory store, sync or async), in ``tenant``.

    ``kind`` is the memory kind of items put through it. ``fields`` are the default paths whose
    text is searched (default: every string and number of the value). ``mode`` is the search
    mode for queries (``"vector"`` and ``"hybrid"`` need a store built with an embedder).
    ``ttl`` takes LangGraph's ``TTLConfig``: ``default_ttl`` (minutes) applies to ``put``s that
    give none; expiry counts from the last write, so ``refresh_on_read`` cannot be true. The
    adapter never closes ``store``; its owner does.
    """

    supports_ttl = True

    def __init__(
        self,
        store: MemoryStore | AsyncMemoryStore,
        *,
        tenant: str,
        kind: str = "note",
        fields: Sequence[str] | None = None,
        mode: SearchMode = "keyword",
        ttl: TTLConfig | None = None,
    ) -> None:
        if not callable(getattr(store, "search", None)):
            raise ConfigError(f"expected a synopsis memory store, got {type(store).__name__}")
        if not isinstance(kind, str) or not kind:
            raise ConfigError("kind must be a non-empty string")
        if mode not in get_args(SearchMode):
            raise ConfigError(f"mode must be one of {', '.join(get_args(SearchMode))}")
        self.store = store
        self.plan = StorePlan(
            tenant=check_tenant(tenant),
            kind=kind,
            fields=None if fields is None else tuple(fields),
            mode=mode,
        )
        self.ttl_config = _ttl_config(ttl)
        self._async = inspect.iscoroutinefunction(store.search)

    @property
    def tenant(self) -> str:
        return self.plan.tenant

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order on a sync store."""
        if self._async:
            raise ConfigError(
                "this SynopsisStore wraps an async store: use the async API (abatch, aget, "
                "asearch, aput; a graph's ainvoke and async nodes), or wrap a sync store"
            )
        return drive(run_ops(self.plan, ops), lambda call: call.on(self.store))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; a sync store is called in a worker thread."""
        ops = list(ops)
        if not self._async:
            return await asyncio.to_thread(self.batch, ops)
        return await adrive(run_ops(self.plan, ops), lambda call: call.on(self.store))


def _ttl_config(ttl: TTLConfig | None) -> TTLConfig:
    config = TTLConfig(**(ttl or {}))
    unsupported = sorted(set(config) - {"default_ttl", "refresh_on_read"})
    if unsupported:
        raise ConfigError(f"ttl option {unsupported[0]!r} is not supported by SynopsisStore")
    if config.get("refresh_on_read"):
        raise ConfigError(
            "SynopsisStore counts expiry from the last write: refresh_on_read must be False"
        )
    config["refresh_on_read"] = False
    return config


# --- the flow of store calls -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StorePlan:
    """What every operation of one adapter shares."""

    tenant: str
    kind: str
    fields: tuple[str, ...] | None
    mode: SearchMode

    @property
    def hidden_kinds(self) -> tuple[str, ...]:
        """Kinds search leaves out: stored transcripts, unless the adapter writes that kind."""
        return tuple(sorted(TRANSCRIPT_KINDS - {self.kind}))

    def call(self, method: str, *args: Any, **kwargs: Any) -> StoreCall:
        return StoreCall(method, (self.tenant, *args), kwargs)


Calls = Flow[StoreCall, Any]


def run_ops(plan: StorePlan, ops: Iterable[Op]) -> Flow[StoreCall, list[Result]]:
    """Every op's result, in order. Consecutive puts become one ``put_many``."""
    results: list[Result] = []
    puts: list[NewMemory] = []
    for op in ops:
        if isinstance(op, PutOp) and op.value is not None:
            puts.append(_new_memory(plan, op, op.value))
            results.append(None)
            continue
        yield from _put_all(plan, puts)
        results.append((yield from _run_op(plan, op)))
    yield from _put_all(plan, puts)
    return results


def _run_op(plan: StorePlan, op: Op) -> Calls:
    if isinstance(op, GetOp):
        found = yield plan.call("get", op.namespace, op.key)
        return None if found is None else _item(found)
    if isinstance(op, PutOp):  # a put of None deletes
        yield plan.call("delete", op.namespace, op.key)
        return None
    if isinstance(op, SearchOp):
        return (yield from _search(plan, op))
    if isinstance(op, ListNamespacesOp):
        return (yield from _list_namespaces(plan, op))
    raise InvalidInput(f"unknown store operation {type(op).__name__}")


def _new_memory(plan: StorePlan, op: PutOp, value: Mapping[str, Any]) -> NewMemory:
    text, tags = encode_value(value, op.index, plan.fields)
    ttl = None if op.ttl is None else op.ttl * _MINUTE
    return NewMemory(op.namespace, op.key, text, kind=plan.kind, tags=tags, ttl=ttl)


def _put_all(plan: StorePlan, puts: list[NewMemory]) -> Calls:
    if puts:
        batch = list(puts)
        puts.clear()
        yield plan.call("put_many", batch)


def _search(plan: StorePlan, op: SearchOp) -> Flow[StoreCall, list[SearchItem]]:
    """Search, with the exact string filters in the store and the rest checked here.

    Without a residual filter the store pages; with one, pages are read from the start until
    ``offset + limit`` matches are found or the store has no more.
    """
    if op.limit <= 0:
        return []
    pushed, rest = split_filter(op.filter)
    cursor, wanted = (0, op.offset + op.limit) if rest else (op.offset, op.limit)
    query = op.query or None
    found: list[tuple[SearchHit, dict[str, Any]]] = []
    while len(found) < wanted:
        size = MAX_LIMIT if rest else min(MAX_LIMIT, wanted - len(found))
        hits: list[SearchHit] = yield plan.call(
            "search",
            op.namespace_prefix,
            query=query,
            exclude_kinds=plan.hidden_kinds,
            tags=pushed or None,
            limit=size,
            offset=cursor,
            mode=plan.mode if query is not None else "keyword",
        )
        cursor += len(hits)
        found += [(hit, v) for hit in hits if matches(v := _value(hit.item), rest)]
        if len(hits) < size:
            break
    page = found[op.offset :] if rest else found
    return [_search_item(hit, value) for hit, value in page[: op.limit]]


def _list_namespaces(plan: StorePlan, op: ListNamespacesOp) -> Flow[StoreCall, list[Namespace]]:
    """A plain prefix goes to the store; suffixes and wildcards are matched here."""
    if op.limit <= 0:
        return []
    conditions = tuple(op.match_conditions or ())
    prefix = literal_prefix(conditions)
    plain = all(c.match_type == "prefix" and tuple(c.path) == prefix for c in conditions)
    if plain and op.limit <= MAX_LIMIT:
        listed: list[Namespace] = yield plan.call(
            "list_namespaces",
            prefix=prefix,
            max_depth=op.max_depth,
            limit=op.limit,
            offset=op.offset,
        )
        return listed
    every = yield from _every_namespace(plan, prefix)
    kept = {
        namespace[: op.max_depth] if op.max_depth is not None else namespace
        for namespace in every
        if all(namespace_matches(condition, namespace) for condition in conditions)
    }
    return sorted(kept)[op.offset : op.offset + op.limit]


def _every_namespace(plan: StorePlan, prefix: Namespace) -> Flow[StoreCall, list[Namespace]]:
    every: list[Namespace] = []
    while True:
        page: list[Namespace] = yield plan.call(
            "list_namespaces", prefix=prefix, limit=MAX_LIMIT, offset=len(every)
        )
        every += page
        if len(page) < MAX_LIMIT:
            return every


def _value(item: MemoryItem) -> dict[str, Any]:
    return value_of(item.text, item.kind, item.tags)


def _item(item: MemoryItem) -> Item:
    return Item(
        value=_value(item),
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _search_item(hit: SearchHit, value: dict[str, Any]) -> SearchItem:
    item = hit.item
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=hit.score,
    )


# --- the pre-model hook ----------------------------------------------------------------------


def pre_model_hook(compactor: Compactor | AsyncCompactor) -> RunnableLambda[Any, dict[str, Any]]:
    """A graph node that compacts the state's ``messages`` when the compactor's trigger fires.

    Add it before the model node of any graph whose state has ``messages`` (with LangGraph's
    ``add_messages`` reducer), the tool node leading back to it. When
    a compaction happens it returns ``{"messages": [RemoveMessage(REMOVE_ALL_MESSAGES), ...]}``,
    so the compacted list replaces the old one in the state; otherwise ``{}``. A
    :class:`~synopsis.Compactor` serves sync and async runs, an :class:`~synopsis.AsyncCompactor`
    async runs only.
    """
    check_compactor(compactor)

    def compact(state: Any) -> dict[str, Any]:
        messages = compact_messages(compactor, _state_messages(state))
        return {} if messages is None else replace_all(messages)

    async def acompact(state: Any) -> dict[str, Any]:
        messages = await acompact_messages(compactor, _state_messages(state))
        return {} if messages is None else replace_all(messages)

    return RunnableLambda(compact, afunc=acompact, name="synopsis_pre_model_hook")


def _state_messages(state: Any) -> list[Any]:
    messages = state.get("messages") if isinstance(state, Mapping) else state.messages
    if not isinstance(messages, list):
        raise InvalidInput("the graph state has no list of messages under 'messages'")
    return messages
