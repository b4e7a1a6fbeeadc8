"""Limits with clear errors, and no request holding the event loop (issue 19, findings 1, 5, 6).

A body over the limit is a 413 naming it; JSON nested 100,000 deep is refused before it is
parsed; a lone surrogate is a 422 on every route (``/v1/compact`` answered 500); the abuse
set gives no 5xx. While a large redacted compaction runs, ``/healthz`` keeps answering: its
answers are counted, never timed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from synopsis.models import extractive
from tests.server.conftest import Live, StartServer

JSON = {"content-type": "application/json"}


def _compact_body(meta: bytes = b'"m"', content: bytes = b'"hello"') -> bytes:
    return b'{"messages":[{"role":"user","content":' + content + b',"meta":' + meta + b"}]}"


def _append_body(meta: bytes = b'"m"', content: bytes = b'"hello"') -> bytes:
    return _compact_body(meta, content)


#: (name, body): what an attacker sends instead of a history.
ABUSE = [
    ("lone surrogate", _compact_body(content=b'"\\ud800 x"')),
    ("surrogate in meta", _compact_body(meta=b'{"k": "\\udfff"}')),
    ("surrogate in a key", _compact_body(meta=b'{"\\ud800": 1}')),
    ("NUL", _compact_body(content=b'"a\\u0000b"')),
    ("NUL in meta", _compact_body(meta=b'"\\u0000"')),
    ("NaN", _compact_body(meta=b"NaN")),
    ("Infinity", _compact_body(meta=b"[Infinity, -Infinity]")),
    ("big integer", _compact_body(meta=b"9" * 5000)),
    ("big float", _compact_body(meta=b"1e999999")),
    ("invalid UTF-8", _compact_body(content=b'"\xff\xfe\xc3"')),
    ("nesting 100k", _compact_body(meta=b"[" * 100_000 + b"]" * 100_000)),
    ("nesting 100k objects", _compact_body(meta=b'{"a":' * 100_000 + b"1" + b"}" * 100_000)),
    ("nesting 40", _compact_body(meta=b"[" * 40 + b"]" * 40)),
    ("unclosed nesting", _compact_body(meta=b"[" * 100_000)),
    ("not JSON", b"\x00\x01\x02"),
    ("empty", b""),
]


@pytest.fixture
def small(start_server: StartServer) -> Iterator[Live]:
    with start_server(max_body_bytes=64 * 1024) as server:
        yield server


def test_a_lone_surrogate_is_422_not_500(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        response = client.post(
            "/v1/compact", content=_compact_body(content=b'"\\ud800"'), headers=JSON
        )
    assert response.status_code == 422
    assert "surrogate" in response.json()["error"]["message"]


def test_a_body_over_the_limit_is_413_naming_it(small: Live) -> None:
    history = [{"role": "user", "content": "x" * 70_000}]
    with small.client(small.key("acme")) as client:
        declared = client.post("/v1/compact", json={"messages": history})
        streamed = client.post(
            "/v1/compact", content=iter([b'{"messages":[', b" " * 70_000, b"]}"]), headers=JSON
        )
        below = client.post("/v1/compact", json={"messages": [{"role": "user", "content": "hi"}]})
    for response in (declared, streamed):
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["type"] == "PayloadTooLarge" and error["limit"] == 64 * 1024
        assert "65536 bytes" in error["message"]
    assert below.status_code == 200


def test_json_nested_100k_deep_is_refused_before_parsing(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        response = client.post(
            "/v1/compact", content=_compact_body(meta=b"[" * 100_000 + b"]" * 100_000), headers=JSON
        )
    assert response.status_code == 422
    assert "nests deeper than 64 levels" in response.json()["error"]["message"]


def test_a_message_nested_too_deep_or_too_large_is_422(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        deep = client.post(
            "/v1/compact", content=_compact_body(meta=b"[" * 40 + b"]" * 40), headers=JSON
        )
    assert deep.status_code == 422
    assert "at most 32 levels" in deep.json()["error"]["message"]
    assert deep.json()["error"]["field"] == "messages.0"


@pytest.mark.parametrize("route", ["/v1/compact", "/v1/sessions/u/s/messages"])
def test_no_5xx_over_the_abuse_set(live: Live, route: str) -> None:
    answers = {}
    with live.client(live.key("acme")) as client:
        for name, body in ABUSE:
            answers[name] = client.post(route, content=body, headers=JSON).status_code
        big = json.dumps({"messages": [{"role": "user", "content": "x" * 10_000_000}]})
        answers["10 MB"] = client.post(route, content=big, headers=JSON).status_code
        answers["after"] = client.get("/healthz").status_code
    assert all(status < 500 for status in answers.values()), answers
    assert answers["10 MB"] == 413
    assert answers["nesting 100k"] == 422 and answers["lone surrogate"] == 422


def test_no_5xx_over_the_abuse_set_on_postgresql(
    start_server: StartServer, postgres_url: str, pg_schema: str
) -> None:
    with (
        start_server(db=postgres_url, schema=pg_schema) as server,
        server.client(server.key("acme")) as client,
    ):
        answers = {
            name: client.post("/v1/sessions/u/s/messages", content=body, headers=JSON)
            for name, body in ABUSE
        }
        stored = client.get("/v1/sessions/u/s/context")
    assert all(r.status_code < 500 for r in answers.values()), {
        k: (r.status_code, r.text[:200]) for k, r in answers.items()
    }
    assert stored.status_code in (200, 404)


def test_healthz_answers_while_a_large_redacted_compaction_runs(live: Live) -> None:
    """The compaction's redaction and summarizing run in worker threads: ``/healthz`` answers
    many times while it is in flight (on the event loop they waited for all of it)."""
    unit = "write to a@b.co from 8.8.8.8 or 2001:db8::1 " * 250
    history = [{"role": ("user", "assistant")[i % 2], "content": unit} for i in range(60)]
    body = json.dumps({"messages": history, "redact": True, "force": True})
    key = live.key("acme")
    finished = threading.Event()
    outcome: dict[str, int] = {}

    def compact() -> None:
        with live.client(key) as client:
            outcome["status"] = client.post("/v1/compact", content=body, headers=JSON).status_code
        finished.set()

    answered = 0
    with live.client() as probe:
        probe.get("/healthz")
        worker = threading.Thread(target=compact)
        worker.start()
        while not finished.is_set():
            if probe.get("/healthz").status_code == 200 and not finished.is_set():
                answered += 1
        worker.join()
    assert outcome["status"] == 200
    assert answered >= 50  # 371 here; 25 when the compaction ran on the event loop


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_the_extractive_summary_of_a_request_runs_off_the_event_loop(
    start_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    where: list[bool] = []
    summarize = extractive.extractive_summary

    def recording(*args: Any, **kwargs: Any) -> str:
        where.append(_on_a_loop())
        return summarize(*args, **kwargs)

    monkeypatch.setattr(extractive, "extractive_summary", recording)
    history = [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(8)]
    with start_server() as server, server.client(server.key("acme")) as client:
        response = client.post("/v1/compact", json={"messages": history, "force": True})
    assert response.status_code == 200 and response.json()["report"]["compacted"]
    assert where == [False]
