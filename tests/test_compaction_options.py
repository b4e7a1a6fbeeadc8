"""CompactionOptions: one validated value, the only home of the defaults, shared with the CLI."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click
import pytest

from synopsis import CompactionOptions as PublicCompactionOptions
from synopsis.cli import compact, compaction_options, count
from synopsis.cli._commands import CLI_KEEP_TAIL
from synopsis.compaction import CompactionOptions as PackageCompactionOptions
from synopsis.compaction.archive import MemoryArchive
from synopsis.compaction.compactor import AsyncCompactor, Compactor
from synopsis.compaction.options import FALLBACKS, CompactionOptions
from synopsis.compaction.plan import KeepTail
from synopsis.compaction.skills import SkillConfig
from synopsis.compaction.summary import DEFAULT_USER_MESSAGES_BUDGET
from synopsis.compaction.trigger import Trigger
from synopsis.errors import ConfigError
from synopsis.prompts import CHINESE, ENGLISH
from synopsis.tokens import ESTIMATORS, TokenCounter

DATA = Path(__file__).parent / "data"


def test_defaults_come_from_their_owners() -> None:
    """The default trigger is Trigger.default(), the budget the summary module's, and so on."""
    options = CompactionOptions()
    assert options.trigger == Trigger.default()
    assert options.user_budget == DEFAULT_USER_MESSAGES_BUDGET
    assert options.keep_tail == KeepTail(fraction=0.1) and options.skills == SkillConfig()
    assert options.prompts is None and options.texts is ENGLISH  # None: detected per history
    assert options.fallback == "keep"


def test_the_value_is_exported_everywhere_and_compares_by_value() -> None:
    """One class behind synopsis, synopsis.compaction and its module; equal values are equal."""
    assert PublicCompactionOptions is PackageCompactionOptions is CompactionOptions
    assert CompactionOptions() == CompactionOptions()
    assert hash(CompactionOptions()) == hash(CompactionOptions())


def test_sequences_are_stored_as_tuples() -> None:
    """on_event and failover given as lists are kept as tuples (the value stays immutable)."""
    options = CompactionOptions(on_event=[print], failover=["extractive"])
    assert options.on_event == (print,) and options.failover == ("extractive",)


@pytest.mark.parametrize("make", [Compactor, AsyncCompactor])
def test_a_trigger_that_is_not_a_trigger_fails_at_construction(make: Any) -> None:
    """trigger="foo" is a ConfigError naming the option when the compactor is built."""
    with pytest.raises(ConfigError, match="trigger must be a Trigger"):
        make(trigger="foo")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("trigger", "foo"),
        ("keep_tail", 3),
        ("counter", "bytes"),
        ("prompts", "en"),
        ("user_budget", -1),
        ("user_budget", True),
        ("skills", {"max_skills": 1}),
        ("incremental", "yes"),
        ("archive", 42),
        ("transcript_path", Path("x")),
        ("model", None),
        ("retry", {"attempts": 2}),
        ("cooldown", 3),
        ("summarizer_window", 0),
        ("fallback", "drop"),
        ("min_new_messages", -1),
        ("on_event", [42]),
        ("on_event", "handler"),
        ("failover", "openai:gpt-4o-mini"),
        ("session_id", 7),
    ],
)
def test_every_option_is_validated_at_construction(option: str, value: object) -> None:
    """A bad value is a ConfigError whose message names the option."""
    with pytest.raises(ConfigError, match=option):
        CompactionOptions(**{option: value})


def test_options_and_keywords_together_are_a_config_error() -> None:
    """options= and keyword options at once: which one wins would be a guess."""
    with pytest.raises(ConfigError, match="either options= or keyword options"):
        Compactor(options=CompactionOptions(), trigger_tokens=5)
    with pytest.raises(ConfigError, match="either options= or keyword options"):
        AsyncCompactor(options=CompactionOptions(), fallback="truncate")


def test_options_must_be_a_compaction_options() -> None:
    """options= given something else is a ConfigError, not a failure on first use."""
    with pytest.raises(ConfigError, match="options must be a CompactionOptions"):
        Compactor(options={"trigger_tokens": 5})  # type: ignore[arg-type]


def test_driver_options_go_with_options() -> None:
    """summarizer=, sleep= and rng= belong to the driver and may accompany options=."""
    compactor = Compactor(options=CompactionOptions(), sleep=lambda _: None)
    assert compactor.options == CompactionOptions()


