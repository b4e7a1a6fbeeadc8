"""Spans of session memory: jobs, store calls, build_context and recall, sync and async alike."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from synopsis.errors import ProviderUnavailable, StoreError
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.memory.sqlite import SQLiteStore
from synopsis.session._tracing import db_system
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.summarizer import SummaryResult
from synopsis.telemetry import NO_SPAN, Tracing

T, U, S = "acme", "u1", "s1"
JOB = "synopsis.session.summarize_job"


@dataclass(frozen=True, slots=True)
class Usage(SummaryResult):
    """A result that knows its token usage."""

    input_tokens: int = 0
    output_tokens: int = 0


class Summarizer:
    model_name = "fake:request-model"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        if self.error is not None:
            raise self.error
        return Usage(text="Coffee.", model="fake:m", attempts=1, input_tokens=7, output_tokens=3)


class AsyncSummarizer(Summarizer):
    async def summarize(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> SummaryResult:
        return super().summarize(messages, **options)


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def turns(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about coffee"}
        for i in range(count)
    ]


def by_name(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def parent_of(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> str | None:
    parent = span.parent
    found = [s.name for s in finished if parent and s.context.span_id == parent.span_id]
    return found[0] if found else None


def run_sync(provider: TracerProvider, **options: Any) -> None:
    """One job, one build_context, one recall, on an in-memory store."""
    with SessionMemory(
        store=options.pop("store", InMemoryStore()),
        summarizer=options.pop("summarizer", Summarizer()),
        summarize_every=10,
        hybrid=True,
        tracer_provider=provider,
        **options,
    ) as memory:
        memory.after_turn(T, U, S, turns(10))
        assert memory.drain(timeout=60)
        memory.build_context(T, U, S, turns(12))
        memory.recall(T, U, "coffee", limit=3)


async def run_async(provider: TracerProvider) -> None:
    async with AsyncSessionMemory(
        store=AsyncInMemoryStore(),
        summarizer=AsyncSummarizer(),
        summarize_every=10,
        hybrid=True,
        tracer_provider=provider,
    ) as memory:
        await memory.after_turn(T, U, S, turns(10))
        assert await memory.drain(timeout=60)
        await memory.build_context(T, U, S, turns(12))
        await memory.recall(T, U, "coffee", limit=3)


def test_a_job_is_one_span_with_gen_ai_attributes_and_its_store_calls_inside(spans: Any) -> None:
    provider, exporter = spans
    run_sync(provider)
    finished = exporter.get_finished_spans()
    (job,) = by_name(finished, JOB)
    assert job.status.status_code is StatusCode.UNSET
    assert dict(job.attributes or {}) == {
        "gen_ai.operation.name": "summarize",
        "gen_ai.conversation.id": S,
        "gen_ai.request.model": "fake:request-model",
        "gen_ai.response.model": "fake:m",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
        "synopsis.session.messages": 10,
        "synopsis.session.outcome": "done",
    }
    inside = [s.name for s in finished if parent_of(s, finished) == JOB]
    assert inside == [
        "claim_summary_job inmemory",
        "latest_summary inmemory",
        "save_summary inmemory",
        "put inmemory",
        "complete_outbox inmemory",
        "release_summary_job inmemory",
        "pending_outbox inmemory",
    ]
    assert [e.name for e in job.events] == ["session_summary_started", "session_summary_saved"]
    assert job.events[1].attributes["synopsis.version"] == 1  # type: ignore[index]


def test_store_calls_are_client_spans_with_db_attributes(spans: Any) -> None:
    provider, exporter = spans
    run_sync(provider)
    finished = exporter.get_finished_spans()
    (search, *_) = [s for s in finished if s.name.startswith("search ")]
    assert search.kind is SpanKind.CLIENT
    assert dict(search.attributes or {}) == {
        "db.system": "inmemory",
        "db.operation.name": "search",
        "db.response.returned_rows": 1,
    }
    # the admission read of after_turn has no session span around it, and still gets its own
    assert parent_of(finished[0], finished) is None
    assert finished[0].name == "latest_summary inmemory"


def test_build_context_and_recall_spans_count_what_they_return(spans: Any) -> None:
    provider, exporter = spans
    run_sync(provider)
    finished = exporter.get_finished_spans()
    (built,) = by_name(finished, "synopsis.session.build_context")
    assert dict(built.attributes or {}) == {
        "gen_ai.conversation.id": S,
        "synopsis.session.messages": 12,
        "synopsis.context.messages": 3,  # the summary's system message, the 2 it does not cover
    }
    children = [s.name.split()[0] for s in finished if parent_of(s, finished) == built.name]
    assert children == ["latest_summary", "search"]
    (recalled,) = by_name(finished, "synopsis.session.recall")
    assert dict(recalled.attributes or {}) == {
        "synopsis.recall.limit": 3,
        "synopsis.recall.mode": "keyword",
        # the default: the transcript kinds
        "synopsis.recall.exclude_kinds": "agents_item,agents_session,archived_message",
        "synopsis.recall.hits": 1,
    }


def test_the_tenant_is_on_spans_only_when_asked(spans: Any) -> None:
    """A tenant may be personal data: off by default, opt-in with trace_tenant=True."""
    provider, exporter = spans
    run_sync(provider)
    assert not any("synopsis.tenant" in (s.attributes or {}) for s in exporter.get_finished_spans())
    exporter.clear()
    run_sync(provider, trace_tenant=True)
    finished = exporter.get_finished_spans()
    session_spans = [s for s in finished if s.name.startswith("synopsis.session.")]
    assert {s.attributes["synopsis.tenant"] for s in session_spans} == {T}  # type: ignore[index]
    assert not any("user" in str(dict(s.attributes or {})) for s in finished)


def test_a_failed_job_is_an_error_span_with_the_failure_as_an_event(spans: Any) -> None:
    provider, exporter = spans
    run_sync(provider, summarizer=Summarizer(ProviderUnavailable("down", model="m")))
    (job,) = by_name(exporter.get_finished_spans(), JOB)
    assert job.status.status_code is StatusCode.ERROR
    assert job.attributes["synopsis.session.outcome"] == "failed"  # type: ignore[index]
    failed = job.events[-1]
    assert failed.name == "session_memory_failed"
    assert failed.attributes["synopsis.stage"] == "summarize"  # type: ignore[index]
    assert failed.attributes["error.type"] == "ProviderUnavailable"  # type: ignore[index]


class BrokenSearch(InMemoryStore):
    def search(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreError("connection lost")


def test_a_failed_store_call_records_its_exception(spans: Any) -> None:
    """build_context degrades; the search span carries the error, the outer span the event."""
    provider, exporter = spans
    with SessionMemory(
        store=BrokenSearch(), summarizer=None, hybrid=True, tracer_provider=provider
    ) as memory:
        memory.build_context(T, U, S, turns(4))
    finished = exporter.get_finished_spans()
    (search,) = [s for s in finished if s.name.startswith("search ")]
    assert search.status.status_code is StatusCode.ERROR
    assert [e.name for e in search.events] == ["exception"]
    (built,) = by_name(finished, "synopsis.session.build_context")
    assert built.status.status_code is StatusCode.UNSET
    assert [e.attributes["synopsis.stage"] for e in built.events] == ["recall"]  # type: ignore[index]


def test_a_job_continues_the_trace_of_the_turn_that_scheduled_it(spans: Any) -> None:
    """The job thread runs in a copy of the caller's context, as an asyncio task would."""
    provider, exporter = spans
    tracer = provider.get_tracer("app")
    with SessionMemory(
        store=InMemoryStore(), summarizer=Summarizer(), summarize_every=10, tracer_provider=provider
    ) as memory:
        with tracer.start_as_current_span("turn"):
            memory.after_turn(T, U, S, turns(10))
        assert memory.drain(timeout=60)
    finished = exporter.get_finished_spans()
    (job,) = by_name(finished, JOB)
    assert parent_of(job, finished) == "turn"


