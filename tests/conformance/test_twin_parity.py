"""Sync/async parity: every twin pair, run on the same cases, gives the same results and events.

One scenario function serves both twins: it builds the sync or the async object from the same
scripted fakes and calls it through :func:`settle`, which awaits only what is awaitable. The
test then compares what the two runs returned, recorded and emitted -- including the order in
which events and model calls interleave, so a twin that buffers its events (delivers them late)
fails here even when the final lists match.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from synopsis import (
    AsyncCompactingModel,
    AsyncCompactor,
    AsyncSessionMemory,
    AsyncSummarizer,
    CompactingModel,
    Compactor,
    MemoryArchive,
    Redactor,
    RetryPolicy,
    SessionMemory,
    Summarizer,
)
from synopsis.errors import (
    ContextLengthExceeded,
    InvalidSummary,
    ModelError,
    PermanentModelError,
    RateLimited,
)
from synopsis.memory import AsyncInMemoryStore, InMemoryStore
from synopsis.models._base import ModelResponse, ModelSettings, Usage
from synopsis.models.failover import (
    AsyncFailoverModel,
    AsyncRetryingModel,
    FailoverModel,
    RetryingModel,
)
from synopsis.testing import FakeClock, RecordingSleep, tool_call_reply

from .conftest import BACKENDS, Store, StoreContext

FLAVORS = ("sync", "async")
SUMMARY = (
    "<analysis>scratch</analysis><summary>1. Primary Request and Intent: fix the parser\n"
    "2. Key Technical Concepts: tokenizer, AST\n9. Optional Next Step: run the tests</summary>"
)


async def settle(value: Any) -> Any:
    """``value``, awaited when it is awaitable: one call site for a sync and an async twin."""
    return await value if inspect.isawaitable(value) else value


# --- scripted models that log into one shared timeline ---------------------------------------


@dataclass
class Timeline:
    """Model calls and delivered events, in the order they happened."""

    entries: list[tuple[str, ...]] = field(default_factory=list)

    def event(self, event: Any) -> None:
        data = event.to_dict()
        data.pop("latency_s", None)  # wall-clock time differs between any two runs
        self.entries.append(("event", repr(sorted(data.items()))))


@dataclass
class ScriptedModel:
    """A sync model answering from ``replies`` (text, dict reply or exception), logging calls."""

    name: str
    replies: list[Any]
    timeline: Timeline
    context_window: int | None = None

    def _answer(self, messages: Sequence[Any]) -> ModelResponse:
        self.timeline.entries.append(("call", self.name, str(len(messages))))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        message = reply if isinstance(reply, dict) else {"role": "assistant", "content": reply}
        return ModelResponse(message=message, model=self.name, usage=Usage(10, 5, 15))

    def complete(self, messages: Sequence[Any], *, settings: ModelSettings | None = None) -> Any:
        return self._answer(messages)


class AsyncScriptedModel(ScriptedModel):
    async def complete(  # type: ignore[override]
        self, messages: Sequence[Any], *, settings: ModelSettings | None = None
    ) -> Any:
        return self._answer(messages)


def models(flavor: str, timeline: Timeline, *scripts: list[Any]) -> list[ScriptedModel]:
    kind = ScriptedModel if flavor == "sync" else AsyncScriptedModel
    return [kind(f"m{i}", list(script), timeline) for i, script in enumerate(scripts)]


def sleeper(flavor: str, timeline: Timeline) -> Callable[[float], Any]:
    sleep = RecordingSleep()

    def sync_sleep(seconds: float) -> None:
        timeline.entries.append(("sleep", f"{seconds:.6f}"))
        sleep(seconds)

    async def async_sleep(seconds: float) -> None:
        sync_sleep(seconds)

    return sync_sleep if flavor == "sync" else async_sleep


def transient() -> RateLimited:
    return RateLimited("slow down", model="m0", retry_after=None)


# --- summarization twins ---------------------------------------------------------------------

SCRIPTS: dict[str, list[list[Any]]] = {
    "ok": [[SUMMARY]],
    "transient_then_ok": [[transient(), transient(), SUMMARY]],
    "invalid_then_ok": [[tool_call_reply(), "", SUMMARY]],
    "failover": [[PermanentModelError("bad request", model="m0")], [SUMMARY]],
    "all_fail": [[transient()], [PermanentModelError("nope", model="m1")]],
}

HISTORY = [{"role": "system", "content": "You are a coding agent."}] + [
    {"role": role, "content": f"{role} turn {i}: the parser fails on input {i} " * 5}
    for i in range(12)
    for role in ("user", "assistant")
]


def compactor(flavor: str, timeline: Timeline, scripts: list[list[Any]], **options: Any) -> Any:
    primary, *backups = models(flavor, timeline, *scripts)
    kind = Compactor if flavor == "sync" else AsyncCompactor
    return kind(
        model=primary,
        failover=backups,
        retry=RetryPolicy(max_retries=2, initial_delay=0.5),
        sleep=sleeper(flavor, timeline),
        rng=random.Random(7),
        on_event=[timeline.event],
        trigger_tokens=200,
        keep_tail=2,
        **options,
    )


async def run_compactor(flavor: str, case: str, fallback: str) -> tuple[Any, ...]:
    timeline = Timeline()
    archive = MemoryArchive()
    twin = compactor(flavor, timeline, SCRIPTS[case], fallback=fallback, archive=archive)
    result = await settle(twin.compact(HISTORY))
    return result.messages, result.report(), timeline.entries, archive.batches


@pytest.mark.parametrize("fallback", ["keep", "extractive", "truncate"])
@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_compactor_twins_agree(case: str, fallback: str) -> None:
    """Compactor and AsyncCompactor: same messages, report, archive and event timeline."""
    sync = await run_compactor("sync", case, fallback)
    assert sync == await run_compactor("async", case, fallback)
    assert sync[2], "the scenario produced no events or calls"


SECRET_HISTORY = [HISTORY[0]] + [
    {"role": "user", "content": f"turn {i}: mail ana{i % 3}@example.org, server 10.0.{i}.7"}
    for i in range(12)
]
SECRET_SUMMARY = SUMMARY.replace("fix the parser", "fix the parser for ana0@example.org")


async def run_redacting_compactor(flavor: str, fallback: str) -> tuple[Any, ...]:
    timeline = Timeline()
    archive = MemoryArchive()
    redactor = Redactor(mode="hash", hash_key=b"parity" * 6)
    twin = compactor(
        flavor, timeline, [[SECRET_SUMMARY]], fallback=fallback, archive=archive, redact=redactor
    )
    result = await settle(twin.compact(SECRET_HISTORY))
    return result.messages, result.report(), timeline.entries, archive.batches


@pytest.mark.parametrize("fallback", ["keep", "truncate"])
async def test_compactor_twins_agree_when_redacting(fallback: str) -> None:
    """With redact=: the same redacted messages, counts, archive and events (values_redacted
    last) from both twins."""
    sync = await run_redacting_compactor("sync", fallback)
    assert sync == await run_redacting_compactor("async", fallback)
    assert sync[1]["redacted"]["email"] >= 12 and "@example.org" not in repr(sync[0])


async def test_compactor_twins_agree_before_the_trigger() -> None:
    """Below the trigger both hooks return the history as it is and call nothing."""
    results = []
    for flavor in FLAVORS:
        timeline = Timeline()
        twin = compactor(flavor, timeline, [[SUMMARY]])
        results.append((await settle(twin(HISTORY[:3])), timeline.entries))
    assert results[0] == results[1] == (HISTORY[:3], [])


async def run_compacting_model(flavor: str) -> tuple[Any, ...]:
    timeline = Timeline()
    overflow = ContextLengthExceeded("too long", model="upstream")
    (upstream,) = models(flavor, timeline, [overflow, "the answer"])
    twin_compactor = compactor(flavor, timeline, [[SUMMARY]])
    kind = CompactingModel if flavor == "sync" else AsyncCompactingModel
    wrapped = kind(upstream, twin_compactor)
    response = await settle(wrapped.complete(HISTORY[:4]))
    return response.text, timeline.entries


async def test_compacting_model_twins_agree() -> None:
    """CompactingModel twins: compact on overflow, retry once, same calls and events."""
    sync = await run_compacting_model("sync")
    assert sync == await run_compacting_model("async")
    assert sync[0] == "the answer"


async def run_summarizer(flavor: str, case: str, window: int | None) -> tuple[Any, ...]:
    timeline = Timeline()
    primary, *backups = models(flavor, timeline, *SCRIPTS[case])
    kind = Summarizer if flavor == "sync" else AsyncSummarizer
    twin = kind(
        model=primary,
        failover=backups,
        retry=RetryPolicy(max_retries=2, initial_delay=0.5),
        sleep=sleeper(flavor, timeline),
        clock=FakeClock(),
        rng=random.Random(3),
        on_event=[timeline.event],
        window=window,
        max_output_tokens=100,
    )
    try:
        result: Any = await settle(twin.summarize(HISTORY[1:], session_id="s-1"))
    except ModelError as exc:
        result = ("failed", type(exc).__name__, len(getattr(exc, "exceptions", ())))
    return result, timeline.entries


@pytest.mark.parametrize("window", [None, 1500])
@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_summarizer_twins_agree(case: str, window: int | None) -> None:
    """Summarizer twins: same result and the same interleaving of calls, sleeps and events.

    Each ``generate_summary`` event must reach the handlers as its attempt ends, before the
    next call or sleep; a twin that delivers them after the chain fails this comparison.
    """
    sync = await run_summarizer("sync", case, window)
    assert sync == await run_summarizer("async", case, window)


# --- retry/failover wrappers -----------------------------------------------------------------


async def run_wrapper(flavor: str, wrapper: str, case: str) -> tuple[Any, ...]:
    timeline = Timeline()
    chain = models(flavor, timeline, *SCRIPTS[case])
    records: list[tuple[Any, ...]] = []

    def on_attempt(record: Any) -> None:
        records.append((record.attempt, record.phase, record.model, type(record.error).__name__))
        timeline.entries.append(("attempt", str(records[-1])))

    options: dict[str, Any] = {
        "policy": RetryPolicy(max_retries=2, initial_delay=0.5),
        "sleep": sleeper(flavor, timeline),
        "on_attempt": on_attempt,
        "rng": random.Random(5),
        "clock": FakeClock(),
        "validate": _reject_tool_calls,
    }
    if wrapper == "retrying":
        kind: Any = RetryingModel if flavor == "sync" else AsyncRetryingModel
        twin = kind(chain[0], **options)
    else:
        kind = FailoverModel if flavor == "sync" else AsyncFailoverModel
        twin = kind(*chain, **options)
    try:
        outcome: Any = (await settle(twin.complete(HISTORY[:2]))).text
    except ModelError as exc:
        outcome = type(exc).__name__
    return outcome, records, timeline.entries


def _reject_tool_calls(response: ModelResponse) -> None:
    if response.tool_calls or not response.text.strip():
        raise InvalidSummary("not an answer", model=response.model)


@pytest.mark.parametrize("wrapper", ["retrying", "failover"])
@pytest.mark.parametrize("case", sorted(SCRIPTS))
async def test_retry_and_failover_wrappers_agree(wrapper: str, case: str) -> None:
    """RetryingModel/FailoverModel twins: same answer or error, same attempts, same waits."""
    sync = await run_wrapper("sync", wrapper, case)
    assert sync == await run_wrapper("async", wrapper, case)


# --- session memory --------------------------------------------------------------------------


def chat(turns: int, topic: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(turns):
        history.append({"role": "user", "content": f"{topic}: 我想喝咖啡 question {i}"})
        history.append({"role": "assistant", "content": f"answer {i} about {topic}"})
    return history


async def run_session(
    flavor: str, summary_script: list[Any], redact: Redactor | None = None, topic: str = "coffee"
) -> tuple[Any, ...]:
    timeline = Timeline()
    (model,) = models(flavor, timeline, summary_script)
    clock = FakeClock()
    if flavor == "sync":
        store: Any = InMemoryStore(clock=clock)
        memory: Any = SessionMemory(
            store=store,
            summarizer=Summarizer(model=model, retry=RetryPolicy(max_retries=0)),
            summarize_every=6,
            hybrid=True,
            on_event=[timeline.event],
            clock=clock,
            max_workers=1,
            redact=redact,
        )
    else:
        store = AsyncInMemoryStore(clock=clock)
        memory = AsyncSessionMemory(
            store=store,
            summarizer=AsyncSummarizer(model=model, retry=RetryPolicy(max_retries=0)),
            summarize_every=6,
            hybrid=True,
            on_event=[timeline.event],
            clock=clock,
            redact=redact,
        )
    history = chat(4, topic)
    scheduled = [
        await settle(memory.after_turn("t1", "u1", "s1", history[: n + 1])) for n in (3, 7)
    ]
    await settle(memory.drain(30))
    context = await settle(memory.build_context("t1", "u1", "s1", history, system_prompt="Hi."))
    recalled = await settle(memory.recall("t1", "u1", "咖啡"))
    summaries = await settle(store.summary_history("t1", "u1", "s1"))
    await settle(memory.aclose() if flavor == "async" else memory.close())
    return (
        scheduled,
        context,
        [(hit.item.namespace, hit.item.key, hit.item.text) for hit in recalled],
        [(s.version, s.covers_to, s.text) for s in summaries],
        timeline.entries,
    )


@pytest.mark.parametrize(
    "script",
    [[SUMMARY], [PermanentModelError("no", model="m0")], [tool_call_reply()]],
    ids=["ok", "model_fails", "invalid_summary"],
)
async def test_session_memory_twins_agree(script: list[Any]) -> None:
    """SessionMemory twins: same scheduling, stored summaries, context, recall and events."""
    sync = await run_session("sync", script)
    assert sync == await run_session("async", script)


async def test_session_memory_twins_agree_when_redacting() -> None:
    """With redact=: the same redacted requests' counts, stored summaries and events."""
    redactor = Redactor(mode="hash", hash_key=b"parity" * 6)
    case = ([SECRET_SUMMARY], redactor, "mail bo@example.org")
    sync = await run_session("sync", *case)
    assert sync == await run_session("async", *case)
    stored, entries = repr(sync[3]), repr(sync[4])
    assert "@example.org" not in stored and "'redacted', {'email': 8}" in entries


