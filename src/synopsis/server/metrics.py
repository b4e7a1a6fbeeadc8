"""Prometheus metrics of one app (its own registry, so several apps never share counters).

``GET /metrics`` renders them in the Prometheus text format:

* ``synopsis_http_requests_total{method,route,status}`` and
  ``synopsis_http_request_duration_seconds{method,route}`` (until the last byte was sent, so a
  streamed answer counts whole); ``route`` is the route template, never the raw path;
* ``synopsis_compactions_total{outcome}``: ``compacted``, ``failed`` (history kept);
* ``synopsis_summarizer_calls_total{outcome}`` (``ok`` / ``error``, per attempt) and
  ``synopsis_summarizer_failures_total`` (summaries that failed after every attempt);
* ``synopsis_session_summaries_total{outcome}``: background summaries ``saved`` / ``failed``;
* ``synopsis_proxy_summary_cache_total{outcome}``: a stateless proxy history over the trigger
  whose summary was reused (``hit``) or had to be made (``miss``);
* ``synopsis_job_queue_depth`` (open jobs in the shared queue, read at scrape time) and
  ``synopsis_jobs_running`` (jobs this process is running).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from synopsis import (
    AfterSummarize,
    GenerateSummary,
    SessionMemoryFailed,
    SessionSummarySaved,
    SummarizeFailed,
)

__all__ = ["CONTENT_TYPE", "Metrics", "MetricsMiddleware"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
_SUMMARY_STAGES = frozenset({"summarize", "invalid_summary", "save", "job"})


class Metrics:
    """The counters, histograms and gauges of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "synopsis_http_requests",
            "HTTP requests answered.",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "synopsis_http_request_duration_seconds",
            "Time to answer an HTTP request.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.compactions = Counter(
            "synopsis_compactions",
            "Compactions run (stateless and proxy).",
            ["outcome"],
            registry=r,
        )
        self.summarizer_calls = Counter(
            "synopsis_summarizer_calls",
            "Summarizer model calls, per attempt.",
            ["outcome"],
            registry=r,
        )
        self.summarizer_failures = Counter(
            "synopsis_summarizer_failures", "Summaries that failed after every attempt.", registry=r
        )
        self.session_summaries = Counter(
            "synopsis_session_summaries", "Background session summaries.", ["outcome"], registry=r
        )
        self.summary_cache = Counter(
            "synopsis_proxy_summary_cache",
            "Stateless proxy summaries reused (hit) or made (miss).",
            ["outcome"],
            registry=r,
        )
        for outcome in ("hit", "miss"):
            self.summary_cache.labels(outcome)
        self.queue_depth = Gauge(
            "synopsis_job_queue_depth", "Open summary jobs in the shared queue.", registry=r
        )
        self.jobs_running = Gauge(
            "synopsis_jobs_running", "Summary jobs this process is running.", registry=r
        )

    def observe(self, event: Any) -> None:
        """Count a library event (compaction, summarizer attempt, session summary)."""
        if isinstance(event, GenerateSummary):
            self.summarizer_calls.labels("ok" if event.ok else "error").inc()
        elif isinstance(event, AfterSummarize):
            self.compactions.labels("compacted").inc()
        elif isinstance(event, SummarizeFailed):
            self.compactions.labels("failed").inc()
            self.summarizer_failures.inc()
        elif isinstance(event, SessionSummarySaved):
            self.session_summaries.labels("saved").inc()
        elif isinstance(event, SessionMemoryFailed) and event.stage in _SUMMARY_STAGES:
            self.session_summaries.labels("failed").inc()
            if event.stage in ("summarize", "invalid_summary"):
                self.summarizer_failures.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts and times every HTTP request by route template (pure ASGI: streaming-safe)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        #: The labelled counter and histogram of each (method, route, status) seen: looked
        #: up once, not per request (routes are templates, so this stays small).
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            key = (scope["method"], route, status)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = (
                    self.metrics.requests.labels(key[0], route, str(status)),
                    self.metrics.latency.labels(key[0], route),
                )
            series[0].inc()
            series[1].observe(time.perf_counter() - started)
