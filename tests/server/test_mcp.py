"""The MCP endpoint of ``synopsis serve`` (streamable HTTP at /mcp), through the mcp SDK's own
client against a live server: the tenant is the bearer key's, exactly as for the REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.server.conftest import Live, wait_for

TOOLS = {"recall", "remember", "search_history", "forget"}


@asynccontextmanager
async def connected(live: Live, key: str) -> AsyncIterator[ClientSession]:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30.0)
    async with (
        client,
        streamable_http_client(f"{live.url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


async def test_tools_are_listed(live: Live) -> None:
    async with connected(live, live.key("acme")) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
    assert tools == TOOLS


async def test_remember_then_recall_in_chinese_and_the_rest_api_sees_it(live: Live) -> None:
    key = live.key("acme")
    async with connected(live, key) as session:
        saved = await session.call_tool(
            "remember", {"text": "用户每天早上都喜欢喝一杯手冲咖啡", "user_id": "u1"}
        )
        assert not saved.is_error
        found = await session.call_tool("recall", {"query": "咖啡", "user_id": "u1"})
    assert "手冲咖啡" in text(found)
    with live.client(key) as rest:
        hits = rest.get("/v1/users/u1/recall", params={"q": "咖啡"}).json()["hits"]
    assert [hit["memory"]["text"] for hit in hits] == ["用户每天早上都喜欢喝一杯手冲咖啡"]


async def test_tenant_b_never_sees_tenant_a(live: Live) -> None:
    async with connected(live, live.key("tenant-a")) as session:
        saved = await session.call_tool("remember", {"text": "the vault code is 7429"})
        ident = text(saved).removeprefix("Remembered as ").removesuffix(".")
    async with connected(live, live.key("tenant-b")) as session:
        found = await session.call_tool("recall", {"query": "vault code"})
        forget = await session.call_tool("forget", {"memory_id": ident})
    assert "7429" not in text(found)
    assert forget.is_error  # B cannot delete A's memory either
    async with connected(live, live.key("tenant-a")) as session:
        assert "7429" in text(await session.call_tool("recall", {"query": "vault code"}))


async def test_search_history_finds_what_the_summary_covers(live: Live) -> None:
    """The service keeps a session's history; what its summary covers is searchable."""
    key = live.key("acme")
    turns = [
        {"role": "user", "content": "Which port does staging use?"},
        {"role": "assistant", "content": "Staging listens on port 8443."},
        {"role": "user", "content": "and production?"},
        {"role": "assistant", "content": "Production uses 443."},
    ]
    with live.client(key) as rest:
        assert rest.post("/v1/sessions/u1/s1/messages", json={"messages": turns}).status_code == 202
        wait_for(
            lambda: rest.get("/v1/sessions/u1/s1/summary").status_code == 200, what="a summary"
        )
    async with connected(live, key) as session:
        port = await session.call_tool(
            "search_history", {"query": "staging port", "session_id": "s1", "user_id": "u1"}
        )
        stranger = await session.call_tool(
            "search_history", {"query": "staging port", "session_id": "s1", "user_id": "u2"}
        )
    assert "Staging listens on port 8443." in text(port)
    assert "8443" not in text(stranger)
    async with connected(live, live.key("other")) as session:
        other = await session.call_tool(
            "search_history", {"query": "staging port", "session_id": "s1", "user_id": "u1"}
        )
    assert "8443" not in text(other)


async def test_bad_arguments_answer_a_tool_error(live: Live) -> None:
    async with connected(live, live.key("acme")) as session:
        for tool, arguments in [
            ("recall", {"query": ""}),
            ("recall", {"query": "x", "limit": 1000}),
            ("remember", {}),
            ("forget", {"memory_id": "user/u1/memories/missing"}),
            ("search_history", {"query": "x", "session_id": ""}),
        ]:
            result = await session.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
        assert not (await session.call_tool("recall", {"query": "still up"})).is_error


@pytest.mark.parametrize("header", [None, "Bearer sk_nope", "Basic abc"])
def test_without_a_valid_key_the_endpoint_answers_401(live: Live, header: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if header:
        headers["Authorization"] = header
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = httpx.post(f"{live.url}/mcp", json=body, headers=headers, timeout=30.0)
    rest = httpx.get(f"{live.url}/v1/memories/search", headers=headers, timeout=30.0)
    assert answer.status_code == rest.status_code == 401
    assert answer.json() == rest.json()  # the REST API's own error body


def test_a_revoked_key_is_refused(live: Live) -> None:
    key = live.key("acme")
    live.revoke(key)
    answer = httpx.post(
        f"{live.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
        timeout=30.0,
    )
    assert answer.status_code == 401
