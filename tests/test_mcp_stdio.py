"""``synopsis mcp`` over stdio, through the mcp SDK's own client: the server is the real
command in a subprocess, as an MCP client (Claude Code, Cursor, ...) starts it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from synopsis import JsonlArchive
from synopsis.compaction.store_archive import StoreArchive
from synopsis.memory import SQLiteStore

TOOLS = {"recall", "remember", "search_history", "forget"}
#: The installed command, as an MCP client's configuration names it.
SYNOPSIS = Path(sys.executable).parent / "synopsis"


def command(db: Path, *extra: str, tenant: str = "acme") -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNOPSIS_")}
    return StdioServerParameters(
        command=str(SYNOPSIS),
        args=["mcp", "--db", str(db), "--tenant", tenant, *extra],
        env=env,
    )


@asynccontextmanager
async def connected(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


async def test_the_tools_are_listed_with_their_schemas(tmp_path: Path) -> None:
    async with connected(command(tmp_path / "m.db")) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["recall"].input_schema["required"] == ["query"]
    assert "ctx" not in tools["recall"].input_schema["properties"]
    assert set(tools["search_history"].input_schema["required"]) == {"query", "session_id"}
    assert all(len(tool.description or "") > 80 for tool in tools.values())


async def test_remember_then_recall_round_trip_in_chinese_and_english(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with connected(command(db)) as session:
        saved = await session.call_tool("remember", {"text": "用户每天早上都喜欢喝一杯手冲咖啡"})
        assert not saved.is_error
        ident = text(saved).removeprefix("Remembered as ").removesuffix(".")
        await session.call_tool(
            "remember", {"text": "Alice's flight to Lisbon is TP1234", "user_id": "alice"}
        )
        found = await session.call_tool("recall", {"query": "咖啡"})
        assert "手冲咖啡" in text(found) and ident in text(found)
        alice = await session.call_tool("recall", {"query": "Lisbon flight", "user_id": "alice"})
        assert "TP1234" in text(alice)
        assert "TP1234" not in text(await session.call_tool("recall", {"query": "Lisbon"}))
        gone = await session.call_tool("forget", {"memory_id": ident})
        assert text(gone) == f"Forgot {ident}."
        assert "手冲咖啡" not in text(await session.call_tool("recall", {"query": "咖啡"}))
    with SQLiteStore(db) as store:  # the memory is in the tenant's store
        hits = store.search("acme", ("user", "alice"), query="Lisbon")
        assert [hit.item.text for hit in hits] == ["Alice's flight to Lisbon is TP1234"]


async def test_another_tenant_sees_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with connected(command(db, tenant="tenant-a")) as session:
        await session.call_tool("remember", {"text": "the vault code is 7429"})
    async with connected(command(db, tenant="tenant-b")) as session:
        found = await session.call_tool("recall", {"query": "vault code"})
    assert not found.is_error and "7429" not in text(found)


async def test_search_history_finds_what_compaction_archived(tmp_path: Path) -> None:
    db, directory = tmp_path / "m.db", tmp_path / "archive"
    with SQLiteStore(db) as store:
        StoreArchive(store, "acme", user_id="default").write(
            [
                {"role": "user", "content": "Which port does staging use?"},
                {"role": "assistant", "content": "Staging listens on port 8443."},
            ],
            session_id="s1",
        )
    JsonlArchive(directory).write(
        [{"role": "assistant", "content": "断桥的门票已经订好了"}], session_id="s1"
    )
    async with connected(command(db, "--archive", str(directory))) as session:
        port = await session.call_tool(
            "search_history", {"query": "staging port", "session_id": "s1"}
        )
        ticket = await session.call_tool("search_history", {"query": "门票", "session_id": "s1"})
        other = await session.call_tool("search_history", {"query": "port", "session_id": "s2"})
    assert "Staging listens on port 8443." in text(port)
    assert "断桥的门票已经订好了" in text(ticket)
    assert "No archived message matches" in text(other)


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("recall", {"query": ""}, "query must be"),
        ("recall", {"query": "x", "limit": 0}, "limit must be"),
        ("recall", {}, "query"),
        ("recall", {"query": "x", "user_id": "a/b"}, "user_id"),
        ("remember", {"text": "   "}, "text must be"),
        ("remember", {"text": "x", "kind": "bad\nkind"}, "kind"),
        ("search_history", {"query": "port"}, "session_id"),
        ("forget", {"memory_id": "no-slash"}, "memory_id"),
        ("forget", {"memory_id": "user/default/memories/missing"}, "no memory"),
        ("nope", {}, "nope"),
    ],
)
async def test_bad_arguments_answer_a_tool_error_and_the_server_goes_on(
    tmp_path: Path, tool: str, arguments: dict[str, Any], says: str
) -> None:
    async with connected(command(tmp_path / "m.db")) as session:
        result = await session.call_tool(tool, arguments)
        assert result.is_error and says in text(result)
        after = await session.call_tool("recall", {"query": "anything"})
        assert not after.is_error


async def test_answers_are_bounded(tmp_path: Path) -> None:
    async with connected(command(tmp_path / "m.db")) as session:
        for i in range(12):
            await session.call_tool("remember", {"text": f"apple fact {i}: " + "pulp " * 400})
        found = await session.call_tool("recall", {"query": "apple pulp", "limit": 12})
    assert len(text(found)) <= 6_000
    assert "more left out" in text(found)


def test_a_json_config_line_for_clients() -> None:
    """The command an MCP client config names parses as given (see docs)."""
    params = command(Path("x.db"))
    assert json.loads(json.dumps({"command": params.command, "args": params.args}))
