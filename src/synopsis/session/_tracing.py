"""OpenTelemetry spans of session memory (a no-op without the ``otel`` extra or an SDK).

* ``synopsis.session.summarize_job``: one background job, from its first store read to its
  outbox replay. ``gen_ai.operation.name`` is ``summarize`` (a custom value: a job is more
  than one chat call), ``gen_ai.request.model`` the summarizer's model when it names one,
  ``gen_ai.response.model`` and ``gen_ai.usage.input_tokens`` / ``output_tokens`` when the
  result tells them, ``gen_ai.conversation.id`` the session id. ``synopsis.session.outcome``
  is ``done``, ``saved`` (the memory copy waits in the outbox), ``deleted`` (the user was
  deleted meanwhile), ``claimed_elsewhere`` (another replica runs the job), ``failed`` or, for
  an asyncio task, ``cancelled`` (both with status ERROR).
* ``{method} {db.system}`` (kind CLIENT): each store call a session flow makes, with
  ``db.system``, ``db.operation.name`` (the store method) and ``db.response.returned_rows``
  for a list; a failed call records its exception and status ERROR.
* ``synopsis.session.build_context`` and ``synopsis.session.recall``.

Every event a flow emits becomes a span event on the innermost of these spans (a failed stage
with its error type, the sizes of a truncated summary), named like the event.

No message text, summary, query or user id is put on a span (error messages are). The tenant
is left out too (a tenant id may be personal data) unless the memory is built with
``trace_tenant=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Literal

from synopsis._flow import Emit
from synopsis.events import SessionEvent
from synopsis.memory import SearchMode
from synopsis.memory.kinds import KindFilter
from synopsis.session._jobs import JobOutcome, Step, StoreCall
from synopsis.session._state import Job
from synopsis.telemetry import NO_SPAN, AttributeValue, Tracing

__all__ = ["SessionTracer", "db_system"]

Attributes = dict[str, AttributeValue]
Record = Callable[[Any], None]

#: The innermost session span of this context: where emitted events go.
_innermost: ContextVar[Any] = ContextVar("synopsis_session_span", default=NO_SPAN)

_PERSONAL = frozenset({"tenant", "user_id"})


def db_system(store: object) -> str:
    """``db.system`` of a store: ``sqlite``, ``postgresql``, else named after its class.

    A store may declare its own as a ``db_system`` attribute. Otherwise the name of its class
    stands in, without ``Async`` and ``Store`` (``InMemoryStore`` is ``inmemory``), so both
    twins of a backend are the same system.
    """
    declared = getattr(store, "db_system", None)
    if isinstance(declared, str):
        return declared
    module = type(store).__module__
    for marker, system in (("postgres", "postgresql"), ("sqlite", "sqlite")):
        if marker in module:
            return system
    name = type(store).__name__.lower().removeprefix("async").removesuffix("store")
    return name or "unknown"


def _ignore(result: object) -> None:
    pass


class SessionTracer:
    """The spans of one memory; both drivers call the same methods at the same points."""

    def __init__(
        self, tracing: Tracing, *, store: object, summarizer: object, trace_tenant: bool
    ) -> None:
        self._tracing = tracing
        self._db_system = db_system(store)
        model = getattr(summarizer, "model_name", None)
        self._model = model if isinstance(model, str) else None
        self._trace_tenant = trace_tenant

    # --- the spans ---------------------------------------------------------------------------

    def job(self, job: Job) -> AbstractContextManager[Any]:
        """The span of one background job."""

        def attributes() -> Attributes:
            found: Attributes = {
                "gen_ai.operation.name": "summarize",
                "gen_ai.conversation.id": job.session_id,
                "synopsis.session.messages": len(job.messages),
            }
            if self._model is not None:
                found["gen_ai.request.model"] = self._model
            return found | self._tenant(job.tenant)

        return self._scope("synopsis.session.summarize_job", attributes)

    def build_context(
        self, tenant: str, session_id: str, message_count: int
    ) -> AbstractContextManager[Any]:
        """The span of one ``build_context`` call."""

        def attributes() -> Attributes:
            found: Attributes = {
                "gen_ai.conversation.id": session_id,
                "synopsis.session.messages": message_count,
            }
            return found | self._tenant(tenant)

        return self._scope("synopsis.session.build_context", attributes)

    def recall(
        self, tenant: str, *, limit: int, kinds: KindFilter, mode: SearchMode
    ) -> AbstractContextManager[Any]:
        """The span of one ``recall`` call (the query is not recorded; the kinds are)."""

        def attributes() -> Attributes:
            found: Attributes = {"synopsis.recall.limit": limit, "synopsis.recall.mode": mode}
            wanted, excluded = kinds
            if wanted is not None:  # comma-separated, sorted
                found["synopsis.recall.kind"] = ",".join(wanted)
            if excluded:
                found["synopsis.recall.exclude_kinds"] = ",".join(excluded)
            return found | self._tenant(tenant)

        return self._scope("synopsis.session.recall", attributes)

    def step(self, step: Step) -> AbstractContextManager[Record]:
        """Around one step: a store call gets its span; a model result or an event is noted.

        The ``with`` block is given a function to call with the step's result.
        """
        if isinstance(step, StoreCall):
            return self._store_call(step) if self._tracing.active() else nullcontext(_ignore)
        if isinstance(step, Emit):
            self._note(step.event)
            return nullcontext(_ignore)
        return nullcontext(self._summarized)

    # --- what a span learns at its end -------------------------------------------------------

    def job_ended(self, span: Any, outcome: JobOutcome | Literal["cancelled"]) -> None:
        """Record how the job ended; ``failed`` and ``cancelled`` (async only) are errors."""
        if span.is_recording():
            span.set_attribute("synopsis.session.outcome", outcome)
            if outcome in ("failed", "cancelled"):
                self._tracing.fail(span, f"the summary job {outcome}; see its events")

    def counted(self, span: Any, name: str, items: object) -> None:
        """Record how many ``items`` an operation returned, as attribute ``name``."""
        if span.is_recording() and isinstance(items, list):
            span.set_attribute(name, len(items))

    # --- inside ------------------------------------------------------------------------------

    def _scope(
        self, name: str, attributes: Callable[[], Attributes]
    ) -> AbstractContextManager[Any]:
        if not self._tracing.active():
            return nullcontext(NO_SPAN)
        return self._innermost_span(name, attributes)

    @contextmanager
    def _innermost_span(self, name: str, attributes: Callable[[], Attributes]) -> Iterator[Any]:
        with self._tracing.span(name) as span:
            if span.is_recording():
                span.set_attributes(attributes())
            token = _innermost.set(span)
            try:
                yield span
            finally:
                _innermost.reset(token)

    @contextmanager
    def _store_call(self, step: StoreCall) -> Iterator[Record]:
        with self._tracing.span(f"{step.method} {self._db_system}", kind="client") as span:
            if span.is_recording():
                span.set_attributes(
                    {"db.system": self._db_system, "db.operation.name": step.method}
                )
            yield lambda result: self.counted(span, "db.response.returned_rows", result)

    def _summarized(self, result: object) -> None:
        span = _innermost.get()
        if not span.is_recording():
            return
        model = getattr(result, "model", None)
        if isinstance(model, str) and model:
            span.set_attribute("gen_ai.response.model", model)
        for name in ("input_tokens", "output_tokens"):
            value = getattr(result, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                span.set_attribute(f"gen_ai.usage.{name}", value)

    def _note(self, event: SessionEvent) -> None:
        span = _innermost.get()
        if span.is_recording():
            span.add_event(event.name, self._event_attributes(event))

    def _event_attributes(self, event: SessionEvent) -> Attributes:
        found: Attributes = {}
        for key, value in event.to_dict().items():
            if key == "error" and isinstance(value, dict):
                found["error.type"] = str(value.get("type"))
                found["synopsis.error.message"] = str(value.get("message"))
            elif key in _PERSONAL:
                continue
            elif isinstance(value, str | bool | int | float) and key != "event":
                found[f"synopsis.{key}"] = value
        return found | self._tenant(getattr(event, "tenant", None))

    def _tenant(self, tenant: str | None) -> Attributes:
        return {"synopsis.tenant": tenant} if self._trace_tenant and tenant else {}
