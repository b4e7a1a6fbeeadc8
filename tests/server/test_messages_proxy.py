"""``POST /v1/messages`` driven by the real ``anthropic`` client (sync, async, streaming, tools).

The upstream is :class:`~synopsis.server.testing.FakeUpstream` configured as an Anthropic-format
upstream for ``claude-*`` models; each test checks what the client got and what went upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from synopsis import Trigger
from synopsis.config import UpstreamSpec
from tests.server.conftest import Live, StartServer, Upstream

UPSTREAM_KEY = "sk-ant-upstream"
TOOL = {
    "name": "lookup",
    "description": "Look a word up.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}


@pytest.fixture
def proxy(start_server: StartServer, upstream: Upstream) -> Iterator[Live]:
    """``claude-*`` (and ``fail-*``) go to the fake as an Anthropic upstream; compaction above
    6 messages."""
    claude = UpstreamSpec(
        name="claude", base_url=upstream.url, format="anthropic", api_key=UPSTREAM_KEY,
        models=("claude-*", "fail-*"),
    )  # fmt: skip
    with start_server(trigger=Trigger(messages=6), upstreams=(claude,)) as live:
        yield live


def client_for(live: Live, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=live.url, api_key=key, max_retries=0)


def sent(upstream: Upstream) -> list[dict[str, Any]]:
    return upstream.fake.bodies("/v1/messages")


def test_an_answer_comes_back_unchanged_and_keys_stay_apart(
    proxy: Live, upstream: Upstream
) -> None:
    key = proxy.key("acme")
    message = client_for(proxy, key).messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "hello there"}]
    )
    direct = httpx.post(
        f"{upstream.url}/messages",
        json={"model": "claude-test", "messages": [{"role": "user", "content": "hello there"}]},
    ).json()
    assert message.to_dict() == direct
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    call = upstream.fake.calls[0]
    assert call.headers["x-api-key"] == UPSTREAM_KEY
    assert (
        call.headers["anthropic-version"]
        == client_for(proxy, key).default_headers["anthropic-version"]
    )  # as the client sent it
    assert key not in str(call.headers) and key not in str(call.body)
    assert "authorization" not in call.headers


def test_async_client_and_streaming(proxy: Live, upstream: Upstream) -> None:
    key = proxy.key("acme")

    async def run() -> tuple[str, str]:
        async with anthropic.AsyncAnthropic(
            base_url=proxy.url, api_key=key, max_retries=0
        ) as client:
            plain = await client.messages.create(
                model="claude-test",
                max_tokens=64,
                messages=[{"role": "user", "content": "one two"}],
            )
            async with client.messages.stream(
                model="claude-test", max_tokens=64,
                messages=[{"role": "user", "content": "three four five"}],
            ) as stream:  # fmt: skip
                streamed = "".join([text async for text in stream.text_stream])
        return plain.content[0].text, streamed  # type: ignore[union-attr]

    plain, streamed = asyncio.run(run())
    assert plain == "echo: one two"
    assert streamed == "echo: three four five"
    assert sent(upstream)[1]["stream"] is True


def test_sync_streaming_events_pass_through_in_order(proxy: Live) -> None:
    client = client_for(proxy, proxy.key("acme"))
    with client.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "a b"}]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_delta" in kinds
    assert final.content[0].text == "echo: a b"  # type: ignore[union-attr]


def test_tool_use_round_trip(proxy: Live, upstream: Upstream) -> None:
    client = client_for(proxy, proxy.key("acme"))
    history: list[dict[str, Any]] = [{"role": "user", "content": "kayak"}]
    first = client.messages.create(
        model="claude-test",
        max_tokens=64,
        tools=[TOOL],
        messages=history,  # type: ignore[list-item]
    )
    call = first.content[0]
    assert first.stop_reason == "tool_use" and call.type == "tool_use"
    history += [
        {"role": "assistant", "content": [call.model_dump()]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "a boat"}],
        },
    ]
    second = client.messages.create(
        model="claude-test",
        max_tokens=64,
        tools=[TOOL],
        messages=history,  # type: ignore[arg-type, list-item]
    )
    assert second.content[0].text == "done: a boat"  # type: ignore[union-attr]
    assert sent(upstream)[1]["messages"] == history  # below the trigger: as it came


def long_history(pairs: int) -> list[dict[str, Any]]:
    """User question, tool_use, tool_result (+ text), assistant answer, ``pairs`` times."""
    history: list[dict[str, Any]] = []
    for i in range(pairs):
        history += [
            {"role": "user", "content": f"question {i} about the blue kayak trip"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"looking up {i}"},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "lookup", "input": {"q": i}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"fact {i}"}
                ],
            },
            {"role": "assistant", "content": f"answer {i}: the kayak is blue"},
        ]
    return history


def assert_tool_pairs_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool_result answers a tool_use of the message right before it."""
    for index, message in enumerate(messages):
        content = message["content"]
        results = [b for b in content if isinstance(content, list) and b["type"] == "tool_result"]
        if not results:
            continue
        before = messages[index - 1]["content"]
        calls = {b["id"] for b in before if isinstance(before, list) and b["type"] == "tool_use"}
        assert {b["tool_use_id"] for b in results} <= calls, (index, message)


