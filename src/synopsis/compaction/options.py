"""Every option of a compaction in one frozen value, validated once, with the only defaults.

:class:`CompactionOptions` is what both compactors, the CLI and future adapters share: a bad
value is a :class:`~synopsis.errors.ConfigError` naming the option when the value is built,
never an ``AttributeError`` on the first call. The compactors also take the same options as
keyword arguments (:class:`CompactionKeywords`, the liberal edge: ``trigger_tokens=...``,
``keep_tail=6``, ``prompts="zh"``); :meth:`CompactionOptions.from_keywords` normalizes them.

Options that name a live object (``counter``, ``archive``, ``model``) may stay names here;
each compactor builds its own object from the name, so one value can configure many
compactors and still compare equal to another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal, TypedDict, Unpack, get_args

from synopsis._options import chosen_options, keyword_values
from synopsis.compaction.archive import Archive
from synopsis.compaction.plan import KeepTail
from synopsis.compaction.recall import Recall
from synopsis.compaction.skills import SkillConfig
from synopsis.compaction.summary import DEFAULT_USER_MESSAGES_BUDGET
from synopsis.compaction.trigger import Trigger
from synopsis.errors import ConfigError
from synopsis.events import EventHandler
from synopsis.models import redact_spec
from synopsis.models.retry import Cooldown, RetryPolicy
from synopsis.prompts import ENGLISH, PromptSet, prompt_set
from synopsis.redact import Redactor, redactor_from
from synopsis.summarizer import ModelSpec
from synopsis.tokens import ESTIMATORS, TokenCounter

__all__ = [
    "FALLBACKS",
    "MIN_CAPPED_TOKENS",
    "QUOTE_SHARE",
    "SUMMARY_SHARE",
    "CompactionKeywords",
    "CompactionOptions",
    "Fallback",
    "ToolClearing",
    "options_from",
]

#: A compaction's own parts are capped by its trigger, so it never ends far above it: the
#: summary's answer takes at most SUMMARY_SHARE of the trigger's token limit, the quotes of
#: the user's own words at most QUOTE_SHARE, and the default tail a tenth (DEFAULT_TAIL).
#: The split was chosen by halves on LoCoMo (docs/results/fidelity.md): a larger summary of
#: quoted facts keeps more than a longer verbatim tail, on both halves and both layouts.
SUMMARY_SHARE: Final = 0.4
QUOTE_SHARE: Final = 0.2
DEFAULT_TAIL: Final = 0.1
#: The fewest tokens the caps leave the summary and the quotes, whatever the trigger.
MIN_CAPPED_TOKENS: Final = 256

#: What to do when every model failed: keep the history as it is, summarize it with the
#: offline extractive summarizer, or drop the oldest messages (they are archived first).
Fallback = Literal["keep", "extractive", "truncate"]
FALLBACKS: Final[tuple[Fallback, ...]] = get_args(Fallback)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolClearing:
    """Which tool results tier 1 clears.

    ``keep_recent``: the newest tool results that always stay. ``min_tokens``: a result
    smaller than this is not worth a stub. ``exclude_tools``: tools whose results are never
    cleared (the skill tool never is either: its results are the skills a summary keeps).
    ``clear_arguments``: also clear the arguments of the calls whose results were cleared.
    ``target``: tier 1 is enough when it brings the history to at most this share of the
    trigger's token limit; above it the summary follows at once (a history that clearing
    only just brought under the limit would trigger again within a few turns, with little
    left to clear). ``digest_tokens``: each stub of a mostly-prose output keeps its most
    fact-bearing sentences (names, numbers, dates) within this many tokens, 0 for bare stubs
    (:mod:`synopsis.compaction.clear`). The defaults were chosen with ``bench/bench_cost.py`` and
    ``bench/bench_retention.py`` (``docs/benchmarks.md``).
    """

    keep_recent: int = 3
    min_tokens: int = 100
    exclude_tools: frozenset[str] = field(default_factory=frozenset)
    clear_arguments: bool = False
    target: float = 0.75
    digest_tokens: int = 120

    def __post_init__(self) -> None:
        for name in ("keep_recent", "min_tokens", "digest_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"ToolClearing.{name} must be an integer >= 0, got {value!r}")
        tools = self.exclude_tools
        if isinstance(tools, str) or not isinstance(tools, Iterable):
            raise ConfigError(f"ToolClearing.exclude_tools must be a set of names, got {tools!r}")
        object.__setattr__(self, "exclude_tools", frozenset(tools))
        if not all(isinstance(name, str) for name in self.exclude_tools):
            raise ConfigError("ToolClearing.exclude_tools must hold tool names (strings)")
        if not isinstance(self.clear_arguments, bool):
            raise ConfigError("ToolClearing.clear_arguments must be True or False")
        target = self.target
        if isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target <= 1:
            raise ConfigError(f"ToolClearing.target must be in (0, 1], got {target!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions:
    """How to compact: when, what to keep, how the summary reads, where the old part goes.

    ``trigger`` fires a compaction (default: above 160,000 tokens). ``keep_tail`` keeps recent
    messages verbatim. ``counter`` is a :class:`~synopsis.tokens.TokenCounter` or an estimator
    name. ``user_budget`` is how many tokens of the user's own messages the summary quotes;
    ``skills`` keeps loaded skills (None: off); ``incremental`` updates the previous summary
    instead of re-reading it. ``prompts`` fixes the summary's language (a
    :class:`~synopsis.prompts.PromptSet` or ``"en"`` / ``"zh"``); None, the default, writes
    each summary in the language of its history (:mod:`synopsis.compaction.language`).
    ``archive`` (an :class:`Archive` or a directory for JSONL
    transcripts) receives the replaced messages; ``transcript_path`` is named in the summary
    when there is no archive. ``history_tool`` names the tool the agent can search the archive
    with (``search_history``, see :mod:`synopsis.compaction.history`): the summary's pointer
    then tells the agent to call it. ``model``, ``failover``, ``retry`` and ``cooldown`` build the
    summarizer; ``fallback`` says what happens when it fails. ``summarizer_window`` and
    ``summarizer_max_output_tokens`` override the summarizer's window and answer budget
    (default: what the model declares or :mod:`synopsis.models.limits` knows, and a share of
    that window); a window that cannot hold a request fails when the compactor is built, not
    when it compacts. ``min_new_messages`` is how many messages must follow the previous
    summary to make another worthwhile. ``on_event`` handlers and ``session_id`` go into every
    event. The ``repr`` never shows credentials a model spec's URL carries.
    ``clear_tool_outputs`` (a :class:`ToolClearing`; None: off)
    first clears old tool output, and summarizes only if that leaves the history over budget.
    It is on by default: on a tool-heavy session it retained more than summarizing only, made
    about a fifth of the summarizer calls and cost 0.75-0.92 of it with prompt caching
    (``docs/benchmarks.md``); a history without large tool results is summarized as before.
    ``redact`` (a :class:`~synopsis.redact.Redactor`; None: off) takes secrets and personal
    data out of the history before anything leaves: the summarizer's request, the archive and
    the compacted messages returned (see :mod:`synopsis.compaction.redaction` for exactly what).
    ``recall`` (a :class:`~synopsis.compaction.recall.Recall`; None: off) puts the archived
    messages most relevant to the newest user message back into the context after a
    compaction, within a share of the trigger (:mod:`synopsis.compaction.recall`); it needs a
    searchable archive.
    """

    trigger: Trigger = field(default_factory=Trigger.default)
    keep_tail: KeepTail = field(default_factory=lambda: KeepTail(fraction=DEFAULT_TAIL))
    counter: TokenCounter | str = "default"
    # None: the language of each history (synopsis.compaction.language); the texts are long
    prompts: PromptSet | None = field(default=None, repr=False)
    user_budget: int = DEFAULT_USER_MESSAGES_BUDGET
    skills: SkillConfig | None = field(default_factory=SkillConfig)
    incremental: bool = True
    archive: Archive | str | None = None
    transcript_path: str | None = None
    history_tool: str | None = None
    model: ModelSpec = "extractive"
    failover: Sequence[ModelSpec] = ()
    retry: RetryPolicy | None = None
    cooldown: Cooldown | None = None
    summarizer_window: int | None = None
    summarizer_max_output_tokens: int | None = None
    fallback: Fallback = "keep"
    min_new_messages: int = 1
    on_event: Sequence[EventHandler] = ()
    session_id: str | None = None
    clear_tool_outputs: ToolClearing | None = field(default_factory=ToolClearing)
    redact: Redactor | None = None
    recall: Recall | None = None

    def __post_init__(self) -> None:
        # Sequences become tuples, so the value stays immutable and hashable.
        object.__setattr__(self, "failover", tuple(_sequence("failover", self.failover)))
        object.__setattr__(self, "on_event", tuple(_sequence("on_event", self.on_event)))
        for name, valid, expected in _CHECKS:
            value = getattr(self, name)
            if not valid(value):
                raise ConfigError(f"{name} must be {expected}, got {_shown(name, value)!r}")
        if self.recall is not None and not _searchable(self.archive):
            raise ConfigError(
                "recall needs an archive to search: archive=... (a directory, a MemoryArchive "
                "or a StoreArchive)"
            )
        window, output = self.summarizer_window, self.summarizer_max_output_tokens
        if window is not None and output is not None and output >= window:
            raise ConfigError(
                f"summarizer_max_output_tokens ({output}) must be well below "
                f"summarizer_window ({window}): the request has to fit there too"
            )

    @property
    def texts(self) -> PromptSet:
        """The prompts a summary is written with: ``prompts``, English when it is None (a
        compaction sets the detected language first)."""
        return self.prompts or ENGLISH

    @property
    def quote_budget(self) -> int:
        """``user_budget``, capped at :data:`QUOTE_SHARE` of the trigger's token limit."""
        limit = self.trigger.threshold_tokens()
        if limit is None:
            return self.user_budget
        return min(self.user_budget, max(MIN_CAPPED_TOKENS, int(limit * QUOTE_SHARE)))

    @property
    def summary_cap(self) -> int | None:
        """The most tokens the summary's answer may take: :data:`SUMMARY_SHARE` of the
        trigger's token limit (None without one); ``summarizer_max_output_tokens`` overrides."""
        limit = self.trigger.threshold_tokens()
        if self.summarizer_max_output_tokens is not None or limit is None:
            return None
        return max(MIN_CAPPED_TOKENS, int(limit * SUMMARY_SHARE))

    def __repr__(self) -> str:
        shown = (
            f"{f.name}={_shown(f.name, getattr(self, f.name))!r}" for f in fields(self) if f.repr
        )
        return f"{type(self).__name__}({', '.join(shown)})"

    @classmethod
    def from_keywords(cls, **keywords: Unpack[CompactionKeywords]) -> CompactionOptions:
        """The options from the compactors' keyword arguments; left out means the default.

        ``trigger_tokens``, ``trigger_messages``, ``trigger_fraction``, ``context_window`` and
        ``reserve_output`` fold into one :class:`Trigger`; ``keep_tail`` may be a message
        count, ``prompts`` a language code, ``clear_tool_outputs`` True (the default
        :class:`ToolClearing`) or False (off), and ``redact`` True (a default
        :class:`~synopsis.redact.Redactor`: every kind, masked) or False (off).
        """
        values = keyword_values(keywords, CompactionKeywords.__optional_keys__)
        _fold_trigger(values)
        if "keep_tail" in values:
            values["keep_tail"] = KeepTail.coerce(values["keep_tail"])
        if isinstance(values.get("prompts"), str):
            values["prompts"] = prompt_set(values["prompts"])
        if isinstance(values.get("clear_tool_outputs"), bool):
            values["clear_tool_outputs"] = ToolClearing() if values["clear_tool_outputs"] else None
        if isinstance(values.get("redact"), bool):
            values["redact"] = redactor_from(values["redact"])
        if isinstance(values.get("recall"), bool):
            values["recall"] = Recall() if values["recall"] else None
        return cls(**values)


