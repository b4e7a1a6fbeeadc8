"""``POST /v1/responses`` driven by the real ``openai`` client and the OpenAI Agents SDK.

The upstream is :class:`~synopsis.server.testing.FakeUpstream` (its Responses route); each
test checks what the client got and what went upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from synopsis import KeepTail, Trigger
from tests.server.conftest import Live, StartServer, Upstream


@pytest.fixture
def proxy(start_server: StartServer) -> Iterator[Live]:
    """Compacts histories above 6 messages keeping 2; the upstream's key is ``sk-upstream``."""
    with start_server(
        trigger=Trigger(messages=6), keep_tail=KeepTail(messages=2), upstream_api_key="sk-upstream"
    ) as live:
        yield live


def client_for(live: Live, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key=key, max_retries=0)


def sent(upstream: Upstream) -> list[dict[str, Any]]:
    return upstream.fake.bodies("/v1/responses")


def test_an_answer_comes_back_unchanged(proxy: Live, upstream: Upstream) -> None:
    key = proxy.key("acme")
    response = client_for(proxy, key).responses.create(model="gpt-test", input="hello there")
    direct = httpx.post(
        f"{upstream.url}/responses", json={"model": "gpt-test", "input": "hello there"}
    ).json()
    assert response.output_text == "echo: hello there"
    direct["output"][0]["id"] = response.output[0].id  # each answer has its own id
    assert response.model_dump(exclude_unset=True) == {**direct, "created_at": response.created_at}
    call = upstream.fake.calls[0]
    assert call.headers["authorization"] == "Bearer sk-upstream"
    assert key not in str(call.headers) and key not in str(call.body)
    assert sent(upstream)[0] == {"model": "gpt-test", "input": "hello there"}


def test_streaming_events_pass_through_in_order(proxy: Live, upstream: Upstream) -> None:
    stream = client_for(proxy, proxy.key("acme")).responses.create(
        model="gpt-test", input=[{"role": "user", "content": "one two three"}], stream=True
    )
    events = list(stream)
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "echo: one two three"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_async_client(proxy: Live) -> None:
    key = proxy.key("acme")

    async def run() -> str:
        async with openai.AsyncOpenAI(
            base_url=f"{proxy.url}/v1", api_key=key, max_retries=0
        ) as client:
            response = await client.responses.create(model="gpt-test", input="async hello")
            return response.output_text

    assert asyncio.run(run()) == "echo: async hello"