def shape(finished: Sequence[ReadableSpan]) -> list[tuple[Any, ...]]:
    """What must agree between the twins: names, nesting, attributes and events."""
    return [
        (
            s.name,
            parent_of(s, finished),
            s.kind,
            s.status.status_code,
            dict(s.attributes or {}),
            [(e.name, dict(e.attributes or {})) for e in s.events],
        )
        for s in finished
    ]


async def test_sync_and_async_memories_record_the_same_spans(spans: Any) -> None:
    provider, exporter = spans
    run_sync(provider)
    sync_spans = shape(exporter.get_finished_spans())
    exporter.clear()
    await run_async(provider)
    async_spans = shape(exporter.get_finished_spans())
    assert sync_spans == async_spans


def test_without_an_sdk_nothing_is_recorded_and_everything_works() -> None:
    """The global provider of a process without an SDK: non-recording spans, same results."""
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    run_sync(None)  # type: ignore[arg-type]
    with Tracing().span("x") as span:
        assert not span.is_recording()


def test_without_opentelemetry_tracing_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with Tracing().span("x") as span:
        assert span is NO_SPAN
    run_sync(None)  # type: ignore[arg-type]


def test_db_system_names_the_backend_and_both_twins_alike(tmp_path: Any) -> None:
    """sqlite and postgresql by module, a declared name first, else the class without Async."""
    postgres = type("AsyncPostgresStore", (), {"__module__": "synopsis.memory.postgres"})()
    declared = type("Mine", (), {"db_system": "redis"})()
    store = SQLiteStore(str(tmp_path / "m.db"))
    try:
        names = [db_system(s) for s in (store, postgres, declared, InMemoryStore())]
    finally:
        store.close()
    assert names == ["sqlite", "postgresql", "redis", "inmemory"]
    assert db_system(AsyncInMemoryStore()) == "inmemory"


@pytest.mark.parametrize(
    ("name", "system"),
    [
        ("SQLiteStore", "sqlite"),
        ("AsyncSQLiteStore", "sqlite"),
        ("PostgresStore", "postgresql"),
        ("AsyncPostgresStore", "postgresql"),
    ],
)
def test_db_system_names_the_real_backends_from_where_their_classes_live(
    name: str, system: str
) -> None:
    """The backends' own classes, wherever their modules sit in memory/ (no connection)."""
    import synopsis.memory

    cls = getattr(synopsis.memory, name)
    assert db_system(object.__new__(cls)) == system


async def test_a_cancelled_async_job_ends_its_span_as_cancelled(spans: Any) -> None:
    provider, exporter = spans
    entered = asyncio.Event()

    class Hanging:
        async def summarize(self, messages: Any, **_: Any) -> SummaryResult:
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("never answers")

    memory = AsyncSessionMemory(
        store=AsyncInMemoryStore(),
        summarizer=Hanging(),
        summarize_every=10,
        tracer_provider=provider,
    )
    await memory.after_turn(T, U, S, turns(10))
    await entered.wait()
    await memory.aclose(wait=False)
    (job,) = by_name(exporter.get_finished_spans(), JOB)
    assert job.attributes["synopsis.session.outcome"] == "cancelled"  # type: ignore[index]
    assert job.status.status_code is StatusCode.ERROR
