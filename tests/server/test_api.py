"""The REST API over HTTP: compaction, sessions and summaries, memories, recall, export, probes."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.server.conftest import Live, StartServer, wait_for


def turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"turn {i} about the blue kayak trip"}
        for i in range(start, start + n)
    ]


def summary_of(client: httpx.Client, user: str, session: str) -> dict[str, Any] | None:
    response = client.get(f"/v1/sessions/{user}/{session}/summary")
    return response.json() if response.status_code == 200 else None


# --- probes ----------------------------------------------------------------------------------


def test_health_and_readiness_need_no_key(live: Live) -> None:
    with live.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        ready = client.get("/readyz").json()
    assert ready == {"status": "ready", "database": "sqlite", "schema_version": 1}


def test_openapi_document_and_docs_are_served(live: Live) -> None:
    with live.client() as client:
        spec = client.get("/openapi.json").json()
        docs = client.get("/docs")
    assert "/v1/chat/completions" in spec["paths"]
    assert "/v1/sessions/{user}/{session}/messages" in spec["paths"]
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_metrics_count_requests_by_route_template(live: Live) -> None:
    key = live.key("acme")
    with live.client(key) as client:
        client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(2)})
        client.post("/v1/sessions/u2/s2/messages", json={"messages": turns(2)})
        text = client.get("/metrics").text
    assert (
        'synopsis_http_requests_total{method="POST",route="/v1/sessions/{user}/{session}/messages",'
        'status="202"} 2.0' in text
    )
    assert "synopsis_http_request_duration_seconds_bucket" in text
    assert "synopsis_job_queue_depth" in text
    assert "/v1/sessions/u1/s1" not in text  # raw paths would explode the cardinality


# --- compaction ------------------------------------------------------------------------------


def test_compact_returns_compacted_messages_and_report(live: Live) -> None:
    history = [{"role": "system", "content": "be brief"}, *turns(10)]
    with live.client(live.key("acme")) as client:
        response = client.post("/v1/compact", json={"messages": history, "trigger_messages": 5})
    body = response.json()
    assert response.status_code == 200
    assert body["report"]["compacted"] is True and body["report"]["reason"] == "messages"
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert len(body["messages"]) < len(history)
    assert all(
        set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
        for m in body["messages"]
    )


def test_compact_below_the_trigger_returns_the_history_unchanged(live: Live) -> None:
    history = turns(3)
    with live.client(live.key("acme")) as client:
        body = client.post("/v1/compact", json={"messages": history}).json()
    assert body["messages"] == history
    assert body["report"]["triggered"] is False


def test_bad_messages_are_422_naming_the_field(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        bad_role = client.post("/v1/compact", json={"messages": [{"role": "robot"}]})
        orphan = client.post(
            "/v1/sessions/u/s/messages",
            json={"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
        )
        not_json = client.post(
            "/v1/compact", content=b"{", headers={"content-type": "application/json"}
        )
    assert bad_role.status_code == 422
    assert bad_role.json()["error"]["field"] == "messages.0.role"
    assert orphan.status_code == 422
    assert orphan.json()["error"] == {
        "type": "InvalidMessage",
        "message": orphan.json()["error"]["message"],
        "index": 0,
        "field": "tool_call_id",
        "reason": orphan.json()["error"]["reason"],
    }
    assert not_json.status_code == 422 and not_json.json()["error"]["type"] == "InvalidInput"


# --- sessions --------------------------------------------------------------------------------


def test_append_returns_202_and_a_background_summary_follows(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        first = client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(3)})
        second = client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(2, 3)})
        summary = wait_for(lambda: summary_of(client, "u1", "s1"), what="the summary")
        versions = client.get("/v1/sessions/u1/s1/summaries").json()["summaries"]
    assert first.status_code == 202 and first.json()["summary_scheduled"] is False
    assert second.json() == {
        "user_id": "u1", "session_id": "s1", "messages": 5, "appended": 2,
        "summary_scheduled": True, "pending_messages": 5,
    }  # fmt: skip
    assert summary["version"] == 1 and summary["covers_to"] == 5
    assert [v["version"] for v in versions] == [1]


def test_context_injects_the_summary_before_the_window(start_server: StartServer) -> None:
    with start_server(summarize_every=4, window_messages=4) as live:
        client = live.client(live.key("acme"))
        client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(8)})
        wait_for(lambda: summary_of(client, "u1", "s1"), what="the summary")
        context = client.get(
            "/v1/sessions/u1/s1/context", params={"system_prompt": "You help."}
        ).json()
        client.close()
    first = context["messages"][0]
    assert context["summary_version"] == 1
    assert first["role"] == "system" and first["content"].startswith("You help.")
    assert "<session_summary" in first["content"]
    # The summary covers all 8: the window is what it cannot stand for, the user's latest on.
    assert context["messages"][1:] == turns(8)[6:]


def test_a_session_belongs_to_its_first_user(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(1)})
        taken = client.post("/v1/sessions/u2/s1/messages", json={"messages": turns(1)})
        peek = client.get("/v1/sessions/u2/s1/context")
    assert taken.status_code == 409 and taken.json()["error"]["type"] == "SessionConflict"
    assert peek.status_code == 404


def test_a_tool_result_may_answer_a_call_appended_earlier(live: Live) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    with live.client(live.key("acme")) as client:
        client.post("/v1/sessions/u1/s1/messages", json={"messages": [turns(1)[0], call]})
        result = client.post(
            "/v1/sessions/u1/s1/messages",
            json={"messages": [{"role": "tool", "tool_call_id": "c1", "content": "42"}]},
        )
    assert result.status_code == 202 and result.json()["messages"] == 3


def test_unknown_session_and_missing_summary_are_404(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(1)})
        no_summary = client.get("/v1/sessions/u1/s1/summary")
        no_session = client.get("/v1/sessions/u1/nope/summaries")
    assert no_summary.status_code == 404 and no_summary.json()["error"]["type"] == "NotFound"
    assert no_session.status_code == 404


# --- memories, recall, delete-user, export ---------------------------------------------------


def test_memory_put_get_search_delete(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        put = client.post(
            "/v1/memories",
            json={"namespace": "user/u1/notes", "key": "k1",
                  "text": "Ana adopted a beagle named Rex", "tags": {"source": "chat"}},
        )  # fmt: skip
        got = client.get("/v1/memories/user/u1/notes/k1")
        found = client.get(
            "/v1/memories/search", params={"namespace_prefix": "user/u1", "q": "beagle"}
        )
        deleted = client.delete("/v1/memories/user/u1/notes/k1")
        again = client.get("/v1/memories/user/u1/notes/k1")
        gone = client.delete("/v1/memories/user/u1/notes/k1")
    assert put.status_code == 201 and put.json()["namespace"] == ["user", "u1", "notes"]
    assert got.json()["text"] == "Ana adopted a beagle named Rex"
    assert [h["memory"]["key"] for h in found.json()["hits"]] == ["k1"]
    assert deleted.status_code == 204 and again.status_code == 404 and gone.status_code == 404


def test_a_memory_is_found_by_its_context(live: Live) -> None:
    """A memory put with a context is found by the context's words and shows the context."""
    with live.client(live.key("acme")) as client:
        client.post(
            "/v1/memories",
            json={"namespace": "user/u1/chat", "key": "t2", "text": "Adoption agencies!",
                  "context": "Mel: What did you research?"},
        )  # fmt: skip
        found = client.get(
            "/v1/memories/search", params={"namespace_prefix": "user/u1", "q": "research"}
        )
    [hit] = found.json()["hits"]
    assert hit["memory"]["key"] == "t2"
    assert hit["memory"]["context"] == "Mel: What did you research?"


