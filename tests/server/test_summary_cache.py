"""The proxy reuses the summary of a stateless conversation's prefix instead of re-summarizing.

A counting fake summarizer shows it: a conversation growing two messages a call crosses the
trigger (8 messages) once every three calls, and only then is the summarizer called.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from synopsis import KeepTail, Trigger
from synopsis.server.summary_cache import SummaryCache, common_suffix, prefix_hashes
from synopsis.testing import AsyncFakeModel
from tests.server.conftest import Live, StartServer, Upstream
from tests.server.test_api import turns

SUMMARY = "<summary>\n1. Primary request: plan the blue kayak trip\n</summary>"


@pytest.fixture
def summarizer() -> AsyncFakeModel:
    return AsyncFakeModel(default=SUMMARY)


@pytest.fixture
def proxy(start_server: StartServer, summarizer: AsyncFakeModel) -> Iterator[Live]:
    """Compacts stateless histories above 8 messages, keeping the last 2 verbatim."""
    with start_server(
        model=summarizer, trigger=Trigger(messages=8), keep_tail=KeepTail(messages=2)
    ) as live:
        yield live


def start() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "be brief"}, *turns(9)]


def chat(client: httpx.Client, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send the history; return it grown by the answer and a new question."""
    response = client.post("/v1/chat/completions", json={"model": "m", "messages": history})
    assert response.status_code == 200, response.text
    answer = response.json()["choices"][0]["message"]["content"]
    question = f"question {len(history)} about lunch by the lake"
    return [
        *history,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": question},
    ]


def cache_counts(client: httpx.Client) -> tuple[float, float]:
    found = {}
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("synopsis_proxy_summary_cache_total{"):
            found[line.split('"')[1]] = float(line.split()[-1])
    return found["hit"], found["miss"]


def test_a_growing_conversation_is_summarized_once_per_crossing(
    proxy: Live, upstream: Upstream, summarizer: AsyncFakeModel
) -> None:
    """Calls 1..9 over the trigger: the summarizer runs on calls 1, 4 and 7 only."""
    calls_after_each = []
    with proxy.client(proxy.key("acme")) as client:
        history = start()
        for _ in range(9):
            history = chat(client, history)
            calls_after_each.append(len(summarizer.requests))
            sent = upstream.fake.chat_requests[-1]["messages"]
            # What went upstream: the system prompt, the summary, then the history's last turns.
            assert sent[0] == {"role": "system", "content": "be brief"}
            assert "Primary request" in sent[1]["content"]
            assert sent[-1] == history[-3] and len(sent) <= 8
        assert calls_after_each == [1, 1, 1, 2, 2, 2, 3, 3, 3]
        assert cache_counts(client) == (6.0, 3.0)


def test_the_cache_is_per_tenant(
    proxy: Live, upstream: Upstream, summarizer: AsyncFakeModel
) -> None:
    """Another tenant sending the very same history gets its own summary, not acme's."""
    with proxy.client(proxy.key("acme")) as client:
        history = chat(client, start())
    assert len(summarizer.requests) == 1
    with proxy.client(proxy.key("globex")) as other:
        chat(other, history)
        assert len(summarizer.requests) == 2
        assert cache_counts(other) == (0.0, 2.0)


def test_a_changed_prefix_misses(proxy: Live, summarizer: AsyncFakeModel) -> None:
    """An edited early message (or another system prompt) is summarized afresh."""
    with proxy.client(proxy.key("acme")) as client:
        history = chat(client, start())
        edited = [*history[:3], {**history[3], "content": "turn 2, edited"}, *history[4:]]
        chat(client, edited)
        assert len(summarizer.requests) == 2
        chat(client, [{"role": "system", "content": "be verbose"}, *history[1:]])
        assert len(summarizer.requests) == 3
        chat(client, history)  # the original prefix is still cached
        assert len(summarizer.requests) == 3


def test_without_a_cache_every_call_over_the_trigger_summarizes(
    start_server: StartServer, summarizer: AsyncFakeModel
) -> None:
    """--summary-cache 0: the old behaviour, one summarizer call per request."""
    with start_server(
        model=summarizer, trigger=Trigger(messages=8), keep_tail=KeepTail(messages=2),
        summary_cache=0,
    ) as live, live.client(live.key("acme")) as client:  # fmt: skip
        history = start()
        for _ in range(3):
            history = chat(client, history)
        assert len(summarizer.requests) == 3


# --- the pure parts --------------------------------------------------------------------------


def test_prefix_hashes_chain_over_messages_and_context() -> None:
    """Equal prefixes hash alike; a different message or context changes every later hash."""
    a = prefix_hashes(start(), "ctx")
    assert a == prefix_hashes(start(), "ctx") and len(a) == len(start()) == len(set(a))
    assert prefix_hashes([*start(), {"role": "user", "content": "x"}], "ctx")[:-1] == a
    edited = start()
    edited[2] = {**edited[2], "content": "changed"}
    b = prefix_hashes(edited, "ctx")
    assert b[:2] == a[:2] and not set(b[2:]) & set(a)
    assert not set(prefix_hashes(start(), "other")) & set(a)


def test_the_cache_keeps_the_most_recently_used_entries() -> None:
    """Beyond its size the least recently used entry goes; lookups are per tenant."""
    cache = SummaryCache(2)
    hashes = prefix_hashes(start(), None)
    cache.put("t", hashes[2], [{"role": "user", "content": "s3"}])
    cache.put("t", hashes[5], [{"role": "user", "content": "s6"}])
    assert cache.longest("t", hashes) == (6, [{"role": "user", "content": "s6"}])
    assert cache.longest("u", hashes) == (0, [])
    assert cache.longest("t", hashes[:4])[0] == 3  # now the most recent
    cache.put("t", hashes[7], [{"role": "user", "content": "s8"}])  # evicts hashes[5]
    assert len(cache) == 2 and cache.longest("t", hashes[:7])[0] == 3
    SummaryCache(0).put("t", hashes[0], [])
    assert len(SummaryCache(0)) == 0


def test_the_cache_is_bounded_in_bytes_too() -> None:
    """Entries beyond ``max_bytes`` push out the oldest; one bigger than it is not kept."""
    cache = SummaryCache(100, max_bytes=200)
    hashes = prefix_hashes(start(), None)
    for i in range(5):
        cache.put("t", hashes[i], [{"role": "user", "content": "x" * 60}])
    assert len(cache) == 2 and cache.longest("t", hashes[:2]) == (0, [])
    assert cache.longest("t", hashes[:5])[0] == 5
    cache.put("t", hashes[6], [{"role": "user", "content": "y" * 500}])
    assert cache.longest("t", hashes)[0] == 5


def test_common_suffix_counts_trailing_equal_messages() -> None:
    x, y, z = ({"role": "user", "content": c} for c in "xyz")
    assert common_suffix([x, y, z], [y, z]) == 2
    assert common_suffix([x, y], [x, z]) == 0
    assert common_suffix([], [x]) == 0
