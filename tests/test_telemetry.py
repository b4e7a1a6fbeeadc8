"""OpenTelemetryHandler: one span per summarization, attempt events, counters and histograms."""

from __future__ import annotations

import builtins
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from synopsis.errors import ConfigError, ModelTimeout
from synopsis.events import AfterSummarize, BeforeSummarize, SummarizeFailed, emit
from synopsis.models.retry import AttemptRecord
from synopsis.telemetry import OpenTelemetryHandler


@pytest.fixture
def otel() -> Any:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    handler = OpenTelemetryHandler(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield handler, exporter, reader
    tracer_provider.shutdown()
    meter_provider.shutdown()


def metrics(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = list(metric.data.data_points)
    return found


def attempt(n: int, phase: str = "primary", error: Exception | None = None) -> Any:
    record = AttemptRecord(attempt=n, phase=phase, model="m", latency_s=0.25, error=error)  # type: ignore[arg-type]
    return record.to_event()


def test_successful_summarization_is_one_span_with_attempt_events(otel: Any) -> None:
    """before -> 2 attempts -> after gives one OK span with two events and the attributes."""
    handler, exporter, reader = otel
    emit([handler], BeforeSummarize(reason="tokens", tokens=5209, message_count=6))
    emit([handler], attempt(1, error=ModelTimeout("slow", model="m")))
    emit([handler], attempt(2))
    after = AfterSummarize(
        reason="tokens",
        tokens_before=5209,
        tokens_after=900,
        messages_before=6,
        messages_after=2,
        model="m",
        attempts=2,
    )
    emit([handler], after)
    (span,) = exporter.get_finished_spans()
    assert span.name == "synopsis.summarize"
    assert span.status.status_code is StatusCode.OK
    assert span.attributes["synopsis.reason"] == "tokens"
    assert span.attributes["synopsis.tokens_before"] == 5209
    assert span.attributes["synopsis.tokens_after"] == 900
    assert span.attributes["synopsis.attempts"] == 2
    assert [e.name for e in span.events] == ["generate_summary", "generate_summary"]
    assert span.events[0].attributes["synopsis.error.type"] == "ModelTimeout"
    assert span.events[1].attributes["synopsis.ok"] is True
    found = metrics(reader)
    assert found["synopsis.compactions"][0].value == 1
    assert sum(p.value for p in found["synopsis.attempts"]) == 2
    assert found["synopsis.tokens.saved"][0].sum == 5209 - 900
    assert found["synopsis.attempt.latency"][0].count == 2


def test_failed_summarization_ends_span_with_error(otel: Any) -> None:
    """summarize_failed closes the span with ERROR status and counts a failure."""
    handler, exporter, reader = otel
    handler(BeforeSummarize(reason="messages", tokens=10, message_count=50, session_id="s"))
    handler(replace(attempt(1, error=ModelTimeout("slow")), session_id="s"))
    handler(
        SummarizeFailed(
            reason="messages",
            error={"type": "AllModelsFailed", "message": "all failed"},
            attempts=1,
            fallback="keep",
            session_id="s",
        )
    )
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["synopsis.session_id"] == "s"
    assert span.attributes["synopsis.fallback"] == "keep"
    assert len(span.events) == 1
    assert metrics(reader)["synopsis.failures"][0].value == 1


def test_concurrent_sessions_get_separate_spans(otel: Any) -> None:
    """Two interleaved summarizations (different session ids) give two spans."""
    handler, exporter, _ = otel
    handler(BeforeSummarize(reason="tokens", tokens=1, message_count=1, session_id="a"))
    handler(BeforeSummarize(reason="tokens", tokens=2, message_count=1, session_id="b"))
    for session in ("b", "a"):
        handler(
            AfterSummarize(
                reason="tokens",
                tokens_before=2,
                tokens_after=1,
                messages_before=1,
                messages_after=1,
                model="m",
                attempts=1,
                session_id=session,
            )
        )
    spans = exporter.get_finished_spans()
    assert [s.attributes["synopsis.session_id"] for s in spans] == ["b", "a"]


def test_attempt_without_open_span_only_counts(otel: Any) -> None:
    """A generate_summary outside a summarization records metrics and no span."""
    handler, exporter, reader = otel
    handler(attempt(1))
    assert exporter.get_finished_spans() == ()
    assert sum(p.value for p in metrics(reader)["synopsis.attempts"]) == 1


def test_missing_opentelemetry_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without opentelemetry-api the handler refuses to build and names the extra."""
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ConfigError, match=r"synopsis\[otel\]"):
        OpenTelemetryHandler()