def long_input(turns: int) -> list[dict[str, Any]]:
    """User question, reasoning, function call, its output, assistant answer, ``turns`` times."""
    items: list[dict[str, Any]] = []
    for i in range(turns):
        items += [
            {"role": "user", "content": f"question {i} about the blue kayak trip"},
            {
                "type": "reasoning", "id": f"rs_{i}", "summary": [
                    {"type": "summary_text", "text": f"think {i}"}
                ], "encrypted_content": f"opaque-{i}",
            },
            {
                "type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}",
                "name": "lookup", "arguments": f'{{"q": {i}}}', "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"fact {i}"},
            {
                "type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
                "content": [
                    {"type": "output_text", "text": f"answer {i}: blue", "annotations": []}
                ],
            },
        ]  # fmt: skip
    return items


def assert_calls_answered_in_order(items: list[dict[str, Any]]) -> None:
    """Each function_call_output follows its function_call; each call is answered."""
    called: list[str] = []
    answered: list[str] = []
    for item in items:
        if item.get("type") == "function_call":
            called.append(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in called, item
            answered.append(item["call_id"])
    assert called == answered


def test_a_long_input_reaches_upstream_compacted(proxy: Live, upstream: Upstream) -> None:
    items = [*long_input(5), {"role": "user", "content": "and what colour?"}]
    response = client_for(proxy, proxy.key("acme")).responses.create(
        model="gpt-test",
        instructions="You help.",
        input=items,  # type: ignore[arg-type]
    )
    assert response.output_text == "echo: and what colour?"
    got = sent(upstream)[0]
    assert got["instructions"] == "You help."
    assert len(got["input"]) < len(items)
    assert "summary" in str(got["input"][0]["content"])
    assert got["input"][-1] == {"role": "user", "content": "and what colour?"}
    kept = got["input"][1:]
    assert kept == items[len(items) - len(kept) :]  # the native tail: reasoning items intact
    assert_calls_answered_in_order(got["input"])


def test_newest_user_message_follows_the_summary_in_a_long_tool_loop(
    proxy: Live, upstream: Upstream
) -> None:
    """One request, then many tool calls: the request itself is still sent on its own."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "inventory the kayaks"}]
    for i in range(8):
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"kayak {i}"},
        ]
    client_for(proxy, proxy.key("acme")).responses.create(model="gpt-test", input=items)  # type: ignore[arg-type]
    got = sent(upstream)[0]["input"]
    assert len(got) < len(items)
    assert got[1] == {"role": "user", "content": "inventory the kayaks"}
    assert got[-1] == items[-1]
    assert_calls_answered_in_order(got)


def test_previous_response_id_is_passed_on_untouched(proxy: Live, upstream: Upstream) -> None:
    """The history lives upstream: the input (new items only) goes as it came, never
    compacted, even past the trigger."""
    items = [{"type": "function_call_output", "call_id": "call_x", "output": "42"}] + [
        {"role": "user", "content": f"more {i}"} for i in range(8)
    ]
    client_for(proxy, proxy.key("acme")).responses.create(
        model="gpt-test",
        previous_response_id="resp_earlier",
        input=items,  # type: ignore[arg-type]
    )
    assert sent(upstream)[0] == {
        "model": "gpt-test",
        "previous_response_id": "resp_earlier",
        "input": items,
    }


def test_upstream_errors_pass_through(proxy: Live) -> None:
    client = client_for(proxy, proxy.key("acme"))
    with pytest.raises(openai.RateLimitError) as limited:
        client.responses.create(model="fail-429", input="x")
    with pytest.raises(openai.InternalServerError) as failed:
        client.responses.create(model="fail-500", input="x")
    assert limited.value.response.headers["retry-after"] == "1"
    assert limited.value.code == "rate_limit_exceeded"  # the upstream's own body
    assert failed.value.code == "server_error"


def test_our_errors_are_in_openai_shape(proxy: Live, upstream: Upstream) -> None:
    with (
        client_for(proxy, "sk-not-ours") as stranger,
        pytest.raises(openai.AuthenticationError) as unknown_key,
    ):
        stranger.responses.create(model="gpt-test", input="x")
    assert unknown_key.value.body == {
        "message": "invalid or revoked API key", "type": "authentication_error",
        "param": None, "code": "Unauthorized",
    }  # fmt: skip
    with proxy.client(proxy.key("acme")) as raw:
        broken = raw.post("/v1/responses", content=b"[1, 2]")
    assert broken.status_code == 400
    assert broken.json()["error"]["type"] == "invalid_request_error"
    assert sent(upstream) == []


def test_agents_sdk_runner_over_thirty_turns_with_tools(proxy: Live, upstream: Upstream) -> None:
    """Runner.run with its default Responses model at the proxy: every turn completes (a tool
    call, then the answer), and the upstream never saw the whole history."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def lookup(q: str) -> str:
        """Look a question up."""
        return f"found {q}"

    key = proxy.key("acme")

    async def run() -> list[Any]:
        async with openai.AsyncOpenAI(
            base_url=f"{proxy.url}/v1", api_key=key, max_retries=0
        ) as client:
            model = OpenAIResponsesModel(model="gpt-test", openai_client=client)
            agent = Agent(name="helper", instructions="Use lookup.", tools=[lookup], model=model)
            history: list[Any] = []
            for turn in range(30):
                asked = [*history, {"role": "user", "content": f"question {turn}"}]
                result = await Runner.run(agent, asked)
                assert result.final_output == f"done: found question {turn}"
                history = result.to_input_list()
            return history

    history = asyncio.run(run())
    assert len(history) == 30 * 4  # question, call, output, answer
    sizes = [len(body["input"]) for body in sent(upstream)]
    assert len(sizes) == 60  # two calls a turn
    assert max(sizes) < 20 < len(history)  # bounded: compacted, not the whole history
    for body in sent(upstream):
        assert_calls_answered_in_order(body["input"])
