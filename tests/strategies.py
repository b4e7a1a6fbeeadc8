"""Hypothesis strategies for random, valid chat histories with tool calls."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)


@st.composite
def histories(
    draw: st.DrawFn, *, max_turns: int = 12, with_usage: bool = True
) -> list[dict[str, Any]]:
    """A valid history: leading system messages, then turns; every tool call answered."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": draw(_TEXT)} for _ in range(draw(st.integers(0, 2)))
    ]
    call_number = 0
    for _ in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "user":
            messages.append({"role": "user", "content": draw(_TEXT)})
        elif kind == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": draw(_TEXT)}
            if with_usage and draw(st.booleans()):
                total = draw(st.integers(1, 10_000))
                message["usage"] = {
                    "prompt_tokens": total,
                    "completion_tokens": 0,
                    "total_tokens": total,
                }
            messages.append(message)
        else:
            count = draw(st.integers(1, 3))
            ids = [f"call_{call_number + i}" for i in range(count)]
            call_number += count
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                        }
                        for i in ids
                    ],
                }
            )
            messages.extend(
                {"role": "tool", "tool_call_id": i, "content": draw(_TEXT)}
                for i in draw(st.permutations(ids))
            )
    return messages