def test_keywords_build_the_same_value_as_options() -> None:
    """The keyword form folds trigger_* into a Trigger, a count into KeepTail, a code into
    a PromptSet; both forms configure equal compactors."""
    keywords: dict[str, Any] = {
        "trigger_fraction": 0.5,
        "context_window": 10_000,
        "reserve_output": 1_000,
        "keep_tail": 4,
        "prompts": "zh",
        "fallback": "extractive",
        "session_id": "s1",
    }
    options = CompactionOptions(
        trigger=Trigger(fraction=0.5, context_window=10_000, reserve_output=1_000),
        keep_tail=KeepTail(messages=4),
        prompts=CHINESE,
        fallback="extractive",
        session_id="s1",
    )
    assert CompactionOptions.from_keywords(**keywords) == options
    assert Compactor(**keywords).options == Compactor(options=options).options


def test_trigger_clauses_without_a_threshold_keep_the_default() -> None:
    """context_window alone enables nothing, so the default trigger still applies."""
    assert CompactionOptions.from_keywords(context_window=8_000).trigger == Trigger.default()


def test_trigger_and_trigger_clauses_together_are_a_config_error() -> None:
    """trigger= and trigger_tokens= at once is refused, as before."""
    with pytest.raises(ConfigError, match="either trigger= or trigger_"):
        CompactionOptions.from_keywords(trigger=Trigger(tokens=5), trigger_tokens=6)


def test_an_unknown_keyword_is_a_type_error() -> None:
    """A misspelt keyword fails like any Python call would."""
    with pytest.raises(TypeError, match="trigger_token"):
        Compactor(trigger_token=5)  # type: ignore[call-arg]


def test_sync_compactor_rejects_async_handlers_given_in_options() -> None:
    """The sync driver checks the handlers whichever way the options arrive."""

    async def handler(event: Any) -> None:
        return None

    with pytest.raises(ConfigError):
        Compactor(options=CompactionOptions(on_event=[handler]))


def test_each_compactor_builds_its_own_counter_and_archive_from_names(tmp_path: Path) -> None:
    """A counter or archive given by name becomes an object per compactor; objects are used."""
    options = CompactionOptions(counter="adk", archive=str(tmp_path))
    first, second = Compactor(options=options), Compactor(options=options)
    assert first.counter is not second.counter
    assert first.counter.estimate_text("abcdefgh") == 2
    counter, archive = TokenCounter(), MemoryArchive()
    shared = Compactor(options=CompactionOptions(counter=counter, archive=archive))
    assert shared.counter is counter and shared.archive is archive


# -- the CLI takes its defaults from the library ------------------------------------------------


def cli_options(*flags: str) -> CompactionOptions:
    """The options `synopsis compact FILE FLAGS...` would compact with."""
    context = compact.make_context("compact", [str(DATA / "seed-d.json"), *flags])
    return compaction_options(context.params, "transcript.json")


def test_the_cli_without_flags_uses_the_library_defaults() -> None:
    """Field by field, the CLI's options equal CompactionOptions() except two it sets on
    purpose: the transcript path (the file it compacts) and the tail (a coding agent's
    transcript keeps only what always stays: docs/compaction.md's defaults table)."""
    options, library = cli_options(), CompactionOptions()
    assert options.transcript_path == "transcript.json"
    assert options.keep_tail == KeepTail(messages=CLI_KEEP_TAIL) != library.keep_tail
    for field in dataclasses.fields(CompactionOptions):
        if field.name not in ("transcript_path", "keep_tail"):
            assert getattr(options, field.name) == getattr(library, field.name), field.name


def test_the_cli_choices_come_from_the_library() -> None:
    """--estimator offers synopsis.tokens.ESTIMATORS and --fallback the library's fallbacks."""
    choices = {
        param.name: tuple(param.type.choices)
        for command in (count, compact)
        for param in command.params
        if isinstance(param.type, click.Choice)
    }
    assert choices["estimator"] == ESTIMATORS and choices["fallback"] == FALLBACKS
    estimator = next(p for p in count.params if p.name == "estimator")
    assert estimator.default == CompactionOptions().counter


def test_the_cli_flags_map_onto_the_options() -> None:
    """Each flag sets its option; the trigger flags build a Trigger, 0 turning a clause off."""
    options = cli_options(
        "--trigger-messages",
        "40",
        "--keep-tail",
        "3",
        "--language",
        "zh",
        "--estimator",
        "adk",
        "--user-budget",
        "10",
        "--fallback",
        "truncate",
        "--failover",
        "extractive",
    )
    assert options.trigger == Trigger(messages=40)
    assert options.keep_tail == KeepTail(messages=3) and options.prompts is CHINESE
    assert options.counter == "adk" and options.user_budget == 10
    assert options.fallback == "truncate" and options.failover == ("extractive",)
    assert cli_options("--trigger-tokens", "0").trigger.is_off
