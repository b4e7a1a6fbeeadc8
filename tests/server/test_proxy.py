"""The OpenAI-compatible proxy, driven by the real ``openai`` client (sync, async, streaming).

The upstream is a fake OpenAI-compatible server that records what it received, so each test
checks both what the client got back and what went upstream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette

from synopsis import Trigger
from synopsis.server.testing import running
from tests.server.conftest import Live, StartServer, Upstream, wait_for
from tests.server.test_api import summary_of, turns

PRIVATE = ("meta", "usage")


@pytest.fixture
def proxy(start_server: StartServer) -> Iterator[Live]:
    """Compacts histories above 6 messages; summarizes sessions every 4; windows of 4."""
    with start_server(
        summarize_every=4, window_messages=4, trigger=Trigger(messages=6),
        upstream_api_key="sk-upstream",
    ) as live:  # fmt: skip
        yield live


def client_for(live: Live, key: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{live.url}/v1", api_key=key, max_retries=0, default_headers=headers or None
    )


def assert_clean(request: dict[str, Any]) -> None:
    """Only message-schema fields went upstream: no private key on any message."""
    for message in request["messages"]:
        assert not set(message) & set(PRIVATE), message


def test_answers_are_forwarded_unchanged(proxy: Live, upstream: Upstream) -> None:
    client = client_for(proxy, proxy.key("acme"))
    completion = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hello there"}], temperature=0.2
    )
    direct = httpx.post(
        f"{upstream.url}/chat/completions",
        json={"model": "gpt-test", "messages": [{"role": "user", "content": "hello there"}]},
    ).json()
    sent = upstream.fake.chat_requests[0]
    assert completion.choices[0].message.content == "echo: hello there"
    assert completion.model_dump(exclude_unset=True)["usage"] == direct["usage"]
    assert sent == {
        "model": "gpt-test", "messages": [{"role": "user", "content": "hello there"}],
        "temperature": 0.2,
    }  # fmt: skip


def test_history_above_the_trigger_reaches_upstream_compacted(
    proxy: Live, upstream: Upstream
) -> None:
    history = [{"role": "system", "content": "be brief"}, *turns(9)]
    client = client_for(proxy, proxy.key("acme"))
    client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    sent = upstream.fake.chat_requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "be brief"}
    assert len(sent) < len(history)
    assert "summary" in sent[1]["content"]
    assert_clean(upstream.fake.chat_requests[0])


def test_history_below_the_trigger_is_forwarded_as_is(proxy: Live, upstream: Upstream) -> None:
    history = turns(5)
    client_for(proxy, proxy.key("acme")).chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    assert upstream.fake.chat_requests[0]["messages"] == history


def test_no_synopsis_key_or_header_reaches_upstream(proxy: Live, upstream: Upstream) -> None:
    key = proxy.key("acme")
    client = client_for(proxy, key, **{"X-Synopsis-User": "u1", "X-Synopsis-Session": "s1"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    client.models.list()
    for call in upstream.fake.calls:
        assert call.headers.get("authorization") == "Bearer sk-upstream"
        assert key not in str(call.headers) and key not in str(call.body)
        assert not any(name.startswith("x-synopsis") for name in call.headers)


def test_the_caller_may_pass_its_own_upstream_key(proxy: Live, upstream: Upstream) -> None:
    client = client_for(proxy, proxy.key("acme"), **{"X-Upstream-Authorization": "Bearer sk-own"})
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert upstream.fake.calls[0].headers["authorization"] == "Bearer sk-own"


def test_a_named_session_gets_its_summary_injected(proxy: Live, upstream: Upstream) -> None:
    key = proxy.key("acme")
    client = client_for(proxy, key, **{"X-Synopsis-User": "u1", "X-Synopsis-Session": "s1"})
    history: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for i in range(3):
        history.append({"role": "user", "content": f"question {i} about the blue kayak"})
        answer = client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    with proxy.client(key) as rest:
        wait_for(lambda: summary_of(rest, "u1", "s1"), what="the session summary")
    history.append({"role": "user", "content": "and what colour was it?"})
    client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    sent = upstream.fake.chat_requests[-1]
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][0]["content"].startswith("You help.")
    assert "<session_summary" in sent["messages"][0]["content"]
    assert sent["messages"][-1] == {"role": "user", "content": "and what colour was it?"}
    assert_clean(sent)


def test_the_turns_are_recorded_once_each(proxy: Live) -> None:
    key = proxy.key("acme")
    client = client_for(proxy, key, **{"X-Synopsis-User": "u1", "X-Synopsis-Session": "s9"})
    history: list[dict[str, Any]] = []
    for i in range(2):
        history.append({"role": "user", "content": f"q{i}"})
        client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": f"a{i}"})
    with proxy.client(key) as rest:
        context = rest.get("/v1/sessions/u1/s9/context").json()["messages"]
    assert context == [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "a0"},
                       {"role": "user", "content": "q1"}]  # fmt: skip


def test_streaming_passes_chunks_through(proxy: Live, upstream: Upstream) -> None:
    client = client_for(proxy, proxy.key("acme"))
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert "".join(pieces).split() == ["echo:", "one", "two", "three"]
    assert len(pieces) >= 5  # chunk by chunk, not one buffered answer
    assert upstream.fake.chat_requests[0]["stream"] is True


async def test_the_async_client_works_too(proxy: Live) -> None:
    client = openai.AsyncOpenAI(
        base_url=f"{proxy.url}/v1", api_key=proxy.key("acme"), max_retries=0
    )
    completion = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "async hi"}]
    )
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "async stream"}], stream=True
    )
    pieces = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    await client.close()
    assert completion.choices[0].message.content == "echo: async hi"
    assert "".join(pieces).strip() == "echo: async stream"


@pytest.mark.parametrize(("model", "error", "status"), [
    ("fail-429", openai.RateLimitError, 429),
    ("fail-500", openai.InternalServerError, 500),
])  # fmt: skip
@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_their_status(
    proxy: Live, model: str, error: type[openai.APIStatusError], status: int, stream: bool
) -> None:
    client = client_for(proxy, proxy.key("acme"))
    with pytest.raises(error) as caught:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}], stream=stream
        )
    assert caught.value.status_code == status
    assert caught.value.body == {"message": f"fake {caught.value.body['type']}",  # type: ignore[index]
                                 "type": caught.value.body["type"],  # type: ignore[index]
                                 "param": None, "code": caught.value.body["code"]}  # type: ignore[index]  # fmt: skip
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "1"


def test_models_are_passed_through(proxy: Live) -> None:
    models = client_for(proxy, proxy.key("acme")).models.list()
    assert [m.id for m in models.data] == ["fake-model"]


def test_an_unreachable_upstream_is_502(start_server: StartServer) -> None:
    with running(Starlette()) as dead_url:
        pass  # the port is closed again: nothing listens there now
    with start_server(upstream=f"{dead_url}/v1") as live:
        client = client_for(live, live.key("acme"))
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502
    assert caught.value.body["type"] == "ProviderUnavailable"  # type: ignore[index]


def test_without_an_upstream_the_proxy_is_503(start_server: StartServer) -> None:
    with start_server(upstream=None) as live, live.client(live.key("acme")) as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": turns(1)})
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "UpstreamNotConfigured"


def test_half_a_session_address_is_422(proxy: Live) -> None:
    with proxy.client(proxy.key("acme"), **{"X-Synopsis-User": "u1"}) as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": turns(1)})
    assert response.status_code == 422


def test_a_body_below_the_trigger_goes_on_as_sent(proxy: Live, upstream: Upstream) -> None:
    """Nothing to compact or strip: the upstream gets the client's bytes, spacing and all."""
    raw = b'{"model": "m",  "messages": [{"role": "user", "content": "hi \\u00e9"}], "n": 1}'
    with proxy.client(proxy.key("acme"), **{"Content-Type": "application/json"}) as client:
        assert client.post("/v1/chat/completions", content=raw).status_code == 200
    assert upstream.fake.raw_bodies[-1] == raw


