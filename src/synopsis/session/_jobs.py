"""The session-memory workflows, written once as flows of store, model and event steps.

Each workflow is a generator (see :mod:`synopsis._flow`) that yields frozen steps and is sent
their results, or has their exceptions thrown into it:

* :class:`StoreCall` calls one method of the session store (``store.<method>(*args, **kwargs)``);
* :class:`Summarize` asks the summarizer for a summary, within ``timeout`` seconds;
* :class:`Emit` delivers one event to the handlers.

The flows decide everything: when a turn admits a job, which messages a job summarizes, how a
failed stage becomes a ``SessionMemoryFailed`` event, when a deleted user's result is thrown
away. :class:`~synopsis.session.memory.SessionMemory` and its asyncio twin only carry the steps
out, so both deliver the same events in the same order. The flows do no I/O; they read and
update this process's :class:`~synopsis.session._state.Registry` and read the clock given to
them in the :class:`Runtime`.

Across replicas the store decides. A turn that admits a job reads the user's deletion
generation; the job claims its session in the store (``claim_summary_job``) before it calls
the model, and skips (``claimed_elsewhere``, no model call) while another replica holds the
claim. The background job's dual write:

1. ``save_summary`` stores version ``n + 1`` and, in the same transaction, an outbox entry;
2. ``put`` writes the same text as a memory of kind ``"summary"`` under ``summary-v{n+1}``;
3. ``complete_outbox`` closes the entry; if 2 or 3 fails, ``fail_outbox`` counts the failure
   on the entry and :func:`recover` replays it later.

1 and 2 carry the generation: after a ``delete_user`` by any process the store refuses them
(``UserDeleted``) and the job ends ``deleted``, leaving nothing. Then the claim is released.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from synopsis._flow import Emit, Flow, StoreCall
from synopsis.errors import InvalidSummary, ModelTimeout, UserDeleted
from synopsis.events import OutboxReplayed, SessionEvent, failure
from synopsis.memory import TRANSCRIPT_KINDS, OutboxEntry, SearchHit, SearchMode, SessionSummary
from synopsis.memory.kinds import KindFilter, check_kind_filter
from synopsis.memory.rules import validate_tenant
from synopsis.session._events import summarize_timeout_error
from synopsis.session._redaction import (
    SummaryRequest,
    context_inputs,
    redacted_text,
    summary_request,
)
from synopsis.session._state import (
    Job,
    Registry,
    ScheduleResult,
    new_job,
    saved_event,
    started_event,
)
from synopsis.session.context import (
    build_messages,
    injected_summary,
    is_due,
    memory_tags,
    next_summary,
    recall_query,
    split_system,
    summary_key,
    summary_namespace,
    summary_span,
    summary_text,
    truncation,
)
from synopsis.session.options import SessionOptions
from synopsis.summarizer import Summarize

__all__ = [
    "JobOutcome",
    "Runtime",
    "Step",
    "StoreCall",
    "admit_turn",
    "build_context",
    "claim_lease",
    "delete_user",
    "dual_write",
    "recall",
    "recall_kinds",
    "recover",
    "run_job",
    "store_call",
    "summarize_and_write",
    "timed_out",
    "write_memory",
]

#: How a background job ended: ``failed`` (nothing saved; the session cools down), ``saved``
#: (the summary is stored, its memory write failed and waits in the outbox), ``done``,
#: ``deleted`` (the user was deleted meanwhile; nothing kept) or ``claimed_elsewhere``
#: (another replica holds the session's job; no model call).
JobOutcome = Literal["failed", "saved", "done", "deleted", "claimed_elsewhere"]

#: How a memory write ended: written, ``failed`` (counted on its outbox entry) or refused
#: because the user was ``deleted``.
MemoryWrite = Literal["written", "failed", "deleted"]

#: The store methods a flow may call: the :class:`~synopsis.memory._types.SessionStore` contract.
StoreMethod = Literal[
    "latest_summary",
    "save_summary",
    "put",
    "complete_outbox",
    "fail_outbox",
    "pending_outbox",
    "search",
    "delete_user",
    "deletion_generation",
    "claim_summary_job",
    "release_summary_job",
]

#: Jobs replay at most this many pending outbox entries after a success.
REPLAY_AFTER_JOB = 10
#: A job's claim outlives its model call by this many seconds (the writes come after it).
CLAIM_MARGIN: Final = 60.0
#: The claim of a job whose model call has no time limit.
UNTIMED_CLAIM: Final = 3600.0


# ---------------------------------------------------------------------------------------------
# Steps


Step = StoreCall | Summarize | Emit[SessionEvent]


def timed_out(step: Summarize) -> ModelTimeout:
    """The error of a summarizer call that outlived ``step.timeout``: the same in both
    drivers, which throw it into the flow instead of the call's result."""
    return summarize_timeout_error(step.timeout or 0.0)


