"""The summarizer: one resilient, validated call that turns messages into a summary text.

This module holds the contract shared by in-place compaction and session memory; the
concrete :class:`Summarizer` / :class:`AsyncSummarizer` are defined below the protocols.
Summarizing is written once, as a flow (:meth:`_SummarizerCore.flow`: chunks -> request ->
the retry + failover chain -> validation -> :class:`SummaryResult`) whose steps the two twins
only carry out; each attempt's ``generate_summary`` event is an :class:`Emit` step, so both
deliver it the moment the attempt ends, before the next call starts.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import operator
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol, Self, TypedDict, Unpack, runtime_checkable

from synopsis._chunking import chunk_for_window, clip_message, clip_text, safe_groups, take_chunk
from synopsis._flow import Emit, Flow, adrive, drive
from synopsis.errors import ConfigError, InvalidInput, InvalidSummary
from synopsis.events import Event, EventHandler, aemit, check_sync_handlers, emit
from synopsis.models import ModelResponse, ModelSettings, Usage
from synopsis.models.limits import output_budget, smallest
from synopsis.models.retry import (
    AttemptRecord,
    CallModel,
    Cooldown,
    RetryPolicy,
    aperform,
    failover_flow,
    perform,
)
from synopsis.prompts import PromptSet, build_summarizer_input, prompt_set
from synopsis.tokens import TokenCounter

__all__ = [
    "AsyncSummarizer",
    "AsyncSummarizerLike",
    "Summarize",
    "Summarizer",
    "SummarizerLike",
    "SummarizerOptions",
    "SummaryRequest",
    "SummaryResult",
    "chunk_for_window",
    "clip_message",
    "strip_summary_wrapping",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    """A validated summary: the kept ``<summary>`` text, and how it was obtained.

    ``model`` wrote the summary (its last chunk); ``attempts`` counts every call made,
    ``calls`` the calls that returned an answer, valid or not, and ``usage`` is the token
    usage those answers reported, summed over retries and chunks: what the summary cost
    (None when no model reported any).
    """

    text: str
    model: str
    attempts: int
    usage: Usage | None = None
    calls: int = 0


@runtime_checkable
class SummarizerLike(Protocol):
    """Anything that can summarize a conversation synchronously."""

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult: ...


@runtime_checkable
class AsyncSummarizerLike(Protocol):
    """The async twin of :class:`SummarizerLike`."""

    async def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
    ) -> SummaryResult: ...


# Tags only: blocks are paired by _spans, never by a lazy ``<a>.*?</a>``, which rescans the rest
# of the text from every unclosed opening tag (quadratic on an answer full of them).
_ANALYSIS_OPEN: Final = re.compile(r"<analysis>", re.IGNORECASE)
_ANALYSIS_CLOSE: Final = re.compile(r"</analysis>", re.IGNORECASE)
_SUMMARY_OPEN: Final = re.compile(r"<summary>", re.IGNORECASE)
_SUMMARY_CLOSE: Final = re.compile(r"</summary>", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# Validation and extraction


def validate_summary_response(response: ModelResponse) -> str:
    """The response's text, or :class:`~synopsis.errors.InvalidSummary` if it is unusable.

    The contract a summarizer must meet: answer with text. Plain text is a summary as it is;
    the ``<summary>`` tags (and an ``<analysis>`` scratchpad before them) are optional
    structure. Unusable: tool calls (the model acted instead of summarizing), or no text at
    all once an ``<analysis>`` block is taken out (retried, as a sampled answer may differ).
    """
    if response.tool_calls:
        names = ", ".join(_tool_names(response.tool_calls)) or "?"
        raise InvalidSummary(f"the summarizer called tools ({names})", model=response.model)
    text = response.text
    if not text.strip():
        raise InvalidSummary("the summarizer returned empty text", model=response.model)
    if not extract_summary(text).strip():
        raise InvalidSummary(
            "the summarizer's answer has no text outside its <analysis> block",
            model=response.model,
        )
    return text


def _tool_names(calls: Iterable[Mapping[str, Any]]) -> list[str]:
    names = []
    for call in calls:
        function = call.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def extract_summary(text: str) -> str:
    """The ``<summary>`` part of a summarizer answer, without the ``<analysis>`` scratchpad.

    With several complete ``<summary>`` parts the last wins; an unclosed one runs to the end
    of the text. Without any, the whole text minus ``<analysis>`` blocks is returned.
    """
    text = _cut(text, _ANALYSIS_OPEN, _ANALYSIS_CLOSE)
    # An <analysis> the model never closed: drop it up to the <summary> that follows, if any.
    text = _cut(text, _ANALYSIS_OPEN, _SUMMARY_OPEN, keep_closing=True)
    complete = list(_spans(text, _SUMMARY_OPEN, _SUMMARY_CLOSE))
    if complete:
        start, end = complete[-1]
        return text[start.end() : end.start()].strip()
    opening = list(_SUMMARY_OPEN.finditer(text))
    if opening:
        return text[opening[-1].end() :].strip()
    return text.strip()


def _spans(
    text: str, opening: re.Pattern[str], closing: re.Pattern[str]
) -> Iterable[tuple[re.Match[str], re.Match[str]]]:
    """Each opening tag with the first closing tag after it, left to right (``open.*?close``).

    Linear: every character is scanned once. When an opening tag has no closing tag after
    it, no later one has either, so the search stops there.
    """
    position = 0
    while (start := opening.search(text, position)) is not None:
        end = closing.search(text, start.end())
        if end is None:
            return
        yield start, end
        position = end.end()


def _cut(
    text: str, opening: re.Pattern[str], closing: re.Pattern[str], *, keep_closing: bool = False
) -> str:
    """``text`` without the spans of :func:`_spans` (keeping each closing tag if asked)."""
    parts: list[str] = []
    position = 0
    for start, end in _spans(text, opening, closing):
        parts.append(text[position : start.start()])
        position = end.start() if keep_closing else end.end()
    parts.append(text[position:])
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Fitting the input to the summarizer's window
#
# A request is [system prompt, *chunk, instruction with the rolling summary]; it must fit the
# window together with the answer (max_output_tokens). Every size below is our estimate (the
# summarizer's TokenCounter), so requests keep ESTIMATE_MARGIN of the window spare for a
# provider whose tokenizer counts more. The pure clipping and chunking is in synopsis._chunking.

#: Each request leaves at least this many tokens for conversation; a window too small for the
#: prompts, a rolling summary, the answer and this much is a ConfigError at construction.
MIN_CONVERSATION_TOKENS: Final = 256
#: The share of the window (after the answer) our estimate keeps spare: tokenizers differ (the
#: default estimator follows o200k; Claude's or Mistral's count the same text higher).
ESTIMATE_MARGIN: Final = 0.10
#: The answer's budget when no window is known (the models declare none).
DEFAULT_OUTPUT_TOKENS: Final = 8_192


# ---------------------------------------------------------------------------------------------
# The concrete summarizers


ModelSpec = Any  # a Model/AsyncModel object, a "provider:model" string, or a callable


def _resolve_models(model: ModelSpec, failover: Sequence[ModelSpec], *, async_: bool) -> list[Any]:
    from synopsis.models import resolve_model

    if async_:
        return [resolve_model(spec, async_=True) for spec in (model, *failover)]
    return [resolve_model(spec) for spec in (model, *failover)]


def _positive(option: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{option} must be a positive integer or None, got {value!r}")
    return value


def _window_of(models: Sequence[Any], window: int | None) -> int | None:
    """``window``, or the smallest ``context_window`` the models declare (None: unbounded)."""
    given = _positive("window", window)
    return given or smallest(getattr(m, "context_window", None) for m in models)


def _output_of(models: Sequence[Any], window: int | None, given: int | None) -> int:
    """``given``, or a share of the window no model's ``max_output_tokens`` forbids."""
    if _positive("max_output_tokens", given) is not None:
        return given  # type: ignore[return-value]
    model_max = smallest(getattr(m, "max_output_tokens", None) for m in models)
    if window is None:
        return min(model_max or DEFAULT_OUTPUT_TOKENS, DEFAULT_OUTPUT_TOKENS)
    return output_budget(window, model_max)