def test_private_keys_are_stripped_even_below_the_trigger(proxy: Live, upstream: Upstream) -> None:
    """A message carrying synopsis' own keys is re-serialized without them."""
    message = {"role": "user", "content": "hi", "meta": {"synopsis": 1}, "usage": {"x": 1}}
    with proxy.client(proxy.key("acme")) as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": [message]})
    assert response.status_code == 200
    assert upstream.fake.chat_requests[-1]["messages"] == [{"role": "user", "content": "hi"}]


def test_stream_must_be_a_real_boolean(proxy: Live, upstream: Upstream) -> None:
    """``"stream": "true"`` is refused (422), not coerced and then forwarded as a string."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "true"}
    with proxy.client(proxy.key("acme")) as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 422 and "stream" in response.text
    assert upstream.fake.chat_requests == []


def test_an_upstream_that_does_not_answer_in_time_is_504(start_server: StartServer) -> None:
    """A read timeout (not a refused connection) is 504 ModelTimeout."""
    from synopsis.server.testing import FakeUpstream

    slow = FakeUpstream(summary_delay=5.0)
    with running(slow.app) as url, start_server(upstream=f"{url}/v1", upstream_timeout=0.3) as live:
        client = client_for(live, live.key("acme"))
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(
                model="summarizer-slow", messages=[{"role": "user", "content": "x"}]
            )
    assert caught.value.status_code == 504
    assert caught.value.body["type"] == "ModelTimeout"  # type: ignore[index]
