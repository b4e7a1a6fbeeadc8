"""Jobs survive restarts and dead replicas; shutdown drains; summaries stay exactly-once.

* SQLite: a server stopped while a summary job runs leaves the job in the queue; the next
  start finishes it.
* ``synopsis serve`` on SIGTERM waits for the running job before it exits.
* PostgreSQL: two ``synopsis serve`` processes share one database; 200 sessions are fed
  through both; one is killed with SIGKILL while jobs run. Every session ends with a gapless
  run of summary versions, exactly one summary memory per version, nothing left pending.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from synopsis.memory import PostgresStore
from synopsis.server.db import Database
from synopsis.server.keys import KeyRing
from synopsis.server.testing import FakeUpstream, running
from synopsis.testing import AsyncFakeModel
from tests.server.conftest import StartServer, wait_for
from tests.server.test_api import summary_of, turns

SRC = Path(__file__).resolve().parents[2] / "src"
SUMMARY = "<summary>\n1. Primary request: talk about kayaks\n</summary>"


def test_a_job_cut_short_by_shutdown_is_finished_by_the_next_start(
    start_server: StartServer,
) -> None:
    slow = AsyncFakeModel(default=SUMMARY, delay=30.0)
    with start_server(model=slow, summarize_every=4, lease_seconds=0.5, drain_seconds=0) as live:
        key = live.key("acme")
        with live.client(key) as client:
            client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(4)})
            wait_for(lambda: slow.requests, what="the job to start")
    # Stopped mid-job: nothing saved, the job's lease runs out, a new process takes over.
    with start_server(summarize_every=4, lease_seconds=0.5) as live, live.client(key) as client:
        summary = wait_for(lambda: summary_of(client, "u1", "s1"), what="the recovered summary")
        memory = client.get("/v1/memories/user/u1/session/s1/summary-v1")
    assert summary["version"] == 1 and summary["covers_to"] == 4
    assert memory.json()["text"] == summary["text"]


# --- real processes --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``synopsis serve ARGS --port P`` as a child process; yields it and its URL when ready."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-c", "from synopsis.cli import main; main()", "serve",
               *args, "--port", str(port), "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url) or process.poll() is not None, what="serve to start")
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        if process.stderr:
            process.stderr.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.slow
def test_sigterm_drains_the_running_job(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    fake = FakeUpstream(summary_delay=1.5)
    with Database(db) as database:
        key = KeyRing(database).create("acme").secret
    with running(fake.app) as upstream:
        model = f"openai-compatible:summarizer@{upstream}/v1"
        with serve("--db", db, "--model", model, "--summarize-every", "4") as (process, url):
            headers = {"Authorization": f"Bearer {key}"}
            httpx.post(f"{url}/v1/sessions/u1/s1/messages", json={"messages": turns(4)},
                       headers=headers)  # fmt: skip
            wait_for(lambda: _metric(url, "synopsis_jobs_running") == 1, what="the job to run")
            process.send_signal(signal.SIGTERM)
            # uvicorn shuts down gracefully, then re-raises the signal it caught.
            assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    from synopsis.memory import SQLiteStore

    with SQLiteStore(db) as store:
        latest = store.latest_summary("acme", "u1", "s1")
    assert latest is not None and latest.version == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_two_replicas_one_killed_every_summary_exactly_once(
    postgres_url: str, pg_schema: str
) -> None:
    sessions = [f"s{i:03d}" for i in range(200)]
    fake = FakeUpstream(summary_delay=0.05)
    with Database(postgres_url, schema=pg_schema) as database:
        key = KeyRing(database).create("acme").secret
    with running(fake.app) as upstream:
        model = f"openai-compatible:summarizer@{upstream}/v1"
        args = ("--db", postgres_url, "--schema", pg_schema, "--summarize-every", "4",
                "--model", model, "--workers", "4", "--lease-seconds", "2",
                "--poll-seconds", "0.1", "--outbox-seconds", "0.5")  # fmt: skip
        with serve(*args) as (doomed, url_a), serve(*args) as (_, url_b):
            _feed(url_a, url_b, key, sessions, start=0)
            wait_for(lambda: _metric(url_a, "synopsis_jobs_running") > 0, what="A to run jobs")
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(timeout=30)
            # B takes over A's jobs once their leases ran out: nothing of round one is lost.
            wait_for(lambda: _settled(postgres_url, pg_schema, sessions, covers=4), timeout=180,
                     what="round one summarized")  # fmt: skip
            _feed(url_b, url_b, key, sessions, start=4)
            wait_for(lambda: _settled(postgres_url, pg_schema, sessions, covers=8), timeout=180,
                     what="round two summarized")  # fmt: skip
    _check_exactly_once(postgres_url, pg_schema, sessions)


def _feed(url_a: str, url_b: str, key: str, sessions: list[str], *, start: int) -> None:
    """Append four turns to every session, alternating replicas (8 threads)."""

    def append(index_session: tuple[int, str]) -> None:
        index, session = index_session
        url = url_a if index % 2 == 0 else url_b
        response = httpx.post(
            f"{url}/v1/sessions/user-{session}/{session}/messages",
            json={"messages": turns(4, start)}, headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )  # fmt: skip
        assert response.status_code == 202, response.text

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(append, enumerate(sessions)))


def _settled(url: str, schema: str, sessions: list[str], *, covers: int) -> bool:
    """Every session's summary covers ``covers`` turns, and then no memory copy is pending.

    In this order: a summary and its outbox entry are saved together, so an empty outbox
    read before the last summaries were saved would let a pending copy through."""
    with PostgresStore(url, schema=schema) as store:
        summarized = all(
            (latest := store.latest_summary("acme", f"user-{s}", s)) is not None
            and latest.covers_to == covers
            for s in sessions
        )
        return summarized and not store.pending_outbox(None, limit=1)


def _check_exactly_once(url: str, schema: str, sessions: list[str]) -> None:
    with PostgresStore(url, schema=schema) as store:
        for session in sessions:
            versions = [
                v.version for v in store.summary_history("acme", f"user-{session}", session)
            ]
            namespace = ("user", f"user-{session}", "session", session)
            memories: list[Any] = store.search("acme", namespace, kind="summary", limit=100)
            keys = sorted(hit.item.key for hit in memories)
            assert versions == [1, 2], (session, versions)
            assert keys == ["summary-v1", "summary-v2"], (session, keys)