# --- stores ----------------------------------------------------------------------------------


async def store_scenario(store: Store) -> list[Any]:
    """A fixed sequence of store operations; what each returned, as comparable values."""
    out: list[Any] = []
    await store.put("t1", ("user", "u1", "notes"), "k1", "prefers 手冲咖啡 in the morning")
    await store.put("t1", ("user", "u1", "notes"), "k2", "works on the tokenizer", kind="fact")
    await store.put("t2", ("user", "u1", "notes"), "k1", "tenant two's coffee note")
    item = await store.get("t1", ("user", "u1", "notes"), "k1")
    out.append((item.text, item.kind, item.tags))
    for query in ("咖啡", "tokenizer", "coffee"):
        hits = await store.search("t1", ("user", "u1"), query=query, limit=5)
        out.append([(h.item.key, round(h.score or 0.0, 9)) for h in hits])
    for kinds in ({"kind": ("fact", "note")}, {"exclude_kinds": "fact"}, {"kind": "x"}):
        hits = await store.search("t1", ("user", "u1"), query="tokenizer 咖啡", **kinds)
        out.append([(h.item.key, round(h.score or 0.0, 9)) for h in hits])
    out.append(await store.list_namespaces("t1"))
    out.append(await store.delete("t1", ("user", "u1", "notes"), "k2"))
    out.append(await store.delete_user("t1", "u1"))
    out.append(await store.get("t1", ("user", "u1", "notes"), "k1"))
    out.append(await store.list_namespaces("t2"))
    return out


@pytest.mark.parametrize(
    "backend", [pytest.param(name, marks=spec.marks) for name, spec in BACKENDS.items()]
)
async def test_store_twins_agree(
    backend: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    """Each backend's sync store and async twin return the same values for the same calls."""
    results = []
    for flavor in FLAVORS:
        ctx = StoreContext(
            request=request, tmp_path=tmp_path / flavor, clock=FakeClock(), embedder=None
        )
        ctx.tmp_path.mkdir()
        spec = BACKENDS[backend]
        store = Store((spec.sync if flavor == "sync" else spec.async_)(ctx), flavor)
        try:
            results.append(await store_scenario(store))
        finally:
            await store.aclose()
    assert results[0] == results[1]
