"""to_anthropic / from_anthropic: shapes, and a lossless round trip (property test)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.convert.anthropic import CARRY_KEY, from_anthropic, strip_carry, to_anthropic
from synopsis.errors import ContextLengthExceeded, ProviderUnavailable, RateLimited
from synopsis.models.anthropic import AnthropicModel, AsyncAnthropicModel

TOOL_TURN = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "read two files"},
    {
        "role": "assistant",
        "content": "reading",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"p": 2}'}},
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    },
    {"role": "tool", "tool_call_id": "a", "content": "one"},
    {"role": "tool", "tool_call_id": "b", "content": "two"},
    {"role": "user", "content": "summary", "meta": {"content_type": "summary"}},
]


def test_system_goes_to_the_system_string() -> None:
    """System messages leave the list and become the system string."""
    system, messages = to_anthropic(TOOL_TURN)
    assert system == "You are helpful."
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "user"]


def test_tool_calls_become_tool_use_blocks() -> None:
    """Assistant tool_calls become tool_use blocks with parsed input after the text."""
    _, messages = to_anthropic(TOOL_TURN, keep_meta=False)
    assert messages[1]["content"] == [
        {"type": "text", "text": "reading"},
        {"type": "tool_use", "id": "a", "name": "read", "input": {"p": 1}},
        {"type": "tool_use", "id": "b", "name": "read", "input": {"p": 2}},
    ]


def test_consecutive_tool_results_merge_into_one_user_message() -> None:
    """Two tool messages become one user message with two tool_result blocks."""
    _, messages = to_anthropic(TOOL_TURN, keep_meta=False)
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "one"},
            {"type": "tool_result", "tool_use_id": "b", "content": "two"},
        ],
    }


def test_without_keep_meta_nothing_extra_is_sent() -> None:
    """keep_meta=False drops usage/meta entirely: nothing the API would reject."""
    _, messages = to_anthropic(TOOL_TURN, keep_meta=False)
    text = json.dumps(messages)
    assert CARRY_KEY not in text
    assert "usage" not in text
    assert "meta" not in text


def test_strip_carry_removes_carried_data() -> None:
    """strip_carry makes kept-meta messages sendable."""
    _, messages = to_anthropic(TOOL_TURN)
    assert CARRY_KEY in json.dumps(messages)
    assert CARRY_KEY not in json.dumps(strip_carry(messages))


def test_round_trip_keeps_markers() -> None:
    """The summary marker and usage survive to_anthropic -> from_anthropic."""
    assert from_anthropic(*to_anthropic(TOOL_TURN)) == TOOL_TURN


def test_images_map_both_ways() -> None:
    """Data URLs become base64 sources, other URLs url sources, and back."""
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg", "detail": "low"}},
        ],
    }
    _, converted = to_anthropic([message], keep_meta=False)
    assert converted[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    assert converted[0]["content"][2]["source"] == {"type": "url", "url": "https://x.test/a.jpg"}
    assert from_anthropic(*to_anthropic([message])) == [message]


def test_native_anthropic_history_converts() -> None:
    """A native Anthropic history (tool_result + text, thinking, is_error) converts sensibly."""
    native = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "/"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": True},
                {"type": "text", "text": "and then?"},
            ],
        },
    ]
    result = from_anthropic([{"type": "text", "text": "sys"}], native)
    assert result[0] == {"role": "system", "content": "sys"}
    assert result[2]["tool_calls"][0]["function"] == {"name": "ls", "arguments": '{"dir": "/"}'}
    assert result[2]["content"] is None
    assert result[2]["reasoning_content"] == "hmm"
    assert result[3] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "denied",
        "meta": {"is_error": True},
    }
    assert result[4] == {"role": "user", "content": [{"type": "text", "text": "and then?"}]}


def test_non_json_arguments_survive() -> None:
    """Tool arguments that are not a JSON object are carried verbatim, input is {}."""
    history = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "f", "arguments": "oops{"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    ]
    _, converted = to_anthropic(history)
    assert converted[0]["content"][0]["input"] == {}
    assert from_anthropic(*to_anthropic(history)) == history


# ---------------------------------------------------------------------------------------------
# Property: random valid histories round-trip exactly

texts = st.text(min_size=1, max_size=20)
metas = st.fixed_dictionaries(
    {},
    optional={"content_type": st.sampled_from(["summary", "skills", "note"]), "n": st.integers()},
)
usages = st.builds(
    lambda p, c: {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c},
    st.integers(0, 10_000),
    st.integers(0, 10_000),
)
text_parts = st.builds(lambda t: {"type": "text", "text": t}, texts)
image_parts = st.sampled_from(
    [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/AA=="}},
        {"type": "image_url", "image_url": {"url": "https://img.test/x.png", "detail": "high"}},
    ]
)
user_content = st.one_of(texts, st.lists(st.one_of(text_parts, image_parts), max_size=3))
arguments = st.one_of(
    st.dictionaries(
        st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=3
    ).map(json.dumps),
    st.just('{"compact":1}'),
    st.just("not json"),
    st.just("[1, 2]"),
)


def with_extras(message: dict[str, Any], draw: Any, *, usage: bool = False) -> dict[str, Any]:
    if draw(st.booleans()):
        message["meta"] = draw(metas)
    if usage and draw(st.booleans()):
        message["usage"] = draw(usages)
    return message


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    if draw(st.booleans()):
        history.append({"role": "system", "content": draw(texts)})
    counter = 0
    for kind in draw(st.lists(st.sampled_from(["user", "assistant", "tools"]), max_size=8)):
        if kind == "user":
            history.append(with_extras({"role": "user", "content": draw(user_content)}, draw))
        elif kind == "assistant":
            content = draw(st.one_of(texts, st.lists(text_parts, min_size=1, max_size=2)))
            history.append(with_extras({"role": "assistant", "content": content}, draw, usage=True))
        else:
            ids = [f"call_{counter + i}" for i in range(draw(st.integers(1, 3)))]
            counter += len(ids)
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "t", "arguments": draw(arguments)},
                }
                for i in ids
            ]
            content = draw(st.one_of(st.none(), texts))
            assistant = {"role": "assistant", "content": content, "tool_calls": calls}
            history.append(with_extras(assistant, draw, usage=True))
            for call_id in ids:
                result_content = draw(st.one_of(texts, st.lists(text_parts, max_size=2)))
                tool = {"role": "tool", "tool_call_id": call_id, "content": result_content}
                if draw(st.booleans()):
                    tool["name"] = "t"
                history.append(with_extras(tool, draw))
    return history


@settings(max_examples=200, deadline=None)
@given(histories())
def test_round_trip_is_lossless(history: list[dict[str, Any]]) -> None:
    """from_anthropic(to_anthropic(h)) == h for any valid history (content, calls, markers)."""
    assert from_anthropic(*to_anthropic(history)) == history


@settings(max_examples=100, deadline=None)
@given(histories())
def test_sent_form_has_no_carried_keys_and_valid_pairs(history: list[dict[str, Any]]) -> None:
    """keep_meta=False output has no carried data, and every tool_use gets a tool_result next."""
    _, messages = to_anthropic(history, keep_meta=False)
    assert CARRY_KEY not in json.dumps(messages)
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        if uses:
            following = messages[index + 1]["content"]
            assert [b["tool_use_id"] for b in following] == uses


# ---------------------------------------------------------------------------------------------
# The Anthropic adapter, against a scripted local server


class _Messages:
    """A local /v1/messages endpoint answering from a script of (status, body) pairs."""

    def __init__(self, script: list[tuple[int, dict[str, Any]]]) -> None:
        self.script = script
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.bodies.append(json.loads(raw))
                status, body = outer.script.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _answer(text: str) -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 11, "output_tokens": 4},
    }


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"type": "error", "error": {"type": kind, "message": message}}


def test_anthropic_model_sends_system_and_no_tools_and_maps_errors() -> None:
    """System goes to `system`, no tools/meta are sent; 529 and 'prompt is too long' map right."""
    server = _Messages(
        [
            _answer("<summary>ok</summary>"),
            _error(529, "overloaded_error", "Overloaded"),
            _error(400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000"),
        ]
    )
    model = AnthropicModel("claude-test", base_url=server.url, api_key="k")
    try:
        response = model.complete(TOOL_TURN)
        with pytest.raises(ProviderUnavailable):
            model.complete(TOOL_TURN)
        with pytest.raises(ContextLengthExceeded):
            model.complete(TOOL_TURN)
    finally:
        model.close()
        server.close()
    assert response.text == "<summary>ok</summary>"
    assert response.usage is not None
    assert response.usage.total_tokens == 15
    body = server.bodies[0]
    assert body["system"] == "You are helpful."
    assert body["max_tokens"] == 8192
    assert "tools" not in body
    assert all(m["role"] in {"user", "assistant"} for m in body["messages"])
    assert CARRY_KEY not in json.dumps(body)
    assert '"meta"' not in json.dumps(body)


async def test_async_anthropic_model_rate_limit() -> None:
    """The async twin answers and turns a 429 into RateLimited."""
    server = _Messages([_answer("hi"), _error(429, "rate_limit_error", "slow down")])
    model = AsyncAnthropicModel("claude-test", base_url=server.url, api_key="k", max_tokens=100)
    try:
        assert (await model.complete([{"role": "user", "content": "x"}])).text == "hi"
        with pytest.raises(RateLimited):
            await model.complete([{"role": "user", "content": "x"}])
    finally:
        await model.aclose()
        server.close()
    assert server.bodies[0]["max_tokens"] == 100


def test_temperature_reaches_the_api_through_any_sdk() -> None:
    """ModelSettings(temperature=...) is sent as a body field (SDK 2.x has no keyword for it)."""
    from synopsis.models import ModelSettings

    server = _Messages([_answer("hi")])
    model = AnthropicModel("claude-test", base_url=server.url, api_key="k")
    try:
        settings = ModelSettings(temperature=0.2, extra={"top_k": 5})
        assert model.complete([{"role": "user", "content": "x"}], settings=settings).text == "hi"
    finally:
        model.close()
        server.close()
    assert server.bodies[0]["temperature"] == 0.2
    assert server.bodies[0]["top_k"] == 5