def strip_summary_wrapping(text: str, prompts: PromptSet) -> str:
    """The summary body of a summary message: without our preamble and continue instruction."""
    body = text
    if body.startswith(prompts.summary_preamble):
        body = body[len(prompts.summary_preamble) :]
    end = body.rfind(prompts.continue_instruction)
    if end >= 0:
        body = body[:end]
    return body.strip()


@dataclass(frozen=True, slots=True)
class Summarize:
    """The step of a workflow that needs a summary (a compaction, a session job): summarize
    ``messages`` with its summarizer (retries and failover happen inside it); the flow is sent
    the :class:`SummaryResult`, or the summarizer's error is thrown in. A driver that has
    waited ``timeout`` seconds (None: no limit) stops waiting and throws a timeout instead.
    ``prompts`` (the language a compaction detected) makes a synopsis summarizer ask in that
    language (:meth:`Summarizer.speaking`); another summarizer keeps its own.
    """

    messages: Sequence[Mapping[str, Any]]
    previous_summary: str | None
    session_id: str | None
    timeout: float | None = None
    prompts: PromptSet | None = None

    def on(self, summarizer: Any) -> Any:
        """Ask ``summarizer`` (an awaitable for an async one)."""
        if isinstance(summarizer, _SummarizerCore):
            summarizer = summarizer.speaking(self.prompts)
        return summarizer.summarize(
            self.messages, previous_summary=self.previous_summary, session_id=self.session_id
        )