class CompactionKeywords(TypedDict, total=False):
    """The compactors' keyword arguments: the fields of :class:`CompactionOptions`, with the
    trigger given clause by clause, ``keep_tail`` as a count and ``prompts`` as a language."""

    trigger: Trigger | None
    trigger_tokens: int | None
    trigger_messages: int | None
    trigger_fraction: float | None
    context_window: int | None
    reserve_output: int
    keep_tail: KeepTail | int | None
    counter: TokenCounter | str
    prompts: PromptSet | str | None
    user_budget: int
    skills: SkillConfig | None
    incremental: bool
    archive: Archive | str | None
    transcript_path: str | None
    history_tool: str | None
    model: ModelSpec
    failover: Sequence[ModelSpec]
    retry: RetryPolicy | None
    cooldown: Cooldown | None
    summarizer_window: int | None
    summarizer_max_output_tokens: int | None
    fallback: Fallback
    min_new_messages: int
    on_event: Sequence[EventHandler]
    session_id: str | None
    clear_tool_outputs: ToolClearing | bool | None
    redact: Redactor | bool | None
    recall: Recall | bool | None


def options_from(
    options: CompactionOptions | None, keywords: Mapping[str, Any]
) -> CompactionOptions:
    """``options`` as given, or built from ``keywords``; both at once is a ConfigError."""
    return chosen_options(CompactionOptions, options, keywords, CompactionOptions.from_keywords)


