"""Hypothesis strategies for the framework converters: valid chat histories rich in detail.

Tool calls answered in any order, multi-part content with images, usage with details,
unicode (CJK included), empty contents, names, ``meta`` markers and reasoning. Flags turn off
what a target cannot carry without our extras.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

SUMMARY_MARKER = "[对话摘要 / Conversation summary]\n"

TEXT = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=24,
    ),
    st.sampled_from(["", "你好，世界", "日本語のテキスト", "한국어 문장", "emoji 🎉 ok", "a\nb"]),
)
IMAGE = st.builds(
    lambda url, detail: {
        "type": "image_url",
        "image_url": {"url": url} if detail is None else {"url": url, "detail": detail},
    },
    st.sampled_from(["https://example.test/cat.png", "data:image/png;base64,iVBORw0KGgo="]),
    st.sampled_from([None, "low", "high"]),
)
TEXT_PART = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(["path", "路径", "n"]), TEXT | st.integers(), max_size=2).map(
        lambda d: json.dumps(d, ensure_ascii=False)
    ),
    st.sampled_from(['{"p":1}', "{}", "", "oops{", "[1, 2]", '{"a": "中"}']),
)


@st.composite
def chat_histories(
    draw: st.DrawFn, *, extensions: bool = True, reasoning: bool = True, images: bool = True
) -> list[dict[str, Any]]:
    """A valid history. ``extensions`` adds usage, meta and names; ``reasoning`` reasoning."""
    parts = st.lists(TEXT_PART | IMAGE if images else TEXT_PART, min_size=1, max_size=3)
    messages: list[dict[str, Any]] = []
    for role in draw(st.lists(st.sampled_from(["system", "developer"]), max_size=2)):
        content = draw(TEXT | st.lists(TEXT_PART, min_size=1, max_size=2))
        messages.append({"role": role, "content": content})
    calls = 0
    for kind in draw(
        st.lists(st.sampled_from(["user", "assistant", "tools", "summary"]), max_size=8)
    ):
        if kind == "user":
            messages.append(
                _extend(draw, {"role": "user", "content": draw(TEXT | parts)}, extensions)
            )
        elif kind == "summary":
            summary = {"role": "user", "content": SUMMARY_MARKER + draw(TEXT)}
            messages.append(
                {**summary, "meta": {"content_type": "summary"}} if extensions else summary
            )
        else:
            count = draw(st.integers(1, 3)) if kind == "tools" else 0
            ids = [f"call_{calls + i}_調用" for i in range(count)]
            calls += count
            messages.append(_assistant(draw, ids, extensions=extensions, reasoning=reasoning))
            messages.extend(_tool_result(draw, i, extensions) for i in draw(st.permutations(ids)))
    return messages


def _assistant(
    draw: st.DrawFn, ids: list[str], *, extensions: bool, reasoning: bool
) -> dict[str, Any]:
    texts = st.lists(TEXT_PART, min_size=1, max_size=2)
    content = draw(st.none() | TEXT | texts) if ids else draw(TEXT | texts)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning and draw(st.booleans()):
        message["reasoning_content"] = draw(TEXT)
    if ids:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": draw(st.sampled_from(["read", "搜索"])),
                    "arguments": draw(ARGUMENTS),
                },
            }
            for call_id in ids
        ]
    if extensions and draw(st.booleans()):
        prompt, completion = draw(st.integers(0, 9_999)), draw(st.integers(0, 999))
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion + draw(st.sampled_from([0, 0, 7])),
        }
        if draw(st.booleans()):
            usage["prompt_tokens_details"] = {"cached_tokens": draw(st.integers(1, 99))}
        if draw(st.booleans()):
            usage["completion_tokens_details"] = {"reasoning_tokens": draw(st.integers(1, 99))}
        message["usage"] = usage
    return _extend(draw, message, extensions)


def _tool_result(draw: st.DrawFn, call_id: str, extensions: bool) -> dict[str, Any]:
    content = draw(TEXT | st.lists(TEXT_PART, min_size=1, max_size=2))
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if draw(st.booleans()):
        message["name"] = draw(st.sampled_from(["read", "other_tool"]))
    if extensions and draw(st.booleans()):
        message["meta"] = {"is_error": True}
    return message


def _extend(draw: st.DrawFn, message: dict[str, Any], extensions: bool) -> dict[str, Any]:
    if extensions and draw(st.booleans()):
        message["name"] = draw(st.sampled_from(["alice", "李雷"]))
    if extensions and draw(st.booleans()):
        message["meta"] = {"internal": True, "note": draw(TEXT)}
    return message
