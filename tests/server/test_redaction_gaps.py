"""With the policy on, a secret planted in an image URL, a file name, a tool message's name, a
memory key and a tag is found nowhere: not in any response, the database, what the upstream
received or the access log (issue 19, finding 7). With the policy off the same checks find it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from synopsis.redact import Redactor
from synopsis.server import ServerOptions, create_app
from tests.redaction_history import strings
from tests.server.conftest import StartServer, Upstream, wait_for
from tests.server.test_redaction import _database_strings

SECRET = "ghp_" + "Zq9Lm2Xv7Rt4" * 3 + "Wd"
MAIL = "quinn.harper@example-mail.com"


def planted_turns() -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": f"https://img.example.com/a.png?token={SECRET}"}},
            {"type": "file", "file": {"filename": f"report {SECRET}.pdf", "file_data": "QUJD"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": f"lookup {SECRET}", "content": "found"},
        {"role": "assistant", "content": "A kayak."},
        {"role": "user", "content": "Thanks."},
    ]  # fmt: skip


def test_the_redactor_walks_urls_file_names_and_names() -> None:
    clean, findings = Redactor().redact_messages(planted_turns())
    assert SECRET not in str(clean)
    assert {f.path for f in findings} == {
        (0, "content", 1, "image_url", "url"),
        (0, "content", 2, "file", "filename"),
        (2, "name"),
    }
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}
    inline = [{"role": "user", "content": [image]}]
    assert Redactor().redact_messages(inline)[0] == inline


@pytest.mark.parametrize("policy", [True, False], ids=["policy-on", "policy-off"])
def test_a_planted_secret_is_found_nowhere(
    start_server: StartServer, upstream: Upstream, policy: bool
) -> None:
    with start_server(redact=policy, summarize_every=4, upstream_api_key="sk-up") as live:
        key = live.key("acme")
        seen: list[Any] = []
        with live.client(key) as client:
            compacted = client.post("/v1/compact", json={"messages": planted_turns()})
            appended = client.post(
                "/v1/sessions/u1/s1/messages", json={"messages": planted_turns()}
            )
            assert appended.status_code == 202, appended.text
            wait_for(lambda: client.get("/v1/sessions/u1/s1/summary").status_code == 200)
            seen += [compacted.json(), client.get("/v1/sessions/u1/s1/context").json()]
            memory = {"namespace": "user/u1", "key": f"k {SECRET}", "text": "likes kayaks",
                      "tags": {"source": f"mail {MAIL}", f"t {SECRET}": "x"}}  # fmt: skip
            put = client.post("/v1/memories", json=memory)
            assert put.status_code == 201, put.text
            seen.append(put.json())
            got = client.get(f"/v1/memories/user/u1/k {SECRET}")
            assert got.status_code == 200  # the same key finds it, redacted the same way
            seen.append(got.json())
            proxied = client.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": planted_turns()},
                headers={"X-Synopsis-User": "u1", "X-Synopsis-Session": "s2"},
            )
            assert proxied.status_code == 200, proxied.text
            seen.append(proxied.json())
        stored = _database_strings(live, None)
    found = {
        "responses": [SECRET in text or MAIL in text for text in strings(seen)],
        "database": [SECRET in text or MAIL in text for text in stored],
        "upstream": [SECRET in str(call.body) for call in upstream.fake.calls],
    }
    if policy:
        assert {where: any(hits) for where, hits in found.items()} == dict.fromkeys(found, False)
    else:
        assert all(any(hits) for hits in found.values())


def test_the_access_log_holds_no_query_string(caplog: pytest.LogCaptureFixture) -> None:
    create_app(ServerOptions())
    access = logging.getLogger("uvicorn.access")
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        access.info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET",
            f"/v1/users/u1/recall?q={MAIL}", "1.1", 200,
        )  # fmt: skip
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/healthz", "1.1", 200)
    assert MAIL not in caplog.text
    assert "/v1/users/u1/recall?<query omitted>" in caplog.text and "/healthz" in caplog.text
