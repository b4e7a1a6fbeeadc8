"""Redaction in the service: with the policy on, no planted secret or personal value reaches
the summarizer, the database, a ``/v1/compact`` response or the upstream (compacted).

The summarizer is :class:`~tests.redaction_history.AsyncEchoModel`, the worst case: it copies
every word it is sent into its summary, so whatever reached it would be stored and returned.
The history is :func:`~tests.redaction_history.planted_history` (every template of the
labelled corpus, about 110 messages). With the policy off the same checks find the values,
so they can find them.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from synopsis import AsyncCompactor, AsyncSummarizer, Redactor, Trigger
from synopsis.server import ServerOptions
from synopsis.server.summary_cache import SummaryCache, compact_stateless
from tests.redaction_history import SAME_EMAIL, AsyncEchoModel, leaks, planted_history, strings
from tests.server.conftest import Live, StartServer, Upstream, wait_for

PLANTED = planted_history()
#: A value planted in a later turn of the same conversation (after the cached prefix).
LATER = "erin.walsh@example-mail.com"
SESSION = "/v1/sessions/u1/s1"


def compact(live: Live, **body: Any) -> dict[str, Any]:
    with live.client(live.key("acme")) as client:
        response = client.post("/v1/compact", json={"messages": PLANTED.messages, **body})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


# --- /v1/compact -----------------------------------------------------------------------------


def test_compact_with_the_policy_on_leaks_nothing(start_server: StartServer) -> None:
    """Over the trigger and below it, and even when the request says ``redact: false``."""
    model = AsyncEchoModel()
    with start_server(model=model, redact=True, redact_mode="hash") as live:
        over = compact(live, trigger_messages=20, redact=False)
        below = compact(live)  # the server's trigger, 160,000 tokens: not reached
    assert len(model.requests) == 1
    assert leaks(PLANTED.values, strings(model.requests)) == []
    for answer in (over, below):
        assert leaks(PLANTED.values, strings(answer)) == []
        assert answer["report"]["redacted"]["email"] >= 2
    assert over["report"]["compacted"] and not below["report"]["triggered"]
    # hash mode, one redactor per process: a value has one token in every response
    token = re.search(r"\[EMAIL#[0-9a-f]{8}\]", below["messages"][1]["content"])
    assert token is not None and token.group() in str(over["messages"])
    assert len(below["messages"]) == len(PLANTED.messages)
    assert below["messages"][0] == PLANTED.messages[0]  # the leading system message is yours


def test_without_the_policy_a_request_may_ask_for_redaction(start_server: StartServer) -> None:
    """Policy off: behaviour as before (the values come back), unless ``redact: true``."""
    model = AsyncEchoModel()
    with start_server(model=model) as live:
        plain = compact(live, trigger_messages=20)
        asked = compact(live, trigger_messages=20, redact=True)
        asked_below = compact(live, redact=True)
    assert leaks(PLANTED.values, strings(plain))
    assert plain["report"]["redacted"] == {}
    assert leaks(PLANTED.values, strings(model.requests[0]))
    assert leaks(PLANTED.values, strings(model.requests[1])) == []
    for answer in (asked, asked_below):
        assert leaks(PLANTED.values, strings(answer)) == []
        assert answer["report"]["redacted"]
    assert "[REDACTED:email]" in str(asked["messages"])  # the server's mode: mask by default


def test_the_openapi_document_offers_the_redact_option(start_server: StartServer) -> None:
    """Schemathesis reads the document, so the fuzz tests send ``redact`` too."""
    with start_server() as live, live.client() as client:
        spec = client.get("/openapi.json").json()
    compact_request = spec["components"]["schemas"]["CompactRequest"]["properties"]
    assert compact_request["redact"]["type"] == "boolean"
    report = spec["components"]["schemas"]["CompactReport"]["properties"]
    assert report["redacted"]["type"] == "object"


# --- sessions: what the database holds -------------------------------------------------------


def _summarized(live: Live) -> None:
    """Append the planted history as a session and wait for its summary's memory copy."""
    key = live.key("acme")
    with live.client(key) as client:
        appended = client.post(f"{SESSION}/messages", json={"messages": PLANTED.messages})
        assert appended.status_code == 202, appended.text
        wait_for(
            lambda: client.get("/v1/memories/user/u1/session/s1/summary-v1").status_code == 200,
            what="the summary and its memory copy",
        )


def _database_strings(live: Live, postgres_url: str | None) -> list[str]:
    """Every string of every table the service wrote (store and server tables)."""
    if postgres_url is None:
        with sqlite3.connect(live.options.db) as conn:
            return list(strings(conn))
    import psycopg
    from psycopg import sql

    found: list[str] = []
    with psycopg.connect(postgres_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (live.options.schema,),
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(live.options.schema), sql.Identifier(table)
            )
            found += strings([list(row) for row in conn.execute(query).fetchall()])
    assert any("summary" in text for text in found)
    return found


