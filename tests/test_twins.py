"""A sync collaborator given to an async driver (or the reverse) fails at construction.

``AsyncSessionMemory(summarizer=Summarizer(...))`` used to construct and then fail every
background job with ``TypeError: object SummaryResult can't be used in 'await' expression``,
seen only as an event and a log line (issue 19, finding 8); LangChain's
``SessionMemoryMiddleware`` under ``ainvoke`` broke the same way.
"""

from __future__ import annotations

from typing import Any

import pytest

from synopsis import (
    AsyncCompactor,
    AsyncSessionMemory,
    AsyncSummarizer,
    Compactor,
    SessionMemory,
    Summarizer,
)
from synopsis.errors import ConfigError
from synopsis.memory import AsyncInMemoryStore, InMemoryStore
from synopsis.testing import AsyncFakeModel, FakeModel

SUMMARY = "<summary>1. Primary request: plan the trip.</summary>"


def sync_summarizer() -> Summarizer:
    return Summarizer(model=FakeModel(default=SUMMARY))


def async_summarizer() -> AsyncSummarizer:
    return AsyncSummarizer(model=AsyncFakeModel(default=SUMMARY))


class AsyncArchive:
    async def write(self, messages: Any, *, session_id: str | None = None) -> str:
        return "nowhere"


def test_async_session_memory_refuses_a_sync_summarizer() -> None:
    with pytest.raises(
        ConfigError, match=r"AsyncSessionMemory needs an async summarizer.*Summarizer"
    ):
        AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=sync_summarizer())


def test_async_session_memory_refuses_a_sync_store() -> None:
    with pytest.raises(ConfigError, match="AsyncSessionMemory needs an async store"):
        AsyncSessionMemory(store=InMemoryStore(), summarizer=async_summarizer())  # type: ignore[arg-type]


def test_session_memory_refuses_an_async_summarizer_and_an_async_store() -> None:
    with pytest.raises(ConfigError, match="SessionMemory needs a sync summarizer"):
        SessionMemory(store=InMemoryStore(), summarizer=async_summarizer())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="SessionMemory needs a sync store"):
        SessionMemory(store=AsyncInMemoryStore(), summarizer=sync_summarizer())  # type: ignore[arg-type]


def test_compactors_refuse_the_other_twins_summarizer() -> None:
    with pytest.raises(ConfigError, match="AsyncCompactor needs an async summarizer"):
        AsyncCompactor(summarizer=sync_summarizer())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Compactor needs a sync summarizer"):
        Compactor(summarizer=async_summarizer())  # type: ignore[arg-type]


def test_the_sync_compactor_refuses_an_async_archive() -> None:
    """The async compactor awaits an async archive (an AsyncStoreArchive: see
    tests/test_archive_search.py); the sync one cannot."""
    with pytest.raises(ConfigError, match="needs a sync archive"):
        Compactor(archive=AsyncArchive())  # type: ignore[arg-type]
    AsyncCompactor(archive=AsyncArchive())  # type: ignore[arg-type]


def test_a_collaborator_without_the_method_is_named() -> None:
    with pytest.raises(ConfigError, match=r"needs a summarizer with a summarize\(\) method"):
        AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=object())  # type: ignore[arg-type]


def test_matching_twins_still_construct() -> None:
    SessionMemory(store=InMemoryStore(), summarizer=sync_summarizer()).close()
    AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=async_summarizer())
    AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=None)
    Compactor(summarizer=sync_summarizer())
    AsyncCompactor(summarizer=async_summarizer())


def test_langchain_session_memory_middleware_never_gets_a_mixed_memory() -> None:
    pytest.importorskip("langchain")
    from synopsis.adapters.langchain import SessionMemoryMiddleware

    store, summarizer = AsyncInMemoryStore(), sync_summarizer()
    with pytest.raises(ConfigError, match="AsyncSessionMemory needs an async summarizer"):
        SessionMemoryMiddleware(AsyncSessionMemory(store=store, summarizer=summarizer))
