"""Drop-in correctness of compaction (issue #8): what the compactor returns goes to a provider
as it is, its markers survive framework round trips, a compacting model remembers what it
compacted, the truncation fallback keeps what matters, and ``keep_tail`` is never cut into.

Only names that already existed at commit da081ce are imported (the public namespace,
``synopsis.messages``, ``synopsis.testing``, ``synopsis.models.openai``), so this file also runs
against that commit, where each of these tests fails.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from langchain_core.messages import convert_to_messages, convert_to_openai_messages

from synopsis import (
    AsyncCompactingModel,
    AsyncCompactor,
    CompactingModel,
    Compactor,
    MemoryArchive,
    RetryPolicy,
)
from synopsis.errors import ContextLengthExceeded, ProviderUnavailable
from synopsis.messages import content_type, is_internal, is_real_user_message, text_of
from synopsis.models.openai import OpenAIModel
from synopsis.testing import AsyncFakeModel, FakeModel, FunctionModel, RecordingSleep
from synopsis.validation import validate_messages

SUMMARY = (
    "<analysis>thinking</analysis><summary>1. Primary Request and Intent: fix the bug\n"
    "6. All user messages:\n<all_user_messages>\n- the model's paraphrase\n"
    "</all_user_messages>\n8. Current Work: tests</summary>"
)
NO_SLEEP = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)
PREAMBLE = "This conversation continues an earlier one"
#: The chat-completions message schema: the keys each role may carry.
SCHEMA = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}


def call(call_id: str, name: str = "read_file", arguments: str = '{"path": "a.py"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def history() -> list[dict[str, Any]]:
    """A coding session: a system prompt, a loaded skill, tool calls, and a last request."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Load the style guide, then fix the parser."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("s1", "skill", '{"skill": "style"}')],
        },
        {"role": "tool", "tool_call_id": "s1", "content": "STYLE: four spaces, no tabs."},
    ]
    for turn in range(6):
        messages += [
            {"role": "user", "content": f"Step {turn}: fix parser case {turn} " + "detail " * 30},
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{turn}")]},
            {"role": "tool", "tool_call_id": f"c{turn}", "content": "def parse(): ... " * 20},
            {"role": "assistant", "content": f"Fixed case {turn}. " + "done " * 20},
        ]
    messages.append({"role": "user", "content": "LATEST: now make the tests pass"})
    return messages


def legacy_history() -> list[dict[str, Any]]:
    """A history saved by an older version: its summary is marked by a private ``meta`` key."""
    summary = {
        "role": "user",
        "content": PREAMBLE + " (an old summary).",
        "meta": {"content_type": "summary", "version": 1, "tokens_after": 10},
    }
    return [history()[0], summary, *history()[1:]]