@pytest.mark.parametrize("redact", [True, False], ids=["policy-on", "policy-off"])
def test_the_stored_sessions_hold_no_planted_value(start_server: StartServer, redact: bool) -> None:
    """Summaries, their memory copies, the outbox and the session histories (SQLite)."""
    model = AsyncEchoModel()
    with start_server(model=model, redact=redact, summarize_every=20) as live:
        _summarized(live)
        with live.client(live.key("acme")) as client:
            context = client.get(f"{SESSION}/context").json()
    stored = _database_strings(live, None)
    if not redact:  # behaviour unchanged: the check finds what is there
        assert set(leaks(PLANTED.values, stored)) == set(PLANTED.values)
        return
    assert model.requests
    assert leaks(PLANTED.values, strings(model.requests)) == []
    assert leaks(PLANTED.values, stored) == []
    assert leaks(PLANTED.values, strings(context)) == []
    assert any("[REDACTED:email]" in text for text in stored)


@pytest.mark.postgres
def test_the_stored_sessions_hold_no_planted_value_on_postgres(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    model = AsyncEchoModel()
    fields = {"db": postgres_url, "schema": pg_schema, "summarize_every": 20}
    with start_server(model=model, redact=True, redact_mode="drop", **fields) as live:
        _summarized(live)
    assert leaks(PLANTED.values, strings(model.requests)) == []
    assert leaks(PLANTED.values, _database_strings(live, postgres_url)) == []


# --- the proxy -------------------------------------------------------------------------------


@pytest.fixture
def chat(start_server: StartServer, request: pytest.FixtureRequest) -> Iterator[Live]:
    """A proxy compacting histories above 10 messages, with the echo summarizer."""
    with start_server(
        model=AsyncEchoModel(), trigger=Trigger(messages=10), redact=request.param,
        upstream_api_key="sk-upstream",
    ) as live:  # fmt: skip
        yield live


def _cache_hits(live: Live) -> float:
    text = httpx.get(f"{live.url}/metrics").text
    lines = [line for line in text.splitlines() if 'summary_cache_total{outcome="hit"}' in line]
    return float(lines[0].split()[-1]) if lines else 0.0


@pytest.mark.parametrize("chat", [True, False], ids=["policy-on", "policy-off"], indirect=True)
def test_the_upstream_gets_no_planted_value_over_the_trigger(
    chat: Live, upstream: Upstream
) -> None:
    """Stateless (compacted, then the same conversation a turn on, served from the summary
    cache) and with a named session; below the trigger the proxy forwards as it always did."""
    client = openai.OpenAI(base_url=f"{chat.url}/v1", api_key=chat.key("acme"), max_retries=0)
    later = [
        *PLANTED.messages,
        {"role": "assistant", "content": "Report sent."},
        {"role": "user", "content": f"Copy {LATER} and {SAME_EMAIL} too."},
    ]
    for history in (PLANTED.messages, later):
        client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    session = {"X-Synopsis-User": "u1", "X-Synopsis-Session": "s1"}
    client.chat.completions.create(
        model="m",
        messages=PLANTED.messages,  # type: ignore[arg-type]
        extra_headers=session,
    )
    sent = upstream.fake.chat_requests
    assert len(sent) == 3 and _cache_hits(chat) == 1.0
    assert all(len(request["messages"]) < len(PLANTED.messages) for request in sent)
    values = [*PLANTED.values, LATER]
    if chat.options.redact:
        assert [leaks(values, strings(r)) for r in sent] == [[], [], []]
    else:
        assert LATER in str(sent[1]) and leaks(PLANTED.values, strings(sent[0]))


async def test_a_summary_made_without_redaction_is_never_served_with_it_on() -> None:
    """The redaction policy is part of the proxy cache's key: same prefix, other policy, miss."""
    cache = SummaryCache(16)
    outcomes: list[str] = []
    model = AsyncEchoModel()
    summarizer = AsyncSummarizer(model=model, retry=None)
    trigger = Trigger(messages=10)
    plain = AsyncCompactor(summarizer=summarizer, trigger=trigger)
    redacting = AsyncCompactor(summarizer=summarizer, trigger=trigger, redact=Redactor())
    later = [*PLANTED.messages, {"role": "user", "content": "and now?"}]
    for compactor, history, options in [
        (plain, PLANTED.messages, ServerOptions()),
        (redacting, later, ServerOptions(redact=True)),
    ]:
        sent = await compact_stateless(
            compactor, cache, "acme", history, tools=None,
            options=options.summary_shape(), count=outcomes.append,
        )  # fmt: skip
    assert outcomes == ["miss", "miss"] and len(model.requests) == 2
    assert leaks(PLANTED.values, strings(sent)) == []
    assert options.summary_shape() != ServerOptions().summary_shape()


def test_memories_put_through_the_api_are_stored_redacted(start_server: StartServer) -> None:
    """POST /v1/memories with the policy on: text and context are redacted before storage."""
    secret, mail = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8", "dana.lopez@example-mail.com"
    body = {"namespace": ["user", "u1"], "key": "k", "text": f"key {secret}", "context": mail}
    for policy in (True, False):
        with start_server(redact=policy) as live, live.client(live.key("acme")) as client:
            put = client.post("/v1/memories", json=body)
            got = client.get("/v1/memories/user/u1/k")
        assert put.status_code == 201 and got.status_code == 200, (put.text, got.text)
        stored = got.json()
        assert (secret in stored["text"], mail in stored["context"]) == (not policy,) * 2