def test_a_memory_without_key_gets_one_from_its_content(live: Live) -> None:
    memory = {"namespace": ["user", "u1"], "text": "likes tea", "kind": "fact"}
    with live.client(live.key("acme")) as client:
        first = client.post("/v1/memories", json=memory).json()
        second = client.post("/v1/memories", json=memory).json()
        hits = client.get("/v1/memories/search", params={"namespace_prefix": "user/u1"}).json()
    assert first["key"] == second["key"] and first["key"].startswith("sha256-")
    assert len(hits["hits"]) == 1


def test_recall_finds_memories_across_sessions(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        for session in ("s1", "s2"):
            client.post(
                "/v1/memories",
                json={"namespace": ["user", "u1", "session", session], "key": "n",
                      "text": f"{session}: 用户喜欢皮划艇 and kayaks"},
            )  # fmt: skip
        hits = client.get("/v1/users/u1/recall", params={"q": "皮划艇"}).json()["hits"]
        other = client.get("/v1/users/u2/recall", params={"q": "皮划艇"}).json()["hits"]
    assert sorted(h["memory"]["namespace"][3] for h in hits) == ["s1", "s2"]
    assert other == []


def test_recall_leaves_transcripts_out_and_kind_filters_repeat(live: Live) -> None:
    """Recall skips stored transcripts unless ``kind`` asks for them; search takes repeated
    ``kind`` and ``exclude_kind``; too many kinds is a 422 naming the field."""
    memories = [
        ("user/u1/notes", "fact", "likes kayaks"),
        ("user/u1/notes", "note", "kayaks"),
        ("user/u1/agents/c1/generation-0", "agents_item", '{"content": "kayaks?"}'),
    ]
    with live.client(live.key("acme")) as client:
        for namespace, kind, text in memories:
            client.post("/v1/memories", json={"namespace": namespace, "kind": kind, "text": text})

        def kinds(path: str, **params: Any) -> list[str]:
            hits = client.get(path, params={"q": "kayaks", **params}).json()["hits"]
            return sorted(h["memory"]["kind"] for h in hits)

        recall = kinds("/v1/users/u1/recall")
        asked = kinds("/v1/users/u1/recall", kind="agents_item")
        everything = kinds("/v1/users/u1/recall", exclude_kind=["note"])
        search = kinds("/v1/memories/search", kind=["fact", "agents_item"], exclude_kind="fact")
        too_many = client.get("/v1/memories/search", params={"kind": [f"k{i}" for i in range(65)]})
    assert recall == ["fact", "note"]
    assert asked == ["agents_item"]
    assert everything == ["agents_item", "fact"]
    assert search == ["agents_item"]
    assert too_many.status_code == 422 and too_many.json()["error"]["field"] == "kind"


def test_delete_user_removes_memories_summaries_and_histories(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        client.post("/v1/sessions/u1/s1/messages", json={"messages": turns(4)})
        wait_for(lambda: summary_of(client, "u1", "s1"), what="the summary")
        client.post("/v1/memories", json={"namespace": "user/u1", "key": "k", "text": "x"})
        client.post("/v1/memories", json={"namespace": "user/u2", "key": "k", "text": "y"})
        deleted = client.delete("/v1/users/u1").json()
        context = client.get("/v1/sessions/u1/s1/context")
        left = client.get("/v1/memories/search").json()["hits"]
    assert deleted["user_id"] == "u1" and deleted["sessions"] == 1 and deleted["deleted"] >= 3
    assert context.status_code == 404
    assert [h["memory"]["namespace"] for h in left] == [["user", "u2"]]


def test_export_streams_json_lines_that_memory_import_reads(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        for i in range(3):
            client.post(
                "/v1/memories", json={"namespace": "user/u1", "key": f"k{i}", "text": f"t{i}"}
            )
        response = client.get("/v1/export")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert sorted(line["key"] for line in lines) == ["k0", "k1", "k2"]
    assert set(lines[0]) == {"namespace", "kind", "text", "key", "tags"}


def test_metrics_count_each_compaction_and_summarizer_call_once(live: Live) -> None:
    with live.client(live.key("acme")) as client:
        client.post("/v1/compact", json={"messages": turns(10), "trigger_messages": 5})
        client.post("/v1/compact", json={"messages": turns(10), "force": True})
        text = client.get("/metrics").text
    assert 'synopsis_compactions_total{outcome="compacted"} 2.0' in text
    assert 'synopsis_summarizer_calls_total{outcome="ok"} 2.0' in text
