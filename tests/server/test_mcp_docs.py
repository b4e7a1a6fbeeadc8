"""Every command and client configuration in ``docs/mcp.md`` works: the shell blocks run (as
``tests/server/test_docs.py`` runs docs/server.md's), and each JSON configuration is used as
its client would use it, through the mcp SDK's own client: the stdio ones start the command
they name, the HTTP ones connect to the ``synopsis serve`` the page starts, with the headers
they give (the key filled in from the environment, as the clients do)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.server import test_docs
from tests.server.test_docs import Reader

reader = test_docs.reader  # the fixture: a workdir, a `synopsis` on the PATH, free ports
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"
LOCAL = "On your machine: `synopsis mcp` (stdio)"
SERVICE = "In the service: `/mcp` of `synopsis serve` (streamable HTTP)"
TOOLS = {"recall", "remember", "search_history", "forget"}
_BLOCK = re.compile(r"^```(sh|json)\n(.*?)^```", re.S | re.M)


def sections() -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = part.splitlines()[0].strip()
        found[title] = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(part)]
    return found


def text(result: Any) -> str:
    return "\n".join(part.text for part in result.content if getattr(part, "text", None))


def test_the_tools_table_names_every_tool_and_argument() -> None:
    from synopsis.server.mcp import build_server

    async def never(ctx: Any) -> Any:  # pragma: no cover - the table test calls no tool
        raise AssertionError

    tools = asyncio.run(build_server(never).list_tools())
    lines = DOC.read_text(encoding="utf-8").splitlines()
    rows = {
        row.split("|")[1].strip(" `"): row.split("|")[2] for row in lines if row.startswith("| `")
    }
    assert set(rows) == {tool.name for tool in tools} == TOOLS
    for tool in tools:
        names = re.findall(r"`(\w+)`", rows[tool.name])
        assert names == list(tool.input_schema["properties"]), tool.name


@asynccontextmanager
async def over_stdio(reader: Reader, entry: dict[str, Any]) -> AsyncIterator[ClientSession]:
    command = entry["command"]
    if command == "synopsis":  # found on the PATH, as a client started from a shell finds it
        command = str(reader.workdir / "bin" / "synopsis")
    params = StdioServerParameters(
        command=command,
        args=entry["args"],
        env={**reader.env, **entry.get("env", {})},
        cwd=reader.workdir,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_the_local_walkthrough_and_configs_work(reader: Reader) -> None:
    reader.substitutions["/home/me"] = str(reader.workdir)
    blocks = sections()[LOCAL]
    output = "".join(reader.run_sh(code) for language, code in blocks if language == "sh")
    assert "Serve the memory tools to an MCP client over stdio" in output
    desktop = reader.workdir / ".venv" / "bin"  # the full path Claude Desktop's config names
    desktop.mkdir(parents=True)
    (desktop / "synopsis").symlink_to(reader.workdir / "bin" / "synopsis")
    configs = [json.loads(reader.adapt(code)) for language, code in blocks if language == "json"]
    assert len(configs) == 3
    for config in configs:
        async with over_stdio(reader, config["mcpServers"]["synopsis"]) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            found = await session.call_tool("recall", {"query": "deploy"})
            assert "make ship" in text(found), config


def _expanded(value: str, env: dict[str, str]) -> str:
    """``${NAME}`` (Claude Code) and ``${env:NAME}`` (Cursor), filled in from ``env``."""
    return re.sub(r"\$\{(?:env:)?(\w+)\}", lambda m: env[m.group(1)], value)


async def test_the_service_walkthrough_and_configs_work(reader: Reader) -> None:
    blocks = sections()[SERVICE]
    for language, code in blocks:
        if language == "sh":
            reader.run_sh(code)
    assert len(reader.servers) == 1 and reader.env["SYNOPSIS_KEY"].startswith("syn_")
    configs = [json.loads(reader.adapt(code)) for language, code in blocks if language == "json"]
    assert len(configs) == 2
    for number, config in enumerate(configs):
        entry = config["mcpServers"]["synopsis"]
        headers = {k: _expanded(v, reader.env) for k, v in entry["headers"].items()}
        client = httpx2.AsyncClient(headers=headers, timeout=30.0)
        async with (
            client,
            streamable_http_client(entry["url"], http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            await session.call_tool("remember", {"text": f"config {number} prefers tabs"})
            found = await session.call_tool("recall", {"query": f"config {number} tabs"})
            assert f"config {number} prefers tabs" in text(found)
