"""Due-session recovery (issue 19, finding 4): a process killed between an append's commit and
its enqueue left the session due for a summary with no job, forever. The sweep finds it.

The kill is simulated exactly: the turns are committed with the append's own plan and no job
is queued, as if the process died right after the commit.
"""

from __future__ import annotations

from typing import Any

import pytest

from synopsis.server.db import Database
from synopsis.server.sessions import append_plan
from tests.server.conftest import Live, StartServer, wait_for
from tests.server.test_api import summary_of, turns


def _committed_without_a_job(live: Live, session: str, messages: list[dict[str, Any]]) -> None:
    import json

    with Database(live.options.db, schema=live.options.schema) as db:
        bodies = [json.dumps(m) for m in messages]
        db.run(append_plan(db.dialect, ("acme", "u1", session), bodies, db.clock()))


def _recovered(start_server: StartServer, **fields: Any) -> None:
    with start_server(summarize_every=4, sweep_seconds=0.2, **fields) as live:
        key = live.key("acme")
        _committed_without_a_job(live, "s1", turns(6))  # due: 6 >= 4, no summary, no job
        _committed_without_a_job(live, "s2", turns(3))  # not due
        with live.client(key) as client:
            summary = wait_for(lambda: summary_of(client, "u1", "s1"), what="the swept summary")
            assert summary["covers_to"] >= 4
            assert summary_of(client, "u1", "s2") is None


def test_a_session_due_with_no_job_is_summarized_by_the_sweep(start_server: StartServer) -> None:
    _recovered(start_server)


@pytest.mark.postgres
def test_the_sweep_on_postgresql(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    _recovered(start_server, db=postgres_url, schema=pg_schema)


def test_a_summarized_session_is_not_queued_again(start_server: StartServer) -> None:
    with start_server(summarize_every=4, sweep_seconds=0.2) as live:
        key = live.key("acme")
        with live.client(key) as client:
            client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(4)})
            wait_for(lambda: summary_of(client, "u1", "s1"), what="the summary")
            versions = client.get("/v1/sessions/u1/s1/summaries").json()["summaries"]
    assert [v["version"] for v in versions] == [1]