def store_call(method: StoreMethod, *args: Any, **kwargs: Any) -> StoreCall:
    """``store_call("put", tenant, ns, key, text, kind="summary")`` reads like the call."""
    return StoreCall(method, args, kwargs)


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the job flows use besides steps: the options, this process's registry, the clock,
    and ``owner``, the name this process's claims carry in the store (unique per memory)."""

    options: SessionOptions
    registry: Registry
    clock: Callable[[], float]
    owner: str


def claim_lease(options: SessionOptions) -> float:
    """How long a job's claim lasts: its model call's time limit, plus the writes' margin.

    A process that dies holding a claim blocks the session's jobs for at most this long.
    """
    return (options.summarize_timeout or UNTIMED_CLAIM) + CLAIM_MARGIN


# ---------------------------------------------------------------------------------------------
# After each turn


def admit_turn(
    runtime: Runtime,
    ids: tuple[str, str, str],
    messages: Sequence[Mapping[str, Any]],
    *,
    closed: bool,
    has_summarizer: bool,
) -> Flow[Step, tuple[ScheduleResult, Job | None]]:
    """Decide whether this turn starts a job; a job is returned claimed, ready to run.

    An admitted job carries the user's deletion generation, read now: a ``delete_user`` by
    any process from here on makes the store refuse the job's writes.
    """
    if closed:
        return ScheduleResult(scheduled=False, reason="closed"), None
    if not has_summarizer:
        return ScheduleResult(scheduled=False, reason="no_summarizer"), None
    tenant, user_id, session_id = ids
    key = (validate_tenant(tenant), user_id, session_id)
    try:
        covers = yield from _known_covers(runtime, key)
    except Exception as exc:
        return (yield from _not_admitted(key, exc))
    result = runtime.registry.admit(key, len(messages), covers, runtime.options.summarize_every)
    if not result.scheduled:
        return result, None
    try:
        generation: int = yield store_call("deletion_generation", tenant, user_id)
    except Exception as exc:
        runtime.registry.release(key, failed=False)
        return (yield from _not_admitted(key, exc))
    return result, new_job(key, messages, generation)


def _known_covers(runtime: Runtime, key: tuple[str, str, str]) -> Flow[Step, int]:
    """Where the session's latest summary ends: known in this process, else read once."""
    covers = runtime.registry.known_covers(key)
    if covers is None:
        latest = yield store_call("latest_summary", *key)
        covers = latest.covers_to if latest else 0
        runtime.registry.remember_covers(key, covers)
    return covers


def _not_admitted(
    key: tuple[str, str, str], exc: Exception
) -> Flow[Step, tuple[ScheduleResult, None]]:
    """A store outage at admission: reported, and the turn goes on without a job."""
    tenant, _, session_id = key
    yield Emit(failure("load_summary", tenant, session_id, exc))
    return ScheduleResult(scheduled=False, reason="error"), None


# ---------------------------------------------------------------------------------------------
# The background job


def run_job(runtime: Runtime, job: Job) -> Flow[Step, JobOutcome]:
    """The whole job: summarize and write, release the session, then replay what others left.

    The session is released when the flow ends or is closed (a cancelled task), so a driver
    that stops early must ``close()`` the flow.
    """
    outcome: JobOutcome = "failed"
    try:
        outcome = yield from _claimed(runtime, job)
    except Exception as exc:  # last resort: a background job must not die silently
        yield Emit(failure("job", job.tenant, job.session_id, exc))
    finally:
        runtime.registry.release(job.key, failed=outcome == "failed")
    if outcome == "done":  # the store just worked: replay what earlier jobs left
        yield from recover(job.tenant, limit=REPLAY_AFTER_JOB)
    return outcome


def _claimed(runtime: Runtime, job: Job) -> Flow[Step, JobOutcome]:
    """Claim the session in the store, summarize and write, release the claim.

    A job that ends with an error releases its claim too; one that is closed (a cancelled
    task) or whose process dies leaves it to expire.
    """
    claimed = yield store_call(
        "claim_summary_job",
        *job.key,
        covers_to=len(job.messages),
        owner=runtime.owner,
        lease_seconds=claim_lease(runtime.options),
    )
    if not claimed:
        return "claimed_elsewhere"
    try:
        outcome = yield from summarize_and_write(runtime, job)
    except Exception:
        yield from _release(runtime, job)
        raise
    yield from _release(runtime, job)
    return outcome


