"""Bounded summaries: the stored text by characters, the injected text by tokens, reported."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synopsis.errors import ConfigError
from synopsis.events import SessionSummaryTruncated
from synopsis.memory._types import SessionSummary
from synopsis.memory.inmemory import AsyncInMemoryStore, InMemoryStore
from synopsis.session._bounds import TRUNCATION_MARKER, clip_chars, clip_tokens
from synopsis.session.context import content_hash
from synopsis.session.memory import AsyncSessionMemory, SessionMemory
from synopsis.session.options import SessionOptions
from synopsis.summarizer import SummaryResult
from synopsis.tokens import TokenCounter

T, U, S = "acme", "u1", "s1"
ESTIMATE = TokenCounter().estimate_text
LINES = "\n".join(f"{i}. The user prefers dark roast coffee, item {i}." for i in range(40_000))


def turns(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(count)
    ]


# ---------------------------------------------------------------------------------------------
# The cut (pure)


def test_a_short_text_is_kept_whole() -> None:
    assert clip_chars("short summary", 200) == "short summary"
    assert clip_tokens("short summary", 100, ESTIMATE) == "short summary"


def test_a_cut_ends_on_a_line_and_shows_the_marker() -> None:
    """The kept part is whole lines; the marker says that text is missing."""
    clipped = clip_chars(LINES, 1_000)
    assert len(clipped) <= 1_000
    kept, marker = clipped.rsplit("\n", 1)
    assert marker == TRUNCATION_MARKER
    assert LINES.startswith(kept + "\n")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("One sentence here. " * 30, "One sentence here."),
        ("用户喜欢深烘咖啡。" * 60, "用户喜欢深烘咖啡。"),
        ("word " * 200, "word"),
        ("x" * 1_000, "x"),
    ],
    ids=["sentence", "cjk-sentence", "word", "no-boundary"],
)
def test_without_a_line_the_cut_ends_on_a_sentence_then_a_word(text: str, kept: str) -> None:
    head = clip_chars(text, 300).removesuffix(TRUNCATION_MARKER).rstrip()
    assert head.endswith(kept)
    assert text.startswith(head)


@given(st.text(min_size=0, max_size=3_000), st.integers(min_value=200, max_value=2_500))
def test_a_char_cut_never_exceeds_its_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    clipped = clip_chars(text, limit)
    assert len(clipped) <= limit
    if clipped != text:
        assert clipped.endswith(TRUNCATION_MARKER)
        assert text.startswith(clipped.removesuffix(TRUNCATION_MARKER).rstrip())


@given(st.text(min_size=0, max_size=3_000), st.integers(min_value=50, max_value=600))
def test_a_token_cut_never_exceeds_its_limit(text: str, limit: int) -> None:
    assert ESTIMATE(clip_tokens(text, limit, ESTIMATE)) <= limit


def test_a_huge_text_is_never_estimated_whole() -> None:
    """The token cut first cuts characters, so a 10 MB text costs what a small one does."""
    seen: list[int] = []

    def estimate(text: str) -> int:
        seen.append(len(text))
        return ESTIMATE(text)

    clip_tokens("coffee " * 1_500_000, 500, estimate)
    assert max(seen) <= 500 * 32


# ---------------------------------------------------------------------------------------------
# Stored and injected copies


class Huge:
    """Answers a summary of ``size`` characters, made of lines."""

    def __init__(self, size: int) -> None:
        self.text = LINES[:size]

    def summarize(self, messages: Sequence[Mapping[str, Any]], **_: Any) -> SummaryResult:
        return SummaryResult(text=self.text, model="m", attempts=1)


class AsyncHuge(Huge):
    async def summarize(  # type: ignore[override]
        self, messages: Sequence[Mapping[str, Any]], **_: Any
    ) -> SummaryResult:
        return SummaryResult(text=self.text, model="m", attempts=1)


def test_a_huge_new_summary_is_cut_before_it_is_stored_and_reported() -> None:
    """Both copies hold the cut text; one session_summary_truncated event has the sizes."""
    store, events = InMemoryStore(), []
    with SessionMemory(
        store=store, summarizer=Huge(1_000_000), summarize_every=10, on_event=[events.append]
    ) as memory:
        memory.after_turn(T, U, S, turns(10))
        assert memory.drain(timeout=60)
    latest = store.latest_summary(T, U, S)
    assert latest is not None
    assert len(latest.text) <= 20_000
    assert latest.text.endswith(TRUNCATION_MARKER)
    assert latest.content_hash == content_hash(latest.text)
    (memory_copy,) = [h.item for h in store.search(T, ("user", U), kind="summary")]
    assert memory_copy.text == latest.text
    (cut,) = [e for e in events if isinstance(e, SessionSummaryTruncated)]
    assert (cut.target, cut.unit, cut.limit, cut.version) == ("stored", "chars", 20_000, 1)
    assert (cut.original_chars, cut.kept_chars) == (1_000_000, len(latest.text))
    names = [e.name for e in events]
    assert names.index("session_summary_truncated") < names.index("session_summary_saved")


def stored(text: str) -> SessionSummary:
    return SessionSummary(
        tenant=T,
        user_id=U,
        session_id=S,
        version=1,
        text=text,
        covers_from=0,
        covers_to=10,
        model="m",
        content_hash=content_hash(text),
    )


def test_an_old_huge_summary_is_cut_when_injected() -> None:
    """A 10 MB summary saved before the cap existed is injected cut to max_summary_chars."""
    store, events = InMemoryStore(), []
    store.save_summary(stored("coffee beans. " * 750_000))
    with SessionMemory(store=store, summarizer=None, on_event=[events.append]) as memory:
        built = memory.build_context(T, U, S, turns(4), system_prompt="Be brief.")
    assert len(built[0]["content"]) < 21_000
    assert TRUNCATION_MARKER in built[0]["content"]
    (cut,) = events
    assert isinstance(cut, SessionSummaryTruncated)
    assert (cut.target, cut.unit, cut.limit) == ("injected", "chars", 20_000)
    assert cut.original_chars == 10_500_000


async def test_the_injected_summary_takes_at_most_half_the_budget() -> None:
    """With a context budget the summary is cut by tokens to half of it (async twin too)."""
    store, events = AsyncInMemoryStore(), []
    await store.save_summary(stored(LINES[:15_000]))
    async with AsyncSessionMemory(
        store=store, summarizer=None, context_budget_tokens=2_000, on_event=[events.append]
    ) as memory:
        built = await memory.build_context(T, U, S, turns(4))
    section = built[0]["content"]
    summary = section.split("\n\n", 1)[1].rsplit("\n</session_summary>", 1)[0]
    assert ESTIMATE(summary) <= 1_000
    (cut,) = events
    assert (cut.target, cut.unit, cut.limit) == ("injected", "tokens", 1_000)


async def test_max_summary_tokens_caps_the_injected_summary_and_the_async_store() -> None:
    """max_summary_tokens applies without a budget; the async job cuts what it stores too."""
    store, events = AsyncInMemoryStore(), []
    async with AsyncSessionMemory(
        store=store,
        summarizer=AsyncHuge(50_000),
        summarize_every=10,
        max_summary_tokens=300,
        on_event=[events.append],
    ) as memory:
        await memory.after_turn(T, U, S, turns(10))
        assert await memory.drain(timeout=60)
        await memory.build_context(T, U, S, turns(10))
    cuts = [(e.target, e.unit, e.limit) for e in events if isinstance(e, SessionSummaryTruncated)]
    assert cuts == [("stored", "chars", 20_000), ("injected", "tokens", 300)]


def test_summary_bounds_are_validated_and_can_be_switched_off() -> None:
    options: dict[str, Any] = {
        "summarize_every": 1,
        "window_messages": None,
        "window_tokens": None,
        "context_budget_tokens": None,
        "hybrid": False,
        "recall_limit": 0,
        "estimate": None,
    }
    with pytest.raises(ConfigError, match="max_summary_chars"):
        SessionOptions(**options, max_summary_chars=10)
    with pytest.raises(ConfigError, match="max_summary_tokens"):
        SessionOptions(**options, max_summary_tokens=0)
    unbounded = SessionOptions(**options, max_summary_chars=None, summarize_timeout=None)
    assert (unbounded.max_summary_chars, unbounded.summarize_timeout) == (None, None)