class SummaryRequest(TypedDict, total=False):
    """The keywords of one summary, for both twins' ``summarize`` (see
    :meth:`_SummarizerCore.flow`, which checks them): the ``previous_summary`` to update,
    the ``session_id`` its events carry, and a ``focus`` for the summary."""

    previous_summary: str | None
    session_id: str | None
    focus: str | None


class SummarizerOptions(TypedDict, total=False):
    """The options both summarizers take (defaults on :class:`_SummarizerCore`); see
    :class:`Summarizer` for what each means. Declared once, so the twins cannot drift."""

    model: ModelSpec
    failover: Sequence[ModelSpec]
    retry: RetryPolicy | None
    cooldown: Cooldown | None
    prompts: PromptSet | str
    counter: TokenCounter | str
    window: int | None
    max_output_tokens: int | None
    output_cap: int | None
    max_message_tokens: int
    on_event: Sequence[EventHandler]
    clock: Callable[[], float]
    rng: random.Random | None


class _SummarizerCore:
    """Configuration and the summary flow shared by the sync and async summarizers."""

    _async: ClassVar[bool]

    def __init__(
        self,
        *,
        model: ModelSpec = "extractive",
        failover: Sequence[ModelSpec] = (),
        retry: RetryPolicy | None = None,
        cooldown: Cooldown | None = None,
        prompts: PromptSet | str = "en",
        counter: TokenCounter | str = "default",
        window: int | None = None,
        max_output_tokens: int | None = None,
        output_cap: int | None = None,
        max_message_tokens: int = 20_000,
        on_event: Sequence[EventHandler] = (),
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        _positive("max_message_tokens", max_message_tokens)
        _positive("output_cap", output_cap)
        self.models = _resolve_models(model, failover, async_=self._async)
        self.retry = retry or RetryPolicy()
        self.cooldown = cooldown
        self.prompts = prompt_set(prompts) if isinstance(prompts, str) else prompts
        self.counter = TokenCounter(estimator=counter) if isinstance(counter, str) else counter
        self.window = _window_of(self.models, window)
        self.max_output_tokens = _output_of(self.models, self.window, max_output_tokens)
        if output_cap is not None and max_output_tokens is None:
            self.max_output_tokens = min(self.max_output_tokens, output_cap)
        self.max_message_tokens = max_message_tokens
        self.on_event = tuple(on_event)
        self.rng = rng
        self.settings = ModelSettings(max_tokens=self.max_output_tokens)
        self._clock = clock
        self._check_window()
        self._speakers: dict[str, tuple[PromptSet, Self]] = {}

    def speaking(self, prompts: PromptSet | None) -> Self:
        """This summarizer asking with ``prompts`` (itself for None or its own): the same
        models, retries, cooldown and handlers. If the window cannot hold those prompts it
        stays itself, so a detected language never fails a call."""
        if prompts is None or prompts is self.prompts:
            return self
        known = self._speakers.get(prompts.language)
        if known is not None and known[0] is prompts:
            return known[1]
        twin = copy.copy(self)
        twin.prompts, twin._speakers = prompts, {}
        try:
            twin._check_window()
        except ConfigError:
            twin = self
        self._speakers[prompts.language] = (prompts, twin)
        return twin

    @property
    def model_name(self) -> str:
        return str(getattr(self.models[0], "name", "model"))

    # -- fitting requests into the window ------------------------------------------------------

    def _check_window(self) -> None:
        """A window that cannot hold the prompts, a rolling summary, the answer and some
        conversation fails now, not inside a before-model hook."""
        if self.window is None:
            return
        overhead = self._overhead("-", None)
        room = self._input_budget() - overhead - self.max_output_tokens
        if room < MIN_CONVERSATION_TOKENS:
            need = overhead + self.max_output_tokens + MIN_CONVERSATION_TOKENS
            spare = need * 10 // 9 - 2  # the input budget keeps ESTIMATE_MARGIN spare
            while spare - int(spare * ESTIMATE_MARGIN) < need:
                spare += 1
            raise ConfigError(
                f"the summarizer's window (window=, a compactor's summarizer_window=) of "
                f"{self.window} tokens is too small: it must leave room for the prompts (about "
                f"{overhead} tokens), the answer and the rolling summary ({self.max_output_tokens} "
                f"each, max_output_tokens= / summarizer_max_output_tokens=) and at least "
                f"{MIN_CONVERSATION_TOKENS} tokens of conversation: give a window of at least "
                f"{spare + self.max_output_tokens} tokens or a smaller answer"
            )

    def _input_budget(self) -> int:
        """What a request may hold besides the answer, keeping our estimate's margin."""
        assert self.window is not None
        spare = self.window - self.max_output_tokens
        return spare - int(spare * ESTIMATE_MARGIN)

    def _overhead(self, previous: str | None, focus: str | None) -> int:
        """The estimate of a request without conversation: system prompt and instruction."""
        return sum(self.counter.estimate(m) for m in self.request((), previous, focus))

    def _room(self, previous: str | None, focus: str | None) -> int:
        """Tokens left for conversation in a request carrying ``previous``."""
        return self._input_budget() - self._overhead(previous, focus)

    def _fit_summary(self, previous: str | None, focus: str | None) -> str | None:
        """``previous`` clipped until a request carrying it leaves room for conversation (it
        only grows past its share when a caller passes a long one or a model ignores
        ``max_tokens``). InvalidInput when ``focus`` alone is too long."""
        deficit = MIN_CONVERSATION_TOKENS - self._room(previous, focus)
        while previous and deficit > 0:
            target = self.counter.estimate_text(previous) - deficit
            clipped = clip_text(previous, target, self.counter.estimate_text) if target > 0 else ""
            previous = clipped if self.counter.estimate_text(clipped) <= target else ""
            deficit = MIN_CONVERSATION_TOKENS - self._room(previous, focus)
        if deficit > 0:
            raise InvalidInput("focus is too long for the summarizer's window; shorten it")
        return previous

    def groups(self, messages: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
        """Oversized messages clipped, split into the groups chunks are made of (one group of
        everything when no window is known)."""
        clipped = [
            clip_message(
                m, self.max_message_tokens, self.counter.estimate_text, self.counter.text_bound
            )
            for m in messages
        ]
        return safe_groups(clipped) if self.window is not None else [clipped]

    def request(
        self, chunk: Sequence[Mapping[str, Any]], previous: str | None, focus: str | None
    ) -> list[dict[str, Any]]:
        return build_summarizer_input(
            chunk, prompts=self.prompts, previous_summary=previous, focus=focus
        )

    def _next_request(
        self,
        groups: list[list[Mapping[str, Any]]],
        start: int,
        previous: str | None,
        focus: str | None,
    ) -> tuple[list[dict[str, Any]], int]:
        """The request for the chunk from ``groups[start]`` on (rolling summary fitted, as
        many groups as fit) and where the next chunk starts; without a window, everything."""
        if self.window is None:
            everything = [m for group in groups[start:] for m in group]
            return self.request(everything, previous, focus), len(groups)
        previous = self._fit_summary(previous, focus)
        budget = self._room(previous, focus)
        chunk, end = take_chunk(groups, start, budget=budget, counter=self.counter)
        return self.request(chunk, previous, focus), end

    # -- the flow ----------------------------------------------------------------------------

    def flow(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
        focus: str | None = None,
    ) -> Flow[Any, SummaryResult]:
        """Summarizing as a flow: each chunk updates the running summary (rolling).

        Each chunk's request goes through the retry + failover chain; an answer
        :func:`validate_summary_response` rejects is a failed, retried attempt. Steps:
        ``CallModel``, ``Pause``, ``ReadClock`` (see :mod:`synopsis.models.retry`) and
        :class:`Emit` for each attempt's ``generate_summary`` event. Every answer's usage
        counts, valid or not.
        """

        def announce(record: AttemptRecord) -> Emit[Event]:
            return Emit(record.to_event(session_id=session_id))

        answers: list[ModelResponse] = []
        running, attempts, model = previous_summary, 0, self.model_name
        rng = self.rng or random.Random()
        groups, start = self.groups(messages), 0
        while start < len(groups):
            request, start = self._next_request(groups, start, running, focus)
            result = yield from failover_flow(
                self.models,
                functools.partial(CallModel, messages=request, settings=self.settings),
                policy=self.retry,
                rng=rng,
                cooldown=self.cooldown,
                check=functools.partial(_kept_and_validated, answers),
                notify=announce,
            )
            running, model = extract_summary(result.value), result.model
            attempts += result.attempts
        return SummaryResult(
            text=running or "",
            model=model,
            attempts=attempts,
            usage=_total_usage(answers),
            calls=len(answers),
        )


def _kept_and_validated(answers: list[ModelResponse], response: ModelResponse) -> str:
    """Keep every answer (its usage is paid for, valid or not), then validate it."""
    answers.append(response)
    return validate_summary_response(response)


def _total_usage(answers: Sequence[ModelResponse]) -> Usage | None:
    reported = [a.usage for a in answers if isinstance(getattr(a, "usage", None), Usage)]
    return functools.reduce(operator.add, reported) if reported else None


class Summarizer(_SummarizerCore):
    """Turns messages into a validated summary text with retries and failover (sync).

    ``model`` and each of ``failover`` may be a model object, a ``"provider:model"`` string
    (``"openai:gpt-4o-mini"``, ``"anthropic:…"``, ``"extractive"``) or a callable
    ``fn(messages) -> str``. No tools are ever passed; a response that is empty or calls a
    tool is an invalid attempt and is retried.

    ``window`` is the most one request may hold, answer included (default: the smallest
    ``context_window`` the models declare; provider models know theirs, see
    :mod:`synopsis.models.limits`). Longer histories are summarized in chunks, each updating
    the summary of the ones before (rolling), and no request exceeds the window: oversized
    messages and tool-call groups are clipped in the middle. ``max_output_tokens`` caps each
    answer (default: a quarter of the window, at least 1,024, at most what the models allow;
    8,192 without a window), and at most ``output_cap`` when one is given (a compactor gives
    a share of its trigger). A window too small for the prompts, the answer and some
    conversation is a :class:`~synopsis.errors.ConfigError` here, never during a summary.
    The result's ``usage`` and ``calls`` say what the summary cost.
    """

    _async = False

    def __init__(
        self,
        *,
        sleep: Callable[[float], None] = time.sleep,
        **options: Unpack[SummarizerOptions],
    ) -> None:
        check_sync_handlers(options.get("on_event", ()))
        super().__init__(**options)
        self._sleep = sleep

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], **request: Unpack[SummaryRequest]
    ) -> SummaryResult:
        """Summarize ``messages`` (context only, no leading system messages)."""
        return drive(self.flow(messages, **request), self._perform)

    def _perform(self, step: Any) -> Any:
        if isinstance(step, Emit):
            return emit(self.on_event, step.event)
        return perform(step, sleep=self._sleep, clock=self._clock)


class AsyncSummarizer(_SummarizerCore):
    """The async twin of :class:`Summarizer`; same options, ``await summarize(...)``."""

    _async = True

    def __init__(
        self,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **options: Unpack[SummarizerOptions],
    ) -> None:
        super().__init__(**options)
        self._sleep = sleep

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], **request: Unpack[SummaryRequest]
    ) -> SummaryResult:
        """Summarize ``messages`` (context only, no leading system messages)."""
        return await adrive(self.flow(messages, **request), self._perform)

    async def _perform(self, step: Any) -> Any:
        if isinstance(step, Emit):
            return await aemit(self.on_event, step.event)
        return await aperform(step, sleep=self._sleep, clock=self._clock)