def foreign_keys(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(index, key) of every key that is not part of its role's message schema."""
    return [(i, k) for i, m in enumerate(messages) for k in m if k not in SCHEMA[m["role"]]]


def compactor(model: Any = None, **options: Any) -> Compactor:
    options.setdefault("retry", NO_SLEEP)
    return Compactor(model=model or FakeModel(default=SUMMARY), sleep=RecordingSleep(), **options)


def failing() -> FakeModel:
    return FakeModel(default=ProviderUnavailable("down", model="fake:model"))


def agent_request(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a CompactingModel hands to the model it wraps."""
    agent = FakeModel(default="ok", name="agent")
    CompactingModel(agent, compactor(trigger_tokens=200)).complete(messages)
    return agent.requests[0].messages


async def async_output(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    model = AsyncFakeModel(default=SUMMARY)
    return (
        await AsyncCompactor(model=model, retry=NO_SLEEP, keep_tail=3).compact(messages)
    ).messages


# -- 1. internal keys never reach the provider --------------------------------------------------

PATHS = {
    "summarized, tail kept": lambda h: compactor(keep_tail=3).compact(h).messages,
    "summarized, no tail": lambda h: compactor().compact(h).messages,
    "extractive fallback": lambda h: (
        compactor(failing(), fallback="extractive").compact(h).messages
    ),
    "truncate fallback": lambda h: compactor(failing(), fallback="truncate").compact(h).messages,
    "keep fallback": lambda h: compactor(failing()).compact(h).messages,
    "below the trigger": lambda h: compactor(trigger_tokens=10**9)(h),
    "tail covers all": lambda h: compactor(keep_tail=500).compact(h).messages,
    "compacting model": agent_request,
}


@pytest.mark.parametrize("legacy", [False, True], ids=["plain input", "legacy meta input"])
@pytest.mark.parametrize("path", PATHS)
def test_every_compaction_path_returns_only_schema_keys(path: str, legacy: bool) -> None:
    """Whatever happened, each message carries only keys of the chat-completions schema (a
    legacy ``meta`` marker on the input is not passed on), and the history stays valid."""
    output = PATHS[path](legacy_history() if legacy else history())
    assert foreign_keys(output) == []
    validate_messages(output)


async def test_the_async_compactor_returns_only_schema_keys() -> None:
    """The async twin's output is just as sendable."""
    output = await async_output(legacy_history())
    assert foreign_keys(output) == []
    assert [content_type(m) for m in output[:3]] == [None, "skills", "summary"]


class Server:
    """A local OpenAI-compatible server that records every request body; ``strict`` ones
    answer 400 to a message with a key outside the schema, as OpenAI's API does."""

    def __init__(self, *, strict: bool) -> None:
        self.bodies: list[bytes] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                server.bodies.append(raw)
                wrong = foreign_keys(json.loads(raw)["messages"])
                status, body = (400, _error(wrong)) if strict and wrong else (200, _answer())
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key="test", max_retries=0)

    def model(self) -> OpenAIModel:
        return OpenAIModel("local-model", base_url=self.base_url, api_key="test", timeout=10.0)


def _answer() -> dict[str, Any]:
    message = {"role": "assistant", "content": SUMMARY}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "local-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _error(wrong: list[tuple[int, str]]) -> dict[str, Any]:
    index, key = wrong[0]
    text = f"Additional properties are not allowed ('{key}' was unexpected) in messages[{index}]"
    return {"error": {"message": text, "type": "invalid_request_error", "code": None}}


@pytest.fixture(params=[False, True], ids=["recording", "strict"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    srv = Server(strict=request.param)
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def test_requests_on_the_wire_carry_no_private_keys(server: Server) -> None:
    """The summarizer's calls, the user's own next call with the compacted history and a
    CompactingModel's calls: a local server sees no key outside the schema in any body (and
    a strict one accepts them all)."""
    compacted = compactor(server.model(), keep_tail=3).compact(legacy_history())
    assert compacted.compacted and compacted.error is None
    server.client().chat.completions.create(model="local-model", messages=compacted.messages)  # type: ignore[arg-type]
    wrapped = CompactingModel(server.model(), compactor(server.model(), trigger_tokens=200))
    assert wrapped.complete(legacy_history()).text
    assert len(server.bodies) == 4
    for raw in server.bodies:
        assert b'"meta"' not in raw
        assert foreign_keys(json.loads(raw)["messages"]) == []


def test_a_strict_server_accepts_every_compaction_path() -> None:
    """Each path's output, sent with the openai SDK as it is, is accepted by a strict server."""
    srv = Server(strict=True)
    srv.thread.start()
    refused: list[str] = []
    try:
        client = srv.client()
        for path, run in PATHS.items():
            for make in (history, legacy_history):
                try:
                    client.chat.completions.create(model="m", messages=run(make()))  # type: ignore[arg-type]
                except openai.BadRequestError as exc:
                    refused.append(f"{path} ({make.__name__}): {exc}")
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
    assert refused == []


# -- 2. the summary marker survives a framework round trip --------------------------------------


def langchain_round_trip(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return convert_to_openai_messages(convert_to_messages(messages))  # type: ignore[return-value]


def user_blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [
        block
        for m in messages
        for block in re.findall(r"<all_user_messages>(.*?)</all_user_messages>", text_of(m), re.S)
    ]


def ten_turns(convert: Any) -> tuple[int, FakeModel, list[dict[str, Any]]]:
    """Ten agent turns through ``convert`` after every turn; (trigger firings, model, history)."""
    model = FakeModel(default=SUMMARY)
    hook = compactor(model, trigger_tokens=300, counter="adk")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    fired = 0
    for turn in range(10):
        messages.append({"role": "user", "content": f"request {turn}: fix module {turn} " * 6})
        fired += hook.should_compact(messages).fired
        messages = hook(messages)
        messages.append({"role": "assistant", "content": f"done with {turn} " * 15})
        messages = convert(messages)
    return fired, model, messages


def test_ten_turns_through_langchain_compact_only_when_the_trigger_fires() -> None:
    """After every turn the history goes through LangChain's conversion and back: the summary
    is still recognized, folded in as the previous summary, never quoted as user words, and
    the run is exactly the run without the conversion."""
    fired, model, messages = ten_turns(langchain_round_trip)
    plain_fired, plain_model, plain_messages = ten_turns(lambda m: m)
    assert 0 < fired == len(model.requests) == plain_fired == len(plain_model.requests)
    assert messages == plain_messages
    later = [r.messages[-1]["content"] for r in model.requests[1:]]
    assert later and all("<previous_summary>" in text and "fix the bug" in text for text in later)
    for block in user_blocks(messages):
        assert PREAMBLE not in block and "<all_user_messages>" not in block
    assert sum(content_type(m) == "summary" for m in messages) == 1


def test_seed_e_holds_after_a_langchain_round_trip() -> None:
    """Seed E: [system, summary] has 0 real user messages, also after LangChain and back; the
    summary is internal and recognized as a summary from its content alone. (The newest
    request stays after it as its own message since issue 20.5.)"""
    compacted = compactor().compact(history()).messages
    summary = next(m for m in compacted if content_type(m) == "summary")
    pair = langchain_round_trip([compacted[0], summary])
    assert pair[1]["role"] == "user" and set(pair[1]) == {"role", "content"}
    assert content_type(pair[1]) == "summary" and is_internal(pair[1])
    assert sum(is_real_user_message(m) for m in pair) == 0


def test_a_json_round_trip_keeps_the_summary_internal() -> None:
    """A plain JSON round trip (a transcript saved and read back) keeps the marker too."""
    compacted = compactor(keep_tail=3).compact(history()).messages
    again = json.loads(json.dumps(compacted))
    assert [content_type(m) for m in again] == [content_type(m) for m in compacted]
    assert content_type(again[2]) == "summary" and not is_real_user_message(again[2])


# -- 3. a compacting model remembers what it compacted -----------------------------------------


def overflowing_agent(limit: int = 4000) -> tuple[FunctionModel, list[int]]:
    """An agent model that refuses prompts over ``limit`` characters; counts its calls."""
    calls: list[int] = []

    def answer(messages: list[dict[str, Any]]) -> Any:
        size = sum(len(text_of(m)) for m in messages)
        calls.append(size)
        if size > limit:
            return ContextLengthExceeded("context length exceeded", model="agent")
        return "ok"

    return FunctionModel(answer, name="agent"), calls


def three_turns(wrapped: Any, messages: list[dict[str, Any]]) -> None:
    for turn in range(3):
        messages.append({"role": "user", "content": f"turn {turn}: go on"})
        response = wrapped.complete(messages)
        messages.append(dict(response.message))


def test_three_overflowing_turns_summarize_once() -> None:
    """The agent loop appends to its own uncompacted list; the conversation is summarized
    once, and the provider refuses one call, not one per turn."""
    summarizer = FakeModel(default=SUMMARY)
    agent, calls = overflowing_agent()
    wrapped = CompactingModel(agent, compactor(summarizer, trigger_tokens=10**9))
    three_turns(wrapped, history())
    assert len(summarizer.requests) == 1
    assert len(calls) == 4 and sum(size > 4000 for size in calls) == 1


async def test_the_async_compacting_model_summarizes_once() -> None:
    """The async twin keeps the same state."""
    summarizer = AsyncFakeModel(default=SUMMARY)
    calls: list[int] = []

    class Agent:
        name = "agent"

        async def complete(self, messages: Any, *, settings: Any = None) -> Any:
            return overflowing_agent_sync.complete(messages, settings=settings)

    overflowing_agent_sync, calls = overflowing_agent()
    compactor_ = AsyncCompactor(model=summarizer, retry=NO_SLEEP, trigger_tokens=10**9)
    wrapped = AsyncCompactingModel(Agent(), compactor_)
    messages = history()
    for turn in range(3):
        messages.append({"role": "user", "content": f"turn {turn}"})
        messages.append(dict((await wrapped.complete(messages)).message))
    assert len(summarizer.requests) == 1 and len(calls) == 4


def test_the_compacted_conversation_is_exposed_and_can_be_reset() -> None:
    """``history`` is the conversation as last sent (compacted); ``reset()`` forgets it."""
    summarizer = FakeModel(default=SUMMARY)
    agent, _ = overflowing_agent()
    wrapped = CompactingModel(agent, compactor(summarizer, trigger_tokens=10**9))
    messages = history()
    wrapped.complete(messages)
    kept = wrapped.history
    assert [content_type(m) for m in kept[:3]] == [None, "skills", "summary"]
    assert kept[-1] == {"role": "user", "content": "LATEST: now make the tests pass"}  # as itself
    wrapped.complete(
        [*kept, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "x"}]
    )
    assert len(summarizer.requests) == 1
    wrapped.reset()
    assert wrapped.history == []
    wrapped.complete(messages)
    assert len(summarizer.requests) == 2


# -- 6. the truncation fallback keeps what matters ----------------------------------------------


def test_truncation_keeps_system_skills_latest_request_and_quotes() -> None:
    """CLI defaults (keep_tail 0) and every model down: the system prompt, the loaded skill,
    the newest user message and a block quoting the dropped user messages stay; the oldest
    messages go first, tool pairs whole, and the result says the fallback was used."""
    events: list[Any] = []
    archive = MemoryArchive()
    messages = history()
    result = compactor(
        failing(),
        fallback="truncate",
        archive=archive,
        trigger_tokens=1000,
        on_event=[events.append],
    ).compact(messages)
    out = result.messages
    assert result.compacted and result.fallback == "truncate"
    assert events[-1].name == "summarize_failed" and events[-1].fallback == "truncate"
    assert out[0] == messages[0]
    assert "STYLE: four spaces, no tabs." in "".join(text_of(m) for m in out if is_internal(m))
    assert out[-1] == messages[-1]
    quoted = "".join(user_blocks(out))
    assert "Step 0: fix parser case 0" in quoted and "Load the style guide" in quoted
    validate_messages(out)
    dropped = archive.batches[0][1]
    kept = [m for m in out[1:] if not is_internal(m)]
    assert dropped + kept == messages[1:]  # the oldest went, the newest stayed, in order
    assert result.tokens_after < result.tokens_before


# -- 7. keep_tail is honoured ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "keep"),
    [
        (
            [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(5)],
            5,
        ),
        ([{"role": "system", "content": "s"}, {"role": "user", "content": "only one"}], 1),
        (history()[:4], 3),
    ],
    ids=["tail of 5 on 5 messages", "one message left", "tail needs the whole tool pair"],
)
def test_a_tail_that_covers_the_history_skips_compaction(
    messages: list[dict[str, Any]], keep: int
) -> None:
    """When nothing can be summarized without cutting into the requested tail, the history
    comes back unchanged, the result says why, an event says so, and no model is called."""
    events: list[Any] = []
    model = FakeModel(default=SUMMARY)
    result = compactor(model, keep_tail=keep, on_event=[events.append]).compact(messages)
    assert not result.compacted and result.messages == messages
    assert result.skipped and "tail" in result.skipped
    assert [e.name for e in events] == ["compaction_skipped"]
    assert events[0].skipped == result.skipped
    assert model.requests == []