#: Keyword -> Trigger field, for the clause-by-clause way of giving a trigger.
_TRIGGER_CLAUSES: Final = {
    "trigger_tokens": "tokens",
    "trigger_messages": "messages",
    "trigger_fraction": "fraction",
    "context_window": "context_window",
    "reserve_output": "reserve_output",
}
_THRESHOLDS: Final = ("tokens", "messages", "fraction")


def _fold_trigger(values: dict[str, Any]) -> None:
    """Replace the trigger_* keywords in ``values`` by one ``trigger`` (if any was given).

    Without a threshold the clauses are ignored and the default trigger applies, as
    ``context_window`` alone enables nothing.
    """
    clauses = {_TRIGGER_CLAUSES[k]: values.pop(k) for k in list(values) if k in _TRIGGER_CLAUSES}
    given = {name: value for name, value in clauses.items() if value is not None}
    trigger = values.pop("trigger", None)
    thresholds = [name for name in _THRESHOLDS if name in given]
    if trigger is not None and thresholds:
        raise ConfigError("pass either trigger= or trigger_* options, not both")
    if trigger is not None:
        values["trigger"] = trigger
    elif thresholds:
        values["trigger"] = Trigger(**given)


def _shown(name: str, value: object) -> object:
    """An option's value as it may be printed: model specs without URL credentials."""
    if name not in ("model", "failover"):
        return value
    if isinstance(value, str):
        return redact_spec(value)
    if isinstance(value, tuple):
        return tuple(redact_spec(v) if isinstance(v, str) else v for v in value)
    return value


