"""OpenTelemetry spans and metrics (needs the ``otel`` extra).

:class:`Tracing` starts spans for code that traces itself (session memory: see
:mod:`synopsis.session._tracing`); it is a no-op without ``opentelemetry-api`` and close to
free without a configured SDK.

Compaction is traced from its events: pass an :class:`OpenTelemetryHandler` wherever event
handlers are accepted. Each summarization becomes one span, ``synopsis.summarize``, opened by
``before_summarize`` and closed by ``after_summarize`` (status OK) or ``summarize_failed``
(status ERROR); every ``generate_summary`` attempt is a span event on it. Metrics:

- ``synopsis.compactions`` (counter, by reason), ``synopsis.failures`` (counter);
- ``synopsis.attempts`` (counter, by model, phase and outcome);
- ``synopsis.attempt.latency`` (histogram, seconds);
- ``synopsis.tokens.saved`` (histogram, tokens before minus tokens after).

Only ``opentelemetry-api`` is needed; without an SDK configured everything is a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from synopsis.errors import ConfigError
from synopsis.events import AfterSummarize, BeforeSummarize, Event, GenerateSummary, SummarizeFailed

__all__ = ["NO_SPAN", "OpenTelemetryHandler", "Tracing"]

_SCOPE = "synopsis"

#: What OpenTelemetry accepts as an attribute value (the scalars synopsis records).
AttributeValue = str | bool | int | float


class _NoSpan:
    """Stands in for a span when OpenTelemetry is not installed: records nothing."""

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        pass

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
        pass


NO_SPAN: Any = _NoSpan()


class Tracing:
    """Starts spans through OpenTelemetry when it is there; otherwise does nothing.

    ``tracer_provider`` defaults to the global one, looked up at each span, so spans start to
    be recorded as soon as an SDK is configured. Until then (or without ``opentelemetry-api``
    at all) no span is started: :meth:`active` is False and :meth:`span` gives
    :data:`NO_SPAN`, which costs about a microsecond. A span that nothing records is not made
    current either. Callers test ``span.is_recording()`` before building attributes.
    """

    def __init__(self, *, tracer_provider: Any = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError:
            self._trace: Any = None
            self._tracer: Any = None
            return
        self._trace = trace
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        self._given = tracer_provider is not None
        self._placeholders = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)

    def active(self) -> bool:
        """True when a span may be recorded: a provider was given, or a global one is set."""
        if self._tracer is None:
            return False
        return self._given or not isinstance(self._trace.get_tracer_provider(), self._placeholders)

    def span(
        self, name: str, *, kind: Literal["internal", "client"] = "internal"
    ) -> AbstractContextManager[Any]:
        """Start ``name`` as the current span for the ``with`` block; it ends with the block.

        An exception leaving the block is recorded on the span and sets its status to ERROR.
        """
        if not self.active():
            return nullcontext(NO_SPAN)
        kinds = self._trace.SpanKind
        span = self._tracer.start_span(
            name, kind=kinds.CLIENT if kind == "client" else kinds.INTERNAL
        )
        if not span.get_span_context().is_valid:  # nothing records it, nothing can follow it
            return nullcontext(span)
        return self._trace.use_span(span, end_on_exit=True)  # type: ignore[no-any-return]

    def fail(self, span: Any, description: str) -> None:
        """Set ``span``'s status to ERROR."""
        if self._trace is not None and span.is_recording():
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))


def _otel() -> tuple[Any, Any]:
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:
        raise ConfigError(
            "OpenTelemetry support needs opentelemetry-api: pip install 'synopsis[otel]'"
        ) from exc
    return trace, metrics


class OpenTelemetryHandler:
    """An event handler that records spans and metrics; see the module docstring.

    ``tracer_provider`` / ``meter_provider`` default to the global ones. Concurrent
    summarizations are told apart by ``session_id``; open spans are kept per instance under a
    lock, so one handler may serve many threads.
    """

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        trace, metrics = _otel()
        self._trace = trace
        self._tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self._compactions = meter.create_counter("synopsis.compactions", unit="1")
        self._failures = meter.create_counter("synopsis.failures", unit="1")
        self._attempts = meter.create_counter("synopsis.attempts", unit="1")
        self._latency = meter.create_histogram("synopsis.attempt.latency", unit="s")
        self._saved = meter.create_histogram("synopsis.tokens.saved", unit="{token}")
        self._spans: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if isinstance(event, BeforeSummarize):
            self._before(event)
        elif isinstance(event, GenerateSummary):
            self._attempt(event)
        elif isinstance(event, AfterSummarize):
            self._after(event)
        elif isinstance(event, SummarizeFailed):
            self._failed(event)

    def _before(self, event: BeforeSummarize) -> None:
        attributes: dict[str, Any] = {
            "synopsis.reason": event.reason,
            "synopsis.tokens_before": event.tokens,
            "synopsis.messages_before": event.message_count,
        }
        if event.session_id is not None:
            attributes["synopsis.session_id"] = event.session_id
        span = self._tracer.start_span("synopsis.summarize", attributes=attributes)
        with self._lock:
            stale = self._spans.pop(event.session_id, None)
            self._spans[event.session_id] = span
        if stale is not None:  # a run that never reported its end; do not leak it
            stale.end()

    def _attempt(self, event: GenerateSummary) -> None:
        attributes: dict[str, Any] = {
            "synopsis.attempt": event.attempt,
            "synopsis.phase": event.phase,
            "synopsis.model": event.model,
            "synopsis.latency_s": event.latency_s,
            "synopsis.ok": event.ok,
        }
        if event.error is not None:
            attributes["synopsis.error.type"] = str(event.error.get("type"))
            attributes["synopsis.error.message"] = str(event.error.get("message"))
        with self._lock:
            span = self._spans.get(event.session_id)
        if span is not None:
            span.add_event("generate_summary", attributes=attributes)
        labels = {"model": event.model, "phase": event.phase, "ok": event.ok}
        self._attempts.add(1, labels)
        self._latency.record(event.latency_s, {"model": event.model})

    def _after(self, event: AfterSummarize) -> None:
        self._compactions.add(1, {"reason": event.reason})
        self._saved.record(max(event.tokens_before - event.tokens_after, 0))
        span = self._pop(event.session_id)
        if span is None:
            return
        span.set_attributes(
            {
                "synopsis.tokens_after": event.tokens_after,
                "synopsis.messages_after": event.messages_after,
                "synopsis.model": event.model,
                "synopsis.attempts": event.attempts,
            }
        )
        span.set_status(self._trace.Status(self._trace.StatusCode.OK))
        span.end()

    def _failed(self, event: SummarizeFailed) -> None:
        self._failures.add(1, {"reason": event.reason})
        span = self._pop(event.session_id)
        if span is None:
            return
        span.set_attributes(
            {
                "synopsis.attempts": event.attempts,
                "synopsis.error.type": str(event.error.get("type")),
                "synopsis.fallback": event.fallback or "",
            }
        )
        description = str(event.error.get("message", ""))
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))
        span.end()

    def _pop(self, session_id: str | None) -> Any:
        with self._lock:
            return self._spans.pop(session_id, None)