def _release(runtime: Runtime, job: Job) -> Flow[Step, None]:
    """Let the session's claim go; if the store cannot, the claim expires on its own."""
    with contextlib.suppress(Exception):
        yield store_call("release_summary_job", *job.key, owner=runtime.owner)


def summarize_and_write(runtime: Runtime, job: Job) -> Flow[Step, JobOutcome]:
    """Summarize the messages past the latest summary, then make the dual write."""
    prev = yield store_call("latest_summary", *job.key)
    covers = prev.covers_to if prev else 0
    runtime.registry.remember_covers(job.key, covers)
    start, end = summary_span(job.messages, covers)
    if not is_due(end, covers, runtime.options.summarize_every):
        return "done"  # a newer summary (another replica) or an open tool call left too little
    request = summary_request(runtime.options.redact, job.messages[start:end], prev)
    yield Emit(started_event(job, start, end, prev, redacted=request.redacted))
    summary = yield from _summarize(runtime, job, prev, request, end)
    if summary is None:
        return "failed"
    return (yield from dual_write(runtime, job, summary))


def _summarize(
    runtime: Runtime, job: Job, prev: SessionSummary | None, request: SummaryRequest, end: int
) -> Flow[Step, SessionSummary | None]:
    """The next summary version of the request's messages (which end at ``end``); None
    (reported) on failure."""
    options = runtime.options
    try:
        result = yield Summarize(
            messages=request.messages,
            previous_summary=request.previous_summary,
            session_id=job.session_id,
            timeout=options.summarize_timeout,
        )
        summary = next_summary(
            tenant=job.tenant,
            user_id=job.user_id,
            session_id=job.session_id,
            previous=prev,
            result=result,
            covers_to=end,
            now=runtime.clock(),
            max_chars=options.max_summary_chars,
            redactor=options.redact,
        )
    except InvalidSummary as exc:
        yield Emit(failure("invalid_summary", job.tenant, job.session_id, exc))
        return None
    except Exception as exc:
        yield Emit(failure("summarize", job.tenant, job.session_id, exc))
        return None
    limit = options.max_summary_chars or 0
    answer = redacted_text(options.redact, summary_text(result))
    cut = truncation(summary, answer, target="stored", unit="chars", limit=limit)
    if cut is not None:
        yield Emit(cut)
    return summary


def dual_write(runtime: Runtime, job: Job, summary: SessionSummary) -> Flow[Step, JobOutcome]:
    """Save the new version, then its memory copy; a user deleted meanwhile keeps nothing.

    Both writes carry the job's generation, so the store refuses them once the user has been
    deleted, by this process or any other: no summary, no memory, no event.
    """
    try:
        saved = yield store_call("save_summary", summary, generation=job.generation)
    except UserDeleted:
        return "deleted"
    except Exception as exc:
        yield Emit(failure("save", job.tenant, job.session_id, exc))
        return "failed"
    runtime.registry.remember_covers(job.key, saved.covers_to)
    written = yield from write_memory(saved, job.generation)
    if written == "deleted":  # deleted between the writes: the deletion took the summary too
        return "deleted"
    yield Emit(saved_event(saved, written == "written"))
    return "done" if written == "written" else "saved"


def write_memory(summary: SessionSummary, generation: int) -> Flow[Step, MemoryWrite]:
    """The second write plus its outbox completion; a failure is counted on the entry.

    The put carries the user's ``generation``: after a deletion the store refuses it, and
    there is nothing left to count (the deletion took the outbox entry).
    """
    entry = (summary.tenant, summary.user_id, summary.session_id, summary.version)
    try:
        yield store_call(
            "put",
            summary.tenant,
            summary_namespace(summary.user_id, summary.session_id),
            summary_key(summary.version),
            summary.text,
            kind="summary",
            tags=memory_tags(summary),
            generation=generation,
        )
        yield store_call("complete_outbox", *entry)
    except UserDeleted:
        return "deleted"
    except Exception as exc:
        attempts = yield from _count_failure(entry)
        yield Emit(
            failure("memory_write", summary.tenant, summary.session_id, exc, attempts=attempts)
        )
        return "failed"
    return "written"


