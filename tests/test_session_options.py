"""SessionOptions: one validated value for both session drivers, or the same keyword arguments."""

from __future__ import annotations

from typing import Any

import pytest

from synopsis import AsyncSessionMemory, Redactor, SessionMemory, SessionOptions
from synopsis.errors import ConfigError
from synopsis.memory import AsyncInMemoryStore, InMemoryStore
from synopsis.session import SessionOptions as PackageSessionOptions
from synopsis.tokens import default_estimate

TWINS: list[tuple[Any, Any]] = [
    (SessionMemory, InMemoryStore),
    (AsyncSessionMemory, AsyncInMemoryStore),
]


def test_the_value_is_exported_and_compares_by_value() -> None:
    """One class behind synopsis and synopsis.session; equal values are equal and hash alike."""
    assert PackageSessionOptions is SessionOptions
    assert SessionOptions(hybrid=True) == SessionOptions(hybrid=True)
    assert hash(SessionOptions(on_event=[print])) == hash(SessionOptions(on_event=(print,)))


def test_defaults_and_normalized_fields() -> None:
    """The documented defaults; on_event kept as a tuple, redact=True a default Redactor."""
    options = SessionOptions(on_event=[print], redact=True)  # type: ignore[arg-type]
    assert (options.summarize_every, options.window_messages, options.recall_limit) == (20, 40, 5)
    assert (options.summarize_timeout, options.close_timeout) == (120.0, 30.0)
    assert options.max_summary_chars == 20_000 and options.recall_mode == "keyword"
    assert options.on_event == (print,) and isinstance(options.redact, Redactor)
    assert options.estimator is default_estimate
    assert SessionOptions(estimate=len).estimator is len


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("summarize_every", 0, "summarize_every must be at least 1"),
        ("window_tokens", 0, "window_tokens must be at least 1"),
        ("max_summary_chars", 10, "max_summary_chars must be at least 200"),
        ("max_summary_tokens", 0, "max_summary_tokens must be at least 50"),
        ("summarize_timeout", 0, "summarize_timeout must be a positive number"),
        ("close_timeout", -1, "close_timeout must be a positive number"),
        ("recall_limit", -1, "recall_limit must be 0 or more"),
        ("recall_mode", "fuzzy", "recall_mode must be one of keyword, vector, hybrid"),
        ("redact", "yes", "redact must be a Redactor"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it(option: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SessionOptions(**{option: value})


@pytest.mark.parametrize(("make", "store"), TWINS)
def test_options_value_and_keywords_build_the_same_memory(make: Any, store: Any) -> None:
    """options=SessionOptions(...) and the same keyword arguments configure a driver alike."""
    given = make(store=store(), summarizer=None, options=SessionOptions(hybrid=True, owner="a"))
    keywords = make(store=store(), summarizer=None, hybrid=True, owner="a")
    assert given.options == keywords.options == SessionOptions(hybrid=True, owner="a")
    assert make(store=store(), summarizer=None).options == SessionOptions()


@pytest.mark.parametrize(("make", "store"), TWINS)
def test_options_and_keywords_together_are_refused(make: Any, store: Any) -> None:
    with pytest.raises(ConfigError, match=r"either options= or keyword options \(hybrid\)"):
        make(store=store(), summarizer=None, options=SessionOptions(), hybrid=True)
    with pytest.raises(ConfigError, match="options must be a SessionOptions, got dict"):
        make(store=store(), summarizer=None, options={"hybrid": True})


@pytest.mark.parametrize(("make", "store"), TWINS)
def test_an_unknown_keyword_is_a_type_error(make: Any, store: Any) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'summarise_every'"):
        make(store=store(), summarizer=None, summarise_every=3)


def test_max_workers_belongs_to_the_sync_driver_only() -> None:
    """Threads are the sync twin's: the async one refuses max_workers, as it always did."""
    assert SessionMemory(store=InMemoryStore(), summarizer=None, max_workers=1)
    with pytest.raises(TypeError, match="max_workers"):
        AsyncSessionMemory(store=AsyncInMemoryStore(), summarizer=None, max_workers=1)  # type: ignore[call-arg]