def test_a_long_history_reaches_upstream_compacted_with_tool_pairs_whole(
    proxy: Live, upstream: Upstream
) -> None:
    history = long_history(5)
    newest = {
        "role": "user",
        "content": [
            {"type": "text", "text": "and what colour?", "cache_control": {"type": "ephemeral"}}
        ],
    }
    history.append(newest)
    system = [{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}]
    answer = client_for(proxy, proxy.key("acme")).messages.create(
        model="claude-test",
        max_tokens=64,
        system=system,
        messages=history,  # type: ignore[arg-type]
    )
    assert answer.content[0].text == "echo: and what colour?"  # type: ignore[union-attr]
    got = sent(upstream)[0]
    assert got["system"] == system  # as it came, its cache breakpoint included
    assert len(got["messages"]) < len(history)
    assert "summary" in str(got["messages"][0]["content"]).lower()
    assert got["messages"][-1] == newest  # its own message, cache_control kept
    kept = len(got["messages"]) - 1
    assert got["messages"][1:] == history[len(history) - kept :]  # the native tail, verbatim
    assert_tool_pairs_whole(got["messages"])


def test_count_tokens_is_passed_through(proxy: Live, upstream: Upstream) -> None:
    messages = [{"role": "user", "content": "count me"}]
    counted = client_for(proxy, proxy.key("acme")).messages.count_tokens(
        model="claude-test",
        messages=messages,  # type: ignore[arg-type]
    )
    assert counted.input_tokens == len('[{"role": "user", "content": "count me"}]') // 4
    assert upstream.fake.calls[0].path == "/v1/messages/count_tokens"
    assert upstream.fake.calls[0].headers["x-api-key"] == UPSTREAM_KEY


def test_upstream_errors_pass_through_in_anthropic_shape(proxy: Live) -> None:
    client = client_for(proxy, proxy.key("acme"))
    ask = {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model="fail-429", **ask)  # type: ignore[call-overload]
    with pytest.raises(anthropic.InternalServerError) as failed:
        client.messages.create(model="fail-500", **ask)  # type: ignore[call-overload]
    assert limited.value.response.headers["retry-after"] == "1"
    error = {"type": "rate_limit_error", "message": "fake rate_limit_exceeded"}
    assert limited.value.body == {"type": "error", "error": error}  # the upstream's own body
    assert failed.value.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_our_errors_are_in_anthropic_shape(proxy: Live, upstream: Upstream) -> None:
    ask: dict[str, Any] = {"max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    with (
        client_for(proxy, "sk-not-ours") as stranger,
        pytest.raises(anthropic.AuthenticationError) as unknown_key,
    ):
        stranger.messages.create(model="claude-test", **ask)
    assert unknown_key.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid or revoked API key"},
    }
    # Not a claude-* model: the default upstream serves it, in the OpenAI format.
    with (
        client_for(proxy, proxy.key("acme")) as client,
        pytest.raises(anthropic.BadRequestError) as wrong_format,
    ):
        client.messages.create(model="gpt-4o", **ask)
    assert wrong_format.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "/v1/chat/completions" in wrong_format.value.body["error"]["message"]  # type: ignore[index]
    with proxy.client(proxy.key("acme")) as raw:
        broken = raw.post("/v1/messages", content=b"{not json")
    assert broken.status_code == 400 and broken.json()["type"] == "error"
    assert sent(upstream) == []