def _sequence(name: str, value: object) -> Sequence[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be a list or tuple, got {value!r}")
    return value


def _instance(*types: type) -> Callable[[object], bool]:
    return lambda value: isinstance(value, types)


def _optional(*types: type) -> Callable[[object], bool]:
    return lambda value: value is None or isinstance(value, types)


def _count(minimum: int) -> Callable[[object], bool]:
    def valid(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= minimum

    return valid


def _counter(value: object) -> bool:
    return isinstance(value, TokenCounter) or value in ESTIMATORS


def _archive(value: object) -> bool:
    return value is None or isinstance(value, str | Archive)


def _searchable(value: object) -> bool:
    return isinstance(value, str) or callable(getattr(value, "search", None))


def _handlers(value: object) -> bool:
    return all(callable(handler) for handler in value)  # type: ignore[attr-defined]


#: (option, test, what a valid value is): every check runs when the value is built.
_CHECKS: Final[tuple[tuple[str, Callable[[object], bool], str], ...]] = (
    ("trigger", _instance(Trigger), "a Trigger (or give trigger_tokens=... to a compactor)"),
    ("keep_tail", _instance(KeepTail), "a KeepTail, e.g. KeepTail(messages=6)"),
    ("counter", _counter, f"a TokenCounter or one of {', '.join(ESTIMATORS)}"),
    ("prompts", _optional(PromptSet), "a PromptSet, e.g. synopsis.prompts.CHINESE, or None"),
    ("user_budget", _count(0), "an integer >= 0"),
    ("skills", _optional(SkillConfig), "a SkillConfig or None (off)"),
    ("incremental", _instance(bool), "True or False"),
    ("archive", _archive, "an Archive, a directory path or None"),
    ("transcript_path", _optional(str), "a path or None"),
    (
        "history_tool",
        lambda v: v is None or (isinstance(v, str) and v.strip() != ""),
        "a tool name or None",
    ),
    ("model", lambda value: value is not None, 'a model, e.g. "extractive"'),
    ("retry", _optional(RetryPolicy), "a RetryPolicy or None"),
    ("cooldown", _optional(Cooldown), "a Cooldown or None"),
    ("summarizer_window", lambda v: v is None or _count(1)(v), "a positive integer or None"),
    (
        "summarizer_max_output_tokens",
        lambda v: v is None or _count(1)(v),
        "a positive integer or None",
    ),
    ("fallback", lambda value: value in FALLBACKS, f"one of {', '.join(FALLBACKS)}"),
    ("min_new_messages", _count(0), "an integer >= 0"),
    ("on_event", _handlers, "a list of callables"),
    ("session_id", _optional(str), "a string or None"),
    ("clear_tool_outputs", _optional(ToolClearing), "a ToolClearing or None (off)"),
    ("redact", _optional(Redactor), 'a Redactor, e.g. Redactor(mode="hash"), or None (off)'),
    ("recall", _optional(Recall), "a Recall or None (off)"),
)
