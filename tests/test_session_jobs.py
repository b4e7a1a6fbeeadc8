"""The session-memory flows, driven by a tiny in-test ``perform`` (parity: test_session_parity)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from synopsis._flow import Emit, Flow, drive
from synopsis.errors import ProviderUnavailable, StoreError
from synopsis.events import SessionEvent, SessionMemoryFailed
from synopsis.memory import TRANSCRIPT_KINDS
from synopsis.memory.inmemory import InMemoryStore
from synopsis.models.retry import RetryPolicy
from synopsis.session._jobs import (
    Runtime,
    Step,
    StoreCall,
    admit_turn,
    build_context,
    delete_user,
    recall,
    recall_kinds,
    recover,
    run_job,
    timed_out,
)
from synopsis.session._state import Job, Registry, ScheduleResult
from synopsis.session.options import SessionOptions
from synopsis.summarizer import Summarize, Summarizer, SummaryResult
from synopsis.testing import BigramEmbedder, FakeClock, FakeModel, Reply

T, U, S = "acme", "u1", "s1"
KEY = (T, U, S)
GOOD = "<summary>1. Primary Request and Intent: the user asked about coffee.</summary>"
NO_RETRY = RetryPolicy(max_retries=0)


def turns(count: int) -> list[dict[str, Any]]:
    """Alternating user/assistant messages."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about coffee"}
        for i in range(count)
    ]


def summarizer(*replies: Reply) -> Summarizer:
    """A Summarizer over a FakeModel: ``replies`` first, then good summaries."""
    return Summarizer(model=FakeModel(replies, default=GOOD), retry=NO_RETRY)


class FunctionSummarizer:
    """Answers ``result`` to every call."""

    def __init__(self, result: SummaryResult) -> None:
        self.result = result

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        return self.result


class BlankSummarizer:
    """Answers blank text: an invalid summary."""

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        return SummaryResult(text="   ", model="fake:model", attempts=1)


def step_names(steps: Sequence[Step]) -> list[str]:
    """Store calls by method, events by name, ``summarize`` for the model call."""
    names = []
    for step in steps:
        if isinstance(step, StoreCall):
            names.append(step.method)
        elif isinstance(step, Emit):
            names.append(step.event.name)
        else:
            names.append("summarize")
    return names


