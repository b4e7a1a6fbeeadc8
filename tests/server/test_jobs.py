"""The durable job queue: one open job per session, exclusive claims, leases, retries.

Run on SQLite and PostgreSQL with a fake clock, so lease expiry is a clock step, not a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from synopsis.memory import AsyncSQLiteStore
from synopsis.server._sql import Dialect
from synopsis.server.db import AsyncDatabase
from synopsis.server.jobs import ClaimedJob, JobQueue, SummaryWorkers, backoff, claim_plan
from synopsis.server.options import ServerOptions
from synopsis.server.sessions import AsyncSessionHistories
from synopsis.testing import AsyncFakeModel, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000_000.0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[AsyncDatabase]:
    if request.param == "sqlite":
        database = await AsyncDatabase.open(str(tmp_path / "jobs.db"), clock=clock)
    else:
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("pg_schema")
        database = await AsyncDatabase.open(url, schema=schema, clock=clock)
    yield database
    await database.aclose()


def test_the_claim_skips_locked_rows_on_postgres_only() -> None:
    pg = next(claim_plan(Dialect("postgres", "s"), "w", 0.0, 1.0)).sql
    lite = next(claim_plan(Dialect("sqlite"), "w", 0.0, 1.0)).sql
    assert "FOR UPDATE SKIP LOCKED" in pg and "FOR UPDATE" not in lite


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [backoff(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert backoff(30) == 300.0


async def test_a_session_has_at_most_one_open_job(db: AsyncDatabase) -> None:
    queue = JobQueue(db)
    assert await queue.enqueue("t", "u", "s1") is True
    assert await queue.enqueue("t", "u", "s1") is False
    assert await queue.enqueue("t", "u", "s2") is True
    assert await queue.enqueue("other", "u", "s1") is True
    assert await queue.depth() == 3


async def test_a_claimed_job_is_nobody_elses_until_its_lease_runs_out(
    db: AsyncDatabase, clock: FakeClock
) -> None:
    first, second = JobQueue(db, owner="a"), JobQueue(db, owner="b")
    await first.enqueue("t", "u", "s1")
    job = await first.claim(lease=30)
    assert job is not None and job.attempts == 1
    assert await second.claim(lease=30) is None
    clock.advance(31)  # the first worker died and stopped renewing
    again = await second.claim(lease=30)
    assert again is not None and again.id == job.id and again.attempts == 2
    assert await first.finish(job) is False  # not its job any more
    assert await second.finish(again) is True
    assert await first.depth() == 0


async def test_renewing_keeps_the_lease(db: AsyncDatabase, clock: FakeClock) -> None:
    first, second = JobQueue(db, owner="a"), JobQueue(db, owner="b")
    await first.enqueue("t", "u", "s1")
    job = await first.claim(lease=30)
    assert job is not None
    clock.advance(20)
    assert await first.renew(job, 30) is True
    clock.advance(20)
    assert await second.claim(lease=30) is None


async def test_a_failed_job_is_retried_after_a_backoff_then_set_aside(
    db: AsyncDatabase, clock: FakeClock
) -> None:
    queue = JobQueue(db)
    await queue.enqueue("t", "u", "s1")
    job = await queue.claim(lease=30)
    assert job is not None
    assert await queue.retry(job, max_attempts=2, error="boom") is True
    assert await queue.claim(lease=30) is None  # waiting for its backoff
    clock.advance(backoff(1))
    job = await queue.claim(lease=30)
    assert job is not None and job.attempts == 2
    await queue.retry(job, max_attempts=2, error="boom again")
    clock.advance(3600)
    assert await queue.claim(lease=30) is None
    assert await queue.depth() == 0  # set aside, and a new job may be queued
    assert await queue.enqueue("t", "u", "s1") is True


async def test_concurrent_claimers_never_share_a_job(db: AsyncDatabase) -> None:
    queue = JobQueue(db)
    for i in range(30):
        await queue.enqueue("t", "u", f"s{i}")
    workers = [JobQueue(db, owner=f"w{i}") for i in range(6)]

    async def drain(worker: JobQueue) -> list[int]:
        taken = []
        while (job := await worker.claim(lease=60)) is not None:
            taken.append(job.id)
        return taken

    results = await asyncio.gather(*(drain(w) for w in workers))
    claimed = [job_id for taken in results for job_id in taken]
    assert len(claimed) == 30 and len(set(claimed)) == 30


# --- running jobs ----------------------------------------------------------------------------


def _turns(n: int) -> list[dict[str, Any]]:
    return [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(n)]


@dataclass
class Running:
    """A worker set over one SQLite file, and the job it claimed for session ``s`` (5 turns)."""

    workers: SummaryWorkers
    histories: AsyncSessionHistories
    store: AsyncSQLiteStore
    job: ClaimedJob


@contextlib.asynccontextmanager
async def _running(
    tmp_path: Path,
    model: Any = "extractive",
    *,
    before: Callable[[AsyncSQLiteStore], Any] | None = None,
) -> AsyncIterator[Running]:
    from synopsis import AsyncSummarizer

    db = await AsyncDatabase.open(str(tmp_path / "w.db"))
    store = AsyncSQLiteStore(str(tmp_path / "w.db"))
    histories = AsyncSessionHistories(db)
    workers = SummaryWorkers(
        queue=JobQueue(db), histories=histories, store=store,
        summarizer=AsyncSummarizer(model=model, retry=None),
        options=ServerOptions(summarize_every=4, max_attempts=3),
    )  # fmt: skip
    try:
        await histories.append("t", "u", "s", _turns(5))
        if before is not None:
            await before(store)
        await workers.queue.enqueue("t", "u", "s")
        job = await workers.queue.claim(lease=30)
        assert job is not None
        yield Running(workers, histories, store, job)
    finally:
        await db.aclose()
        await store.aclose()


async def test_a_job_summarizes_the_session_and_writes_both_copies(tmp_path: Path) -> None:
    async with _running(tmp_path) as run:
        assert (await run.workers.run_job(run.job))[0] == "done"
        summary = await run.store.latest_summary("t", "u", "s")
        memory = await run.store.get("t", ("user", "u", "session", "s"), "summary-v1")
    assert summary is not None and summary.covers_to == 5
    assert memory is not None and memory.text == summary.text


async def test_a_failing_summarizer_makes_the_job_retry(tmp_path: Path) -> None:
    async with _running(tmp_path, AsyncFakeModel([RuntimeError("model down")] * 10)) as run:
        outcome, error = await run.workers.run_job(run.job)
    assert outcome == "retry" and error


async def test_a_job_of_a_deleted_session_is_gone(tmp_path: Path) -> None:
    async with _running(tmp_path) as run:
        await run.histories.delete_user("t", "u")
        outcome = (await run.workers.run_job(run.job))[0]
    assert outcome == "gone"


# --- kill -9 leftovers (issue 19: every session summarized within one sweep) -------------------


async def test_a_delayed_job_waits_its_delay(db: AsyncDatabase, clock: FakeClock) -> None:
    queue = JobQueue(db)
    assert await queue.enqueue("t", "u", "s", delay=5.0)
    assert await queue.claim(lease=30) is None
    clock.advance(5)
    assert await queue.claim(lease=30) is not None


async def test_a_rerun_of_a_killed_job_lets_its_stale_claim_go(tmp_path: Path) -> None:
    async with _running(tmp_path) as run:
        assert (await run.workers.run_job(run.job))[0] == "done"
        # The attempt died after saving its summary and before letting the session's claim go.
        own = f"synopsis-serve-job-{run.job.id}"
        assert await run.store.claim_summary_job(
            "t", "u", "s", covers_to=5, owner=own, lease_seconds=600
        )
        assert (await run.workers.run_job(run.job))[0] == "done"  # its rerun: nothing is due
        taken = await run.store.claim_summary_job(
            "t", "u", "s", covers_to=9, owner="the-next-job", lease_seconds=600
        )
    assert taken, "the dead attempt's claim still blocks the session's next job"


async def test_a_job_whose_session_is_claimed_elsewhere_is_stalled(tmp_path: Path) -> None:
    async def claimed_elsewhere(store: AsyncSQLiteStore) -> None:
        assert await store.claim_summary_job(
            "t", "u", "s", covers_to=5, owner="another-process", lease_seconds=600
        )

    async with _running(tmp_path, before=claimed_elsewhere) as run:
        outcome = (await run.workers.run_job(run.job))[0]
    # "done" would queue the session again at once: a job a poll, until the claim expires.
    assert outcome == "stalled"