def _count_failure(entry: tuple[str, str, str, int]) -> Flow[Step, int | None]:
    """Count a failed write on its outbox entry; None if the store could not count it."""
    try:
        attempts: int = yield store_call("fail_outbox", *entry)
    except Exception:  # the store is down too; the entry keeps its count
        return None
    return attempts


def recover(tenant: str | None, *, limit: int) -> Flow[Step, int]:
    """Replay pending entries, fewest failures first; return how many completed.

    An entry of a user deleted since it was read is refused by the store and skipped.
    """
    try:
        entries: list[OutboxEntry] = yield store_call("pending_outbox", tenant, limit=limit)
    except Exception as exc:
        yield Emit(failure("recover", tenant or "*", None, exc))
        return 0
    done = 0
    for entry in entries:
        summary = entry.summary
        if (yield from write_memory(summary, entry.generation)) == "written":
            done += 1
            yield Emit(
                OutboxReplayed(
                    tenant=summary.tenant, session_id=summary.session_id, version=summary.version
                )
            )
    return done


# ---------------------------------------------------------------------------------------------
# Building a request, recall, deletion


def build_context(
    options: SessionOptions,
    ids: tuple[str, str, str],
    messages: Sequence[Mapping[str, Any]],
    *,
    system_prompt: str | None,
    query: str | None,
) -> Flow[Step, list[dict[str, Any]]]:
    """System prompt + summary, [recalled notes], recent window; a store outage degrades."""
    tenant, user_id, session_id = ids
    validate_tenant(tenant)
    system, body = split_system(messages, system_prompt)
    offset = len(messages) - len(body)  # the history's own leading system messages
    summary = None
    try:
        summary = yield store_call("latest_summary", tenant, user_id, session_id)
    except Exception as exc:
        yield Emit(failure("load_summary", tenant, session_id, exc))
    summary, cut = injected_summary(options, summary)
    if cut is not None:
        yield Emit(cut)
    question = recall_query(body, query)
    hits = yield from _recall_notes(options, ids, question)
    body, summary, hits = context_inputs(options.redact, body, summary, hits)
    return build_messages(
        options,
        system=system,
        body=body,
        summary=summary,
        hits=hits,
        query=question,
        user_id=user_id,
        session_id=session_id,
        offset=offset,
    )


def _recall_notes(
    options: SessionOptions, ids: tuple[str, str, str], question: str | None
) -> Flow[Step, list[SearchHit]]:
    """Hybrid mode's candidate memories of the user (never stored transcripts); none when
    recall is off or fails."""
    tenant, user_id, session_id = ids
    if not (options.hybrid and question and options.recall_limit):
        return []
    try:
        hits: list[SearchHit] = yield store_call(
            "search",
            tenant,
            ("user", user_id),
            query=question,
            exclude_kinds=TRANSCRIPT_KINDS,
            limit=options.recall_limit * 4,
            mode=options.recall_mode,
        )
    except Exception as exc:
        yield Emit(failure("recall", tenant, session_id, exc))
        return []
    return hits


def recall_kinds(kind: object, exclude_kinds: object) -> KindFilter:
    """The kind filter of a recall, checked: ``exclude_kinds`` None means the default, which
    leaves out :data:`~synopsis.memory.TRANSCRIPT_KINDS` unless ``kind`` says what to find."""
    if exclude_kinds is None:
        exclude_kinds = () if kind is not None else TRANSCRIPT_KINDS
    return check_kind_filter(kind, exclude_kinds)


def recall(
    options: SessionOptions,
    tenant: str,
    user_id: str,
    query: str,
    *,
    limit: int,
    kinds: KindFilter,
    mode: SearchMode | None,
) -> Flow[Step, list[SearchHit]]:
    """Search every memory of the user (``kinds``: :func:`recall_kinds`); ``mode`` defaults
    to the configured recall mode."""
    hits: list[SearchHit] = yield store_call(
        "search",
        tenant,
        ("user", user_id),
        query=query,
        kind=kinds[0],
        exclude_kinds=kinds[1],
        limit=limit,
        mode=mode or options.recall_mode,
    )
    return hits


def delete_user(registry: Registry, tenant: str, user_id: str) -> Flow[Step, int]:
    """Delete the user's data; the store refuses the writes of jobs admitted before, here or
    in any other process (the deletion moves the user's generation)."""
    registry.forget_user(validate_tenant(tenant), user_id)
    deleted: int = yield store_call("delete_user", tenant, user_id)
    return deleted