@dataclass
class Harness:
    """A registry, an in-memory store and a summarizer; ``perform`` records every step.

    ``fail`` maps a store method to the error it raises; ``before`` runs a hook just before
    the named step (a store method or ``summarize``).
    """

    summarizer: Any = field(default_factory=summarizer)
    store: InMemoryStore = field(default_factory=InMemoryStore)
    hybrid: bool = False
    fail: dict[str, Exception] = field(default_factory=dict)
    before: dict[str, Callable[[], object]] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    events: list[SessionEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clock = FakeClock()
        self.registry = Registry(self.clock, 60.0)
        options = SessionOptions(
            summarize_every=10, window_messages=4, hybrid=self.hybrid, recall_limit=3
        )
        self.runtime = Runtime(options, self.registry, self.clock, owner="replica-1")

    def perform(self, step: Step) -> Any:
        self.steps.append(step)
        name = step_names([step])[0]
        if name in self.before:
            self.before.pop(name)()
        if isinstance(step, Emit):
            self.events.append(step.event)
            return None
        if name in self.fail:
            raise self.fail[name]
        return step.on(self.store if isinstance(step, StoreCall) else self.summarizer)

    def run(self, flow: Flow[Step, Any]) -> Any:
        return drive(flow, self.perform)

    def admit(self, messages: list[dict[str, Any]]) -> tuple[ScheduleResult, Job | None]:
        flow = admit_turn(self.runtime, (T, U, S), messages, closed=False, has_summarizer=True)
        return self.run(flow)  # type: ignore[no-any-return]

    def job(self, messages: list[dict[str, Any]]) -> Job:
        """Admit a due turn and forget the admission's steps."""
        _, job = self.admit(messages)
        assert job is not None
        self.steps.clear()
        return job

    def failed_stages(self) -> list[str]:
        return [e.stage for e in self.events if isinstance(e, SessionMemoryFailed)]


# ---------------------------------------------------------------------------------------------
# Admission


def test_admission_reads_the_latest_summary_once_per_session() -> None:
    """The store is read when the registry does not know the covers; then never again. An
    admitted job also reads the user's deletion generation."""
    harness = Harness()
    result, job = harness.admit(turns(5))
    assert (result.reason, result.pending_messages, job) == ("not_due", 5, None)
    assert step_names(harness.steps) == ["latest_summary"]
    result, job = harness.admit(turns(10))
    assert result.scheduled and job is not None and job.messages == turns(10)
    assert step_names(harness.steps) == ["latest_summary", "deletion_generation"]


def test_an_admitted_job_carries_the_users_deletion_generation() -> None:
    """The generation read at admission is the one the job's writes are made with."""
    harness = Harness()
    harness.store.delete_user(T, U)
    harness.store.delete_user(T, U)
    assert harness.job(turns(10)).generation == 2


def test_a_failed_generation_read_admits_nothing_and_frees_the_session() -> None:
    """The read is reported like the summary read; no job, no cooldown."""
    harness = Harness(fail={"deletion_generation": StoreError("down")})
    result, job = harness.admit(turns(10))
    assert (result.reason, job) == ("error", None)
    assert harness.failed_stages() == ["load_summary"]
    assert harness.registry.claim(KEY) is None


def test_admission_refuses_a_closed_memory_or_one_without_summarizer() -> None:
    """Neither refusal touches the store."""
    harness = Harness()
    for closed, has_summarizer, reason in ((True, True, "closed"), (False, False, "no_summarizer")):
        flow = admit_turn(
            harness.runtime, (T, U, S), turns(30), closed=closed, has_summarizer=has_summarizer
        )
        result, job = harness.run(flow)
        assert (result.reason, job) == (reason, None)
    assert harness.steps == []


def test_a_store_outage_at_admission_is_an_error_not_an_exception() -> None:
    """A failed read becomes a load_summary event and the reason ``error``."""
    harness = Harness(fail={"latest_summary": StoreError("down")})
    result, job = harness.admit(turns(30))
    assert (result.reason, job) == ("error", None)
    assert harness.failed_stages() == ["load_summary"]


# ---------------------------------------------------------------------------------------------
# The background job


def test_a_due_job_summarizes_saves_writes_then_replays_the_outbox() -> None:
    """The whole job, step by step, and what it leaves in the store."""
    harness = Harness()
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "done"
    assert step_names(harness.steps) == [
        "claim_summary_job",
        "latest_summary",
        "session_summary_started",
        "summarize",
        "save_summary",
        "put",
        "complete_outbox",
        "session_summary_saved",
        "release_summary_job",
        "pending_outbox",
    ]
    [ask] = [s for s in harness.steps if isinstance(s, Summarize)]
    assert (ask.previous_summary, ask.session_id, len(ask.messages)) == (None, S, 10)
    latest = harness.store.latest_summary(T, U, S)
    assert latest is not None and (latest.version, latest.covers_to) == (1, 10)
    assert harness.store.get(T, ("user", U, "session", S), "summary-v1") is not None
    assert harness.registry.claim(KEY) is None  # released, no cooldown
    assert harness.store.claim_summary_job(T, U, S, covers_to=0, owner="x", lease_seconds=1)


def test_the_next_job_summarizes_only_new_messages_with_the_previous_summary() -> None:
    """Version 2 covers messages [10, 20) and is given version 1's text."""
    harness = Harness()
    harness.run(run_job(harness.runtime, harness.job(turns(10))))
    harness.run(run_job(harness.runtime, harness.job(turns(20))))
    asks = [s for s in harness.steps if isinstance(s, Summarize)]
    assert [len(a.messages) for a in asks] == [10]
    assert asks[0].previous_summary is not None
    assert [s.version for s in harness.store.summary_history(T, U, S)] == [1, 2]


def test_a_failing_model_fails_the_job_and_cools_the_session_down() -> None:
    """No save; a summarize event; the session is in cooldown."""
    harness = Harness(summarizer=summarizer(ProviderUnavailable("down", model="m")))
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "failed"
    assert step_names(harness.steps)[-2:] == ["session_memory_failed", "release_summary_job"]
    assert harness.failed_stages() == ["summarize"]
    assert harness.store.latest_summary(T, U, S) is None
    assert harness.registry.claim(KEY) == "cooldown"


def test_the_summarize_step_carries_the_time_limit_and_a_timeout_fails_the_job() -> None:
    """A driver throws ``timed_out(step)`` into the flow: a summarize failure, then a cooldown."""
    harness, asks = Harness(), []

    def perform(step: Step) -> Any:
        if isinstance(step, Summarize):
            asks.append(step)
            raise timed_out(step)
        return harness.perform(step)

    assert drive(run_job(harness.runtime, harness.job(turns(10))), perform) == "failed"
    assert [ask.timeout for ask in asks] == [120.0]
    (failed,) = [e for e in harness.events if isinstance(e, SessionMemoryFailed)]
    assert (failed.stage, failed.error["type"]) == ("summarize", "ModelTimeout")
    assert harness.registry.claim(KEY) == "cooldown"


def test_a_huge_summary_is_cut_and_reported_before_it_is_saved() -> None:
    """session_summary_truncated comes between the model call and the save."""
    huge = SummaryResult(text="Coffee notes.\n" * 5_000, model="m", attempts=1)
    harness = Harness(summarizer=FunctionSummarizer(huge))
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "done"
    names = step_names(harness.steps)
    assert names[names.index("summarize") + 1 : names.index("save_summary")] == [
        "session_summary_truncated"
    ]
    latest = harness.store.latest_summary(T, U, S)
    assert latest is not None and len(latest.text) <= 20_000


def test_an_invalid_summary_is_reported_and_not_saved() -> None:
    """Blank text is an invalid_summary failure."""
    harness = Harness(summarizer=BlankSummarizer())
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "failed"
    assert harness.failed_stages() == ["invalid_summary"]
    assert "save_summary" not in step_names(harness.steps)


def test_a_failed_memory_write_is_counted_and_recover_replays_it() -> None:
    """The summary is saved, the put fails (attempt 1), no replay right away; recover writes it."""
    harness = Harness(fail={"put": StoreError("connection lost")})
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "saved"
    assert step_names(harness.steps)[-5:] == [
        "put",
        "fail_outbox",
        "session_memory_failed",
        "session_summary_saved",
        "release_summary_job",
    ]
    [failed] = [e for e in harness.events if isinstance(e, SessionMemoryFailed)]
    assert (failed.stage, failed.attempts) == ("memory_write", 1)
    harness.fail.clear()
    assert harness.run(recover(T, limit=100)) == 1
    assert harness.events[-1].name == "outbox_replayed"
    assert harness.run(recover(T, limit=100)) == 0


def test_a_failure_that_cannot_be_counted_reports_no_attempts() -> None:
    """When fail_outbox fails too, the event says attempts=None."""
    harness = Harness(fail={"put": StoreError("down"), "fail_outbox": StoreError("down")})
    harness.run(run_job(harness.runtime, harness.job(turns(10))))
    [failed] = [e for e in harness.events if isinstance(e, SessionMemoryFailed)]
    assert (failed.stage, failed.attempts) == ("memory_write", None)


def test_a_failed_outbox_read_is_a_recover_failure() -> None:
    """recover() reports the store outage and completes nothing."""
    harness = Harness(fail={"pending_outbox": StoreError("down")})
    assert harness.run(recover(None, limit=5)) == 0
    [failed] = harness.events
    assert isinstance(failed, SessionMemoryFailed)
    assert (failed.stage, failed.tenant, failed.session_id) == ("recover", "*", None)


def test_a_user_deleted_while_the_model_thinks_keeps_nothing() -> None:
    """The store refuses the save (the generation moved): nothing kept, no saved event."""
    harness = Harness()
    harness.before["summarize"] = lambda: harness.run(delete_user(harness.registry, T, U))
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "deleted"
    assert step_names(harness.steps)[-4:] == [
        "summarize",
        "delete_user",  # the hook's, run as the model is asked
        "save_summary",
        "release_summary_job",
    ]
    assert [e.name for e in harness.events] == ["session_summary_started"]
    assert harness.store.latest_summary(T, U, S) is None
    assert harness.registry.claim(KEY) is None  # released without a cooldown


def test_a_user_deleted_between_the_writes_keeps_nothing() -> None:
    """The deletion takes the summary; the store refuses the memory copy; no saved event."""
    harness = Harness()
    harness.before["put"] = lambda: harness.run(delete_user(harness.registry, T, U))
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "deleted"
    assert step_names(harness.steps)[-4:] == [
        "save_summary",
        "put",
        "delete_user",  # the hook's, run as the put is performed
        "release_summary_job",
    ]
    assert [e.name for e in harness.events] == ["session_summary_started"]
    assert harness.store.search(T, ("user", U)) == []
    assert harness.store.latest_summary(T, U, S) is None


def test_a_user_deleted_after_admission_keeps_nothing_even_from_another_process() -> None:
    """A deletion straight in the store (another replica, the CLI) between admission and
    the job: the job's writes carry the old generation and are refused."""
    harness = Harness()
    job = harness.job(turns(10))
    harness.store.delete_user(T, U)
    assert harness.run(run_job(harness.runtime, job)) == "deleted"
    assert harness.store.latest_summary(T, U, S) is None
    assert harness.store.pending_outbox() == []


def test_a_replay_of_a_deleted_users_entry_writes_nothing() -> None:
    """recover() read the entry; the user is deleted before its put; the put is refused."""
    harness = Harness(fail={"put": StoreError("connection lost")})
    harness.run(run_job(harness.runtime, harness.job(turns(10))))
    harness.fail.clear()
    harness.before["put"] = lambda: harness.store.delete_user(T, U)
    assert harness.run(recover(T, limit=10)) == 0
    assert harness.store.search(T, ("user", U)) == []
    assert [e.name for e in harness.events][-1] == "session_summary_saved"  # nothing new


def test_a_session_claimed_by_another_replica_is_skipped_without_a_model_call() -> None:
    """Another owner's live claim: no model call, no event, no cooldown."""
    harness = Harness()
    claim = {"covers_to": 10, "lease_seconds": 60}
    assert harness.store.claim_summary_job(T, U, S, owner="replica-2", **claim)
    outcome = harness.run(run_job(harness.runtime, harness.job(turns(10))))
    assert outcome == "claimed_elsewhere"
    assert step_names(harness.steps) == ["claim_summary_job"]
    assert harness.events == []
    assert harness.registry.claim(KEY) is None


def test_a_claim_lasts_the_model_time_limit_plus_a_margin() -> None:
    """The lease covers the model call and the writes after it."""
    harness = Harness()
    harness.run(run_job(harness.runtime, harness.job(turns(10))))
    calls = [s for s in harness.steps if isinstance(s, StoreCall)]
    [claim] = [call for call in calls if call.method == "claim_summary_job"]
    assert claim.args == (T, U, S)
    assert claim.kwargs == {"covers_to": 10, "owner": "replica-1", "lease_seconds": 180.0}


def test_a_job_that_fails_releases_its_claim() -> None:
    """A failed model call and an unexpected error both let the claim go."""
    harness = Harness(summarizer=summarizer(ProviderUnavailable("down", model="m")))
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "failed"
    assert harness.store.claim_summary_job(T, U, S, covers_to=0, owner="x", lease_seconds=1)
    harness = Harness(fail={"latest_summary": StoreError("down")})
    harness.registry.remember_covers(KEY, 0)
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "failed"
    assert step_names(harness.steps)[-2:] == ["release_summary_job", "session_memory_failed"]


def test_a_failed_release_is_left_to_the_lease() -> None:
    """The job still ends as it would; the claim simply expires."""
    harness = Harness(fail={"release_summary_job": StoreError("down")})
    assert harness.run(run_job(harness.runtime, harness.job(turns(10)))) == "done"
    assert harness.failed_stages() == []


def test_an_unexpected_store_error_in_a_job_is_a_job_failure() -> None:
    """The job's first store call is not guarded by a stage: the last resort reports ``job``."""
    harness = Harness()
    job = harness.job(turns(10))
    harness.fail["claim_summary_job"] = StoreError("down")
    assert harness.run(run_job(harness.runtime, job)) == "failed"
    assert harness.failed_stages() == ["job"]
    assert harness.registry.claim(KEY) == "cooldown"


def test_closing_a_started_job_releases_the_session_as_failed() -> None:
    """A cancelled task closes its flow: the session is free again, after the cooldown."""
    harness = Harness()
    flow = run_job(harness.runtime, harness.job(turns(10)))
    assert step_names([next(flow)]) == ["claim_summary_job"]
    assert harness.registry.claim(KEY) == "in_flight"
    flow.close()
    assert harness.registry.claim(KEY) == "cooldown"


# ---------------------------------------------------------------------------------------------
# Building a request, recall, deletion


def test_build_context_degrades_to_the_window_when_the_store_is_down() -> None:
    """Both reads fail: two events, and the request is the recent window."""
    harness = Harness(
        hybrid=True,
        fail={"latest_summary": StoreError("down"), "search": StoreError("down")},
    )
    flow = build_context(
        harness.runtime.options, (T, U, S), turns(4), system_prompt=None, query=None
    )
    assert harness.run(flow) == turns(4)
    assert harness.failed_stages() == ["load_summary", "recall"]


def test_build_context_searches_only_in_hybrid_mode() -> None:
    """Without hybrid no search step is made."""
    harness = Harness()
    flow = build_context(
        harness.runtime.options, (T, U, S), turns(4), system_prompt="be brief", query=None
    )
    assert harness.run(flow)[0] == {"role": "system", "content": "be brief"}
    assert step_names(harness.steps) == ["latest_summary"]


def test_recall_uses_the_configured_mode_unless_told() -> None:
    """One search step over the user's namespace, with the kind filter it was given."""
    harness = Harness(store=InMemoryStore(embedder=BigramEmbedder()))
    options = harness.runtime.options
    harness.run(recall(options, T, U, "coffee", limit=3, kinds=(None, ()), mode=None))
    harness.run(recall(options, T, U, "coffee", limit=3, kinds=(("x",), ()), mode="hybrid"))
    calls = [s for s in harness.steps if isinstance(s, StoreCall)]
    assert [(c.args, c.kwargs["mode"], c.kwargs["kind"]) for c in calls] == [
        ((T, ("user", U)), "keyword", None),
        ((T, ("user", U)), "hybrid", ("x",)),
    ]


@pytest.mark.parametrize(
    ("kind", "exclude_kinds", "expected"),
    [
        (None, None, (None, tuple(sorted(TRANSCRIPT_KINDS)))),
        ("fact", None, (("fact",), ())),
        (["agents_item", "fact"], None, (("agents_item", "fact"), ())),
        (None, (), (None, ())),
        (None, "summary", (None, ("summary",))),
        ("fact", ["fact"], (("fact",), ("fact",))),
    ],
)
def test_recall_leaves_transcripts_out_unless_told(
    kind: object, exclude_kinds: object, expected: object
) -> None:
    """By default recall excludes the transcript kinds; a ``kind`` or an explicit
    ``exclude_kinds`` replaces that default."""
    assert recall_kinds(kind, exclude_kinds) == expected


def test_build_context_recalls_no_transcripts() -> None:
    """Hybrid build_context searches the user's memories without the transcript kinds."""
    harness = Harness(hybrid=True)
    flow = build_context(
        harness.runtime.options, (T, U, S), turns(2), system_prompt=None, query="coffee"
    )
    harness.run(flow)
    [search] = [s for s in harness.steps if isinstance(s, StoreCall) and s.method == "search"]
    assert set(search.kwargs["exclude_kinds"]) == TRANSCRIPT_KINDS and "kind" not in search.kwargs


def test_delete_user_forgets_only_that_users_sessions() -> None:
    """The known summary ends of the user's sessions go; other users' stay."""
    harness = Harness()
    harness.registry.remember_covers((T, U, S), 10)
    harness.registry.remember_covers((T, "u2", S), 20)
    assert harness.run(delete_user(harness.registry, T, U)) == 0
    assert harness.registry.known_covers((T, U, S)) is None
    assert harness.registry.known_covers((T, "u2", S)) == 20
    assert harness.store.deletion_generation(T, U) == 1
