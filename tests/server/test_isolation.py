"""Tenant isolation over HTTP: the key decides the tenant; nothing of another tenant is visible.

Tenant B's key is tried on every endpoint against data written with tenant A's key: every
read finds nothing (404 or an empty result), every write lands in B's own space, and A's data
is intact afterwards. Requests without a key, with a made-up key or with a revoked key get 401.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.conftest import Live, StartServer, wait_for
from tests.server.test_api import summary_of, turns

#: (method, path, body) of every tenant-scoped endpoint.
ENDPOINTS = [
    ("POST", "/v1/compact", {"messages": turns(2)}),
    ("POST", "/v1/sessions/u1/s1/messages", {"messages": turns(1)}),
    ("GET", "/v1/sessions/u1/s1/context", None),
    ("GET", "/v1/sessions/u1/s1/summary", None),
    ("GET", "/v1/sessions/u1/s1/summaries", None),
    ("POST", "/v1/memories", {"namespace": "user/u1", "key": "k", "text": "x"}),
    ("GET", "/v1/memories/search?q=secret", None),
    ("GET", "/v1/memories/user/u1/secret", None),
    ("DELETE", "/v1/memories/user/u1/secret", None),
    ("GET", "/v1/users/u1/recall?q=secret", None),
    ("DELETE", "/v1/users/u1", None),
    ("GET", "/v1/export", None),
    ("POST", "/v1/chat/completions", {"model": "m", "messages": turns(1)}),
    ("GET", "/v1/models", None),
]


@pytest.fixture
def seeded(start_server: StartServer) -> Iterator[tuple[Live, str, str]]:
    """A server where tenant A has a session with a summary and a secret memory."""
    with start_server(summarize_every=4) as live:
        key_a, key_b = live.key("tenant-a"), live.key("tenant-b")
        with live.client(key_a) as a:
            a.post("/v1/sessions/u1/s1/messages", json={"messages": turns(4)})
            a.post(
                "/v1/memories",
                json={"namespace": "user/u1", "key": "secret", "text": "secret plan"},
            )
            wait_for(lambda: summary_of(a, "u1", "s1"), what="A's summary")
        yield live, key_a, key_b


def test_no_key_a_made_up_key_and_a_revoked_key_get_401(seeded: tuple[Live, str, str]) -> None:
    live, key_a, _ = seeded
    live.revoke(key_a)
    for key in (None, "syn_000000000000_" + "x" * 43, "not-a-key", key_a):
        with live.client(key) as client:
            for method, path, body in ENDPOINTS:
                response = client.request(method, path, json=body)
                assert response.status_code == 401, (key, method, path)
                assert response.json()["error"]["type"] == "Unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"


def test_another_tenant_sees_nothing_on_any_endpoint(seeded: tuple[Live, str, str]) -> None:
    live, key_a, key_b = seeded
    with live.client(key_b) as b:
        assert b.get("/v1/sessions/u1/s1/context").status_code == 404
        assert b.get("/v1/sessions/u1/s1/summary").status_code == 404
        assert b.get("/v1/sessions/u1/s1/summaries").status_code == 404
        assert b.get("/v1/memories/user/u1/secret").status_code == 404
        assert b.delete("/v1/memories/user/u1/secret").status_code == 404
        assert b.get("/v1/memories/search", params={"q": "secret"}).json() == {"hits": []}
        assert b.get("/v1/users/u1/recall", params={"q": "secret"}).json() == {"hits": []}
        assert b.get("/v1/export").text == ""
        assert b.delete("/v1/users/u1").json() == {"user_id": "u1", "deleted": 0, "sessions": 0}
        # Writes land in B's own space: B may use the same ids without touching A's.
        appended = b.post("/v1/sessions/u1/s1/messages", json={"messages": turns(1)})
        assert appended.status_code == 202 and appended.json()["messages"] == 1
    with live.client(key_a) as a:
        assert a.get("/v1/memories/user/u1/secret").json()["text"] == "secret plan"
        assert a.get("/v1/sessions/u1/s1/summary").json()["version"] == 1
        context = a.get("/v1/sessions/u1/s1/context").json()["messages"]
        assert context[0]["role"] == "system" and "session_summary" in context[0]["content"]
        assert len(context) >= 2  # the summary, then the window after what it covers


def test_the_tenant_never_comes_from_a_header_or_the_body(seeded: tuple[Live, str, str]) -> None:
    live, _, key_b = seeded
    with live.client(key_b, **{"X-Tenant": "tenant-a", "X-Synopsis-Tenant": "tenant-a"}) as b:
        found = b.get("/v1/memories/search", params={"q": "secret", "tenant": "tenant-a"})
        put = b.post(
            "/v1/memories",
            json={"tenant": "tenant-a", "namespace": "user/u1", "key": "secret", "text": "B's"},
        )
    assert found.json() == {"hits": []}
    assert put.status_code == 201
    with live.client(seeded[1]) as a:
        assert a.get("/v1/memories/user/u1/secret").json()["text"] == "secret plan"


def test_the_proxy_injects_only_the_callers_tenant_summary(
    seeded: tuple[Live, str, str], upstream: object
) -> None:
    live, _, key_b = seeded
    with live.client(key_b, **{"X-Synopsis-User": "u1", "X-Synopsis-Session": "s1"}) as b:
        response = b.post("/v1/chat/completions", json={"model": "m", "messages": turns(1)})
    forwarded = upstream.fake.chat_requests[-1]  # type: ignore[attr-defined]
    assert response.status_code == 200
    assert "session_summary" not in str(forwarded) and "secret plan" not in str(forwarded)
