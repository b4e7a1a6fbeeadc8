"""Durable summary jobs: a queue table any replica can work from.

Why a table of our own rather than a queue library (procrastinate, pgqueuer): a job here is
"summarize this session up to where it is now", at most one open per session, and the work it
does is already idempotent (summary versions are unique per session and the memory copy has a
deterministic key). That needs a claim, a lease and a retry time: four columns and one
statement, on the database the service already has, identical on SQLite and PostgreSQL. A
library would bring its own schema, migrations and worker process model, and would not run on
SQLite, where we still want jobs to survive a restart.

How it works:

* **enqueue**: an append that makes a session due inserts ``(tenant, user, session)``; a unique
  index over open jobs makes a second insert for the same session a no-op.
* **claim**: ``UPDATE ... WHERE id = (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT 1)`` takes the
  oldest ready job that nobody holds (no lease, or a lease that ran out) and stamps the
  worker's id and a lease on it; concurrent claimers skip each other's rows instead of waiting.
  SQLite serializes writers, so the same statement without the lock clause is just as safe.
* **renew**: a running job extends its lease every third of it; a worker that dies (SIGKILL,
  lost machine) stops renewing, and once the lease ran out any replica claims the job again.
* **finish**: success deletes the row; a failure sets the lease free with a backoff, and after
  ``max_attempts`` the row is set aside (``finished_at``) with its last error.

Exactly-once survives a replica dying at any point: a job that was re-run finds the summary
version it saved (not due any more), or saves the same version (the store refuses a second
one), and a summary whose memory copy was not written waits in the store's outbox, which every
replica replays (:meth:`SummaryWorkers.replay_outbox`); the copy's key is deterministic, so a
replay is an upsert.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from synopsis import AsyncSessionMemory, Redactor, SessionMemoryFailed
from synopsis.events import SessionEvent
from synopsis.memory import AsyncSessionStore
from synopsis.server._sql import Dialect, Plan, Statement
from synopsis.server.db import AsyncDatabase
from synopsis.server.options import ServerOptions
from synopsis.server.sessions import AsyncSessionHistories

__all__ = ["ClaimedJob", "JobQueue", "SummaryWorkers"]

_log = logging.getLogger("synopsis.server.jobs")
#: Failures after which the job is worth running again; a failed memory write is not one
#: (the summary is saved and its copy waits in the outbox).
_RETRY_STAGES = frozenset({"load_summary", "summarize", "invalid_summary", "save", "job"})
_MAX_BACKOFF = 300.0
#: A job that ran but left its own history due (the session's claim held elsewhere, or an
#: open tool call leaves too little) is queued again this many seconds later, not at once.
_STALLED_DELAY = 5.0
#: The advisory lock key of the due-session sweep (any constant shared by the replicas).
_SWEEP_LOCK = 0x53594E5357
#: Sessions one sweep looks at.
_SWEEP_LIMIT = 1000

JobOutcome = Literal["done", "stalled", "retry", "gone"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedJob:
    id: int
    tenant: str
    user_id: str
    session_id: str
    attempts: int


# --- plans (pure) ----------------------------------------------------------------------------


def enqueue_plan(
    d: Dialect, tenant: str, user: str, session: str, now: float, *, delay: float = 0.0
) -> Plan[bool]:
    """Queue a summary job for the session, ready in ``delay`` seconds; False when one is
    already open."""
    rows = yield Statement(
        f"INSERT INTO {d.table('jobs')} (tenant, user_id, session_id, created_at, run_after)"
        " VALUES (:tenant, :user, :session, :now, :run_after) ON CONFLICT DO NOTHING"
        " RETURNING id",
        {"tenant": tenant, "user": user, "session": session, "now": now, "run_after": now + delay},
    )
    return bool(rows)


def claim_plan(d: Dialect, owner: str, now: float, lease: float) -> Plan[ClaimedJob | None]:
    """Take the oldest ready job nobody holds, for ``lease`` seconds."""
    jobs = d.table("jobs")
    rows = yield Statement(
        f"UPDATE {jobs} SET lease_owner = :owner, lease_until = :until, attempts = attempts + 1"
        f" WHERE id = (SELECT id FROM {jobs} WHERE finished_at IS NULL AND run_after <= :now"
        " AND (lease_until IS NULL OR lease_until < :now) ORDER BY run_after, id"
        f" LIMIT 1{d.skip_locked})"
        " RETURNING id, tenant, user_id, session_id, attempts",
        {"owner": owner, "now": now, "until": now + lease},
    )
    if not rows:
        return None
    job_id, tenant, user, session, attempts = rows[0]
    return ClaimedJob(
        id=int(job_id), tenant=tenant, user_id=user, session_id=session, attempts=int(attempts)
    )


def _update_held(d: Dialect, assignment: str) -> str:
    """An UPDATE of one job, only while ``:owner`` still holds it."""
    return (
        f"UPDATE {d.table('jobs')} SET {assignment} WHERE id = :id AND lease_owner = :owner"
        " AND finished_at IS NULL RETURNING id"
    )


def renew_plan(d: Dialect, job: ClaimedJob, owner: str, until: float) -> Plan[bool]:
    """Extend the lease; False when the job is no longer ours (finished, deleted, re-claimed)."""
    rows = yield Statement(
        _update_held(d, "lease_until = :until"), {"id": job.id, "owner": owner, "until": until}
    )
    return bool(rows)


def finish_plan(d: Dialect, job: ClaimedJob, owner: str) -> Plan[bool]:
    rows = yield Statement(
        f"DELETE FROM {d.table('jobs')} WHERE id = :id AND lease_owner = :owner RETURNING id",
        {"id": job.id, "owner": owner},
    )
    return bool(rows)


def retry_plan(
    d: Dialect, job: ClaimedJob, owner: str, *, run_after: float | None, now: float, error: str
) -> Plan[bool]:
    """Free the job for another try at ``run_after``; None sets it aside for good."""
    free = "lease_owner = NULL, lease_until = NULL, last_error = :error"
    if run_after is None:
        assignment = f"{free}, finished_at = :now"
    else:
        assignment = f"{free}, run_after = :run_after"
    rows = yield Statement(
        _update_held(d, assignment),
        {"id": job.id, "owner": owner, "run_after": run_after, "now": now, "error": error[:2000]},
    )
    return bool(rows)


def due_candidates_plan(
    d: Dialect, every: int, limit: int
) -> Plan[list[tuple[str, str, str, int]]]:
    """Sessions long enough to be due that have no job row at all (none open, none set
    aside after failing), newest first: what a sweep checks against their summaries.

    On PostgreSQL one replica sweeps at a time (a transaction-scoped advisory lock; another
    replica sweeping at that moment gets nothing and tries again at its next sweep).
    """
    if d.name == "postgres":
        locked = yield Statement("SELECT pg_try_advisory_xact_lock(:lock)", {"lock": _SWEEP_LOCK})
        if not locked[0][0]:
            return []
    sessions, jobs = d.table("sessions"), d.table("jobs")
    rows = yield Statement(
        f"SELECT s.tenant, s.user_id, s.session_id, s.message_count FROM {sessions} s"
        " WHERE s.message_count >= :every AND NOT EXISTS (SELECT 1 FROM"
        f" {jobs} j WHERE j.tenant = s.tenant AND j.session_id = s.session_id)"
        " ORDER BY s.updated_at DESC LIMIT :limit",
        {"every": every, "limit": limit},
    )
    return [(str(t), str(u), str(s), int(n)) for t, u, s, n in rows]


def depth_plan(d: Dialect) -> Plan[int]:
    """Open jobs (queued or running)."""
    rows = yield Statement(f"SELECT count(*) FROM {d.table('jobs')} WHERE finished_at IS NULL")
    return int(rows[0][0])


def backoff(attempts: int) -> float:
    """Seconds before try ``attempts + 1``: 5, 10, 20, ... capped at five minutes."""
    return min(5.0 * 2.0 ** max(attempts - 1, 0), _MAX_BACKOFF)


# --- the queue -------------------------------------------------------------------------------


class JobQueue:
    """The queue's operations on the server's database."""

    def __init__(self, db: AsyncDatabase, *, owner: str | None = None) -> None:
        self._db = db
        self.owner = owner or f"{uuid.uuid4().hex[:12]}"

    async def enqueue(self, tenant: str, user: str, session: str, *, delay: float = 0.0) -> bool:
        return await self._db.run(
            enqueue_plan(self._db.dialect, tenant, user, session, self._db.clock(), delay=delay)
        )

    async def claim(self, lease: float) -> ClaimedJob | None:
        return await self._db.run(claim_plan(self._db.dialect, self.owner, self._db.clock(), lease))

    async def renew(self, job: ClaimedJob, lease: float) -> bool:
        until = self._db.clock() + lease
        return await self._db.run(renew_plan(self._db.dialect, job, self.owner, until))

    async def finish(self, job: ClaimedJob) -> bool:
        return await self._db.run(finish_plan(self._db.dialect, job, self.owner))

    async def retry(self, job: ClaimedJob, *, max_attempts: int, error: str) -> bool:
        now = self._db.clock()
        run_after = None if job.attempts >= max_attempts else now + backoff(job.attempts)
        plan = retry_plan(
            self._db.dialect, job, self.owner, run_after=run_after, now=now, error=error
        )
        return await self._db.run(plan)

    async def depth(self) -> int:
        return await self._db.run(depth_plan(self._db.dialect), write=False)

    async def due_candidates(self, every: int) -> list[tuple[str, str, str, int]]:
        return await self._db.run(due_candidates_plan(self._db.dialect, every, _SWEEP_LIMIT))


# --- the workers -----------------------------------------------------------------------------


class SummaryWorkers:
    """``options.workers`` tasks that claim and run summary jobs, plus an outbox replayer."""

    def __init__(
        self,
        *,
        queue: JobQueue,
        histories: AsyncSessionHistories,
        store: AsyncSessionStore,
        summarizer: Any,
        options: ServerOptions,
        on_event: Callable[[SessionEvent], None] = lambda event: None,
        redact: Redactor | None = None,
    ) -> None:
        self.queue = queue
        #: Redacts what a job sends its summarizer and stores (None: off).
        self.redact = redact
        self._histories = histories
        self._store = store
        self._summarizer = summarizer
        self._options = options
        self._on_event = on_event
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self.running = 0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for number in range(self._options.workers):
            self._tasks.append(loop.create_task(self._work(), name=f"synopsis-job-{number}"))
        replay = self._every(self._options.outbox_seconds, self.replay_outbox, "outbox replay")
        sweep = self._every(self._options.sweep_seconds, self.sweep, "the due-session sweep")
        self._tasks.append(loop.create_task(replay, name="synopsis-outbox"))
        self._tasks.append(loop.create_task(sweep, name="synopsis-sweep"))

    def wake(self) -> None:
        """A job was queued here: idle workers look now instead of at their next poll."""
        self._wake.set()

    async def stop(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Take no new jobs; wait up to ``timeout`` s for running ones; False if cut short."""
        self._stopping = True
        self._stop.set()
        self._wake.set()
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(self._tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return not pending

    async def _work(self) -> None:
        while not self._stopping:
            try:
                job = await self.queue.claim(self._options.lease_seconds)
            except Exception:
                _log.exception("could not claim a job")
                job = None
            if job is None:
                await self._idle()
                continue
            self.running += 1
            try:
                await self._run_leased(job)
            finally:
                self.running -= 1

    async def _idle(self) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self._options.poll_seconds)

    async def _run_leased(self, job: ClaimedJob) -> None:
        renewing = asyncio.get_running_loop().create_task(self._renew(job))
        try:
            outcome, error = await self.run_job(job)
        except Exception as exc:  # a job must never take its worker down
            _log.exception("summary job %s failed", job.id)
            outcome, error = "retry", repr(exc)
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        try:
            if outcome == "retry":
                await self.queue.retry(job, max_attempts=self._options.max_attempts, error=error)
            else:
                await self.queue.finish(job)
        except Exception:  # the lease runs out and the job is retried
            _log.exception("could not record the end of job %s", job.id)
        if outcome in ("done", "stalled"):
            # Queued again at once, a stalled job would spin on a claim held elsewhere.
            await self._requeue_if_due(job, delay=_STALLED_DELAY if outcome == "stalled" else 0)

    async def _renew(self, job: ClaimedJob) -> None:
        lease = self._options.lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            try:
                if not await self.queue.renew(job, lease):
                    _log.warning("lost the lease of job %s; it may run twice (harmless)", job.id)
                    return
            except Exception:
                _log.exception("could not renew the lease of job %s", job.id)

    async def run_job(self, job: ClaimedJob) -> tuple[JobOutcome, str]:
        """Summarize the session as far as it is due, with the library's session memory."""
        info = await self._histories.info(job.tenant, job.session_id)
        if info is None or info.user_id != job.user_id:
            return "gone", ""
        messages = await self._histories.history(job.tenant, job.session_id)
        ids, owner = (job.tenant, job.user_id, job.session_id), f"synopsis-serve-job-{job.id}"
        failures: list[SessionMemoryFailed] = []

        def collect(event: SessionEvent) -> None:
            if isinstance(event, SessionMemoryFailed):
                failures.append(event)
            self._on_event(event)

        memory = AsyncSessionMemory(
            store=self._store,
            summarizer=self._summarizer,
            summarize_every=self._options.summarize_every,
            on_event=[collect],
            redact=self.redact,
            # The queue row is this worker's alone; naming the session claim after the job lets
            # a retry of the same job (after a crash or a shutdown) take its own claim back.
            owner=owner,
        )
        result = await memory.after_turn(*ids, messages)
        await memory.aclose()
        if not result.scheduled:
            # An attempt of this job killed after its summary was saved but before it let the
            # session's claim go: nothing is due now, so no attempt takes the claim back, and
            # the session's next jobs would wait for it to expire. A no-op when not held.
            await self._store.release_summary_job(*ids, owner=owner)
        await self._forget_if_deleted(job, info.created_at)
        retry = [f for f in failures if f.stage in _RETRY_STAGES]
        if retry or result.reason == "error":
            detail = retry[0].error if retry else {}
            return "retry", str(detail.get("message") or detail or "store error")
        latest = await self._store.latest_summary(*ids)
        if len(messages) - (latest.covers_to if latest else 0) >= self._options.summarize_every:
            return "stalled", ""
        return "done", ""

    async def _forget_if_deleted(self, job: ClaimedJob, created_at: float) -> None:
        """The user was deleted while the model was thinking: drop what the job wrote."""
        info = await self._histories.info(job.tenant, job.session_id)
        if info is not None and info.created_at == created_at:
            return
        if not await self._histories.user_has_sessions(job.tenant, job.user_id):
            await self._store.delete_user(job.tenant, job.user_id)

    async def _requeue_if_due(self, job: ClaimedJob, *, delay: float) -> None:
        """Messages appended while the job ran may make the session due again."""
        info = await self._histories.info(job.tenant, job.session_id)
        if info is None:
            return
        latest = await self._store.latest_summary(job.tenant, job.user_id, job.session_id)
        covers = latest.covers_to if latest else 0
        if info.message_count - covers >= self._options.summarize_every:
            await self.queue.enqueue(job.tenant, job.user_id, job.session_id, delay=delay)

    async def replay_outbox(self) -> int:
        """Write the memory copies of saved summaries whose copy is missing (all tenants)."""
        memory = AsyncSessionMemory(
            store=self._store, summarizer=None, on_event=[self._on_event], redact=self.redact
        )
        return await memory.recover(None, limit=500)

    async def sweep(self) -> int:
        """Queue a job for every session due for a summary that has none; how many were.

        The append that made a session due queues its job in a step of its own, and so does
        a job that ends with more turns waiting: a process killed between the two leaves a
        session due with no job, which this finds (any replica, every ``sweep_seconds``).
        """
        every = self._options.summarize_every
        queued = 0
        for tenant, user, session, count in await self.queue.due_candidates(every):
            latest = await self._store.latest_summary(tenant, user, session)
            covers = latest.covers_to if latest else 0
            if count - covers >= every and await self.queue.enqueue(tenant, user, session):
                queued += 1
        if queued:
            _log.info("the sweep queued %d due sessions", queued)
            self.wake()
        return queued

    async def _every(
        self, seconds: float, step: Callable[[], Awaitable[object]], what: str
    ) -> None:
        """Run ``step`` every ``seconds`` until stopped; a failed run is logged as ``what``."""
        while not self._stopping:
            try:
                await step()
            except Exception:
                _log.exception("%s failed", what)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), seconds)
