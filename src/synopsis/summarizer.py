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
import itertools
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

from synopsis._flow import Flow, adrive, drive
from synopsis.errors import ConfigError, InvalidSummary
from synopsis.events import Event, EventHandler, aemit, check_sync_handlers, emit
from synopsis.messages import safe_cut_points, text_of
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models.retry import (
    AttemptRecord,
    CallModel,
    Cooldown,
    RetryPolicy,
    aperform,
    failover_flow,
    perform,
)
from synopsis.prompts import PromptSet, build_summarizer_input, prompt_set, summary_request
from synopsis.tokens import Estimator, MessageEstimator, TokenCounter

__all__ = [
    "AsyncSummarizer",
    "AsyncSummarizerLike",
    "Emit",
    "Summarizer",
    "SummarizerLike",
    "SummaryResult",
    "strip_summary_wrapping",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    """A validated summary: the kept ``<summary>`` text, and how it was obtained."""

    text: str
    model: str
    attempts: int


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


#: Without a ``<summary>`` part, an answer needs this many non-space characters to count.
_MIN_CONTENT_CHARS: Final = 20

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

    Unusable: tool calls (the model acted instead of summarizing), empty text, or text that
    has neither a non-empty ``<summary>`` part nor at least a few lines of content.
    """
    if response.tool_calls:
        names = ", ".join(_tool_names(response.tool_calls)) or "?"
        raise InvalidSummary(f"the summarizer called tools ({names})", model=response.model)
    text = response.text
    if not text.strip():
        raise InvalidSummary("the summarizer returned empty text", model=response.model)
    summary = extract_summary(text)
    has_part = _SUMMARY_OPEN.search(_cut(text, _ANALYSIS_OPEN, _ANALYSIS_CLOSE)) is not None
    if not summary.strip() or (not has_part and len("".join(summary.split())) < _MIN_CONTENT_CHARS):
        raise InvalidSummary(
            "the summarizer's answer has no <summary> part and too little content",
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


def clip_message(
    message: Mapping[str, Any], max_tokens: int, estimate_text: Estimator
) -> Mapping[str, Any]:
    """A copy of ``message`` whose text is cut to about ``max_tokens`` (head and tail kept).

    Only the summarizer's input is clipped; the archive keeps the original.
    """
    text = text_of(message)
    tokens = estimate_text(text)
    if tokens <= max_tokens or not text:
        return message
    keep_chars = max(1, int(len(text) * max_tokens / tokens) // 2)
    dropped = len(text) - 2 * keep_chars
    clipped = f"{text[:keep_chars]}\n[... {dropped} characters clipped ...]\n{text[-keep_chars:]}"
    result = dict(message)
    result["content"] = clipped
    return result


def chunk_for_window(
    messages: Sequence[Mapping[str, Any]], *, budget: int, estimate: MessageEstimator
) -> list[list[Mapping[str, Any]]]:
    """Split ``messages`` into consecutive chunks of at most ``budget`` tokens each, cutting
    at safe points where possible. A single group larger than the budget forms its own chunk
    (its messages should have been clipped first)."""
    if budget <= 0:
        raise ConfigError("the summarizer's window leaves no room for conversation")
    points = safe_cut_points(messages)
    chunks: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    used = 0
    for left, right in itertools.pairwise(points):
        group = list(messages[left:right])
        size = sum(estimate(m) for m in group)
        if current and used + size > budget:
            chunks.append(current)
            current, used = [], 0
        current.extend(group)
        used += size
    if current:
        chunks.append(current)
    return chunks


# ---------------------------------------------------------------------------------------------
# The concrete summarizers


ModelSpec = Any  # a Model/AsyncModel object, a "provider:model" string, or a callable


def _resolve_models(model: ModelSpec, failover: Sequence[ModelSpec], *, async_: bool) -> list[Any]:
    from synopsis.models._resolve import resolve_model

    if async_:
        return [resolve_model(spec, async_=True) for spec in (model, *failover)]
    return [resolve_model(spec) for spec in (model, *failover)]


def _window_of(models: Sequence[Any], window: int | None) -> int | None:
    if window is not None:
        return window
    sizes = [getattr(m, "context_window", None) for m in models]
    known = [s for s in sizes if isinstance(s, int) and s > 0]
    return min(known) if known else None


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
class Emit:
    """Deliver ``event`` to the ``on_event`` handlers now."""

    event: Event


class _SummarizerCore:
    """Configuration and the summary flow shared by the sync and async summarizers."""

    _async: ClassVar[bool]

    def __init__(
        self,
        *,
        model: ModelSpec,
        failover: Sequence[ModelSpec],
        retry: RetryPolicy | None,
        cooldown: Cooldown | None,
        prompts: PromptSet | str,
        counter: TokenCounter | str,
        window: int | None,
        max_output_tokens: int,
        max_message_tokens: int,
        on_event: Sequence[EventHandler],
        clock: Callable[[], float],
        rng: random.Random | None,
    ) -> None:
        if max_output_tokens <= 0 or max_message_tokens <= 0:
            raise ConfigError("max_output_tokens and max_message_tokens must be positive")
        self.models = _resolve_models(model, failover, async_=self._async)
        self.retry = retry or RetryPolicy()
        self.cooldown = cooldown
        self.prompts = prompt_set(prompts) if isinstance(prompts, str) else prompts
        self.counter = TokenCounter(estimator=counter) if isinstance(counter, str) else counter
        self.window = _window_of(self.models, window)
        self.max_output_tokens = max_output_tokens
        self.max_message_tokens = max_message_tokens
        self.on_event = tuple(on_event)
        self.rng = rng
        self.settings = ModelSettings(max_tokens=max_output_tokens)
        self._clock = clock

    @property
    def model_name(self) -> str:
        return str(getattr(self.models[0], "name", "model"))

    def chunks(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None
    ) -> list[list[Mapping[str, Any]]]:
        """Clip oversized messages, then split into chunks that fit the summarizer's window."""
        clipped = [
            clip_message(m, self.max_message_tokens, self.counter.estimate_text) for m in messages
        ]
        if self.window is None:
            return [clipped]
        overhead = self.counter.estimate_text(
            self.prompts.summarizer_system
            + summary_request(prompts=self.prompts, previous_summary=previous_summary)
        )
        # The previous summary grows into each later chunk's prompt: budget for it twice.
        budget = self.window - self.max_output_tokens - 2 * overhead
        return chunk_for_window(clipped, budget=budget, estimate=self.counter.estimate)

    def request(
        self, chunk: Sequence[Mapping[str, Any]], previous: str | None, focus: str | None
    ) -> list[dict[str, Any]]:
        return build_summarizer_input(
            chunk, prompts=self.prompts, previous_summary=previous, focus=focus
        )

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
        :class:`Emit` for each attempt's ``generate_summary`` event.
        """

        def announce(record: AttemptRecord) -> Emit:
            return Emit(record.to_event(session_id=session_id))

        running, attempts, model = previous_summary, 0, self.model_name
        rng = self.rng or random.Random()
        for chunk in self.chunks(messages, previous_summary):
            result = yield from failover_flow(
                self.models,
                partial(
                    CallModel, messages=self.request(chunk, running, focus), settings=self.settings
                ),
                policy=self.retry,
                rng=rng,
                cooldown=self.cooldown,
                check=validate_summary_response,
                notify=announce,
            )
            running, model = extract_summary(result.value), result.model
            attempts += result.attempts
        return SummaryResult(text=running or "", model=model, attempts=attempts)


class Summarizer(_SummarizerCore):
    """Turns messages into a validated summary text with retries and failover (sync).

    ``model`` and each of ``failover`` may be a model object, a ``"provider:model"`` string
    (``"openai:gpt-4o-mini"``, ``"anthropic:…"``, ``"extractive"``) or a callable
    ``fn(messages) -> str``. No tools are ever passed; a response that is empty or calls a
    tool is an invalid attempt and is retried. Histories larger than the summarizer's window
    (``window``, or the smallest ``context_window`` the models declare) are summarized in
    chunks, each chunk updating the summary of the ones before (rolling).
    """

    _async = False

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
        max_output_tokens: int = 8_192,
        max_message_tokens: int = 20_000,
        on_event: Sequence[EventHandler] = (),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        check_sync_handlers(on_event)
        super().__init__(
            model=model, failover=failover, retry=retry, cooldown=cooldown, prompts=prompts,
            counter=counter, window=window, max_output_tokens=max_output_tokens,
            max_message_tokens=max_message_tokens, on_event=on_event, clock=clock, rng=rng,
        )  # fmt: skip
        self._sleep = sleep

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
        focus: str | None = None,
    ) -> SummaryResult:
        """Summarize ``messages`` (context only, no leading system messages)."""
        flow = self.flow(
            messages, previous_summary=previous_summary, session_id=session_id, focus=focus
        )
        return drive(flow, self._perform)

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
        model: ModelSpec = "extractive",
        failover: Sequence[ModelSpec] = (),
        retry: RetryPolicy | None = None,
        cooldown: Cooldown | None = None,
        prompts: PromptSet | str = "en",
        counter: TokenCounter | str = "default",
        window: int | None = None,
        max_output_tokens: int = 8_192,
        max_message_tokens: int = 20_000,
        on_event: Sequence[EventHandler] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            model=model, failover=failover, retry=retry, cooldown=cooldown, prompts=prompts,
            counter=counter, window=window, max_output_tokens=max_output_tokens,
            max_message_tokens=max_message_tokens, on_event=on_event, clock=clock, rng=rng,
        )  # fmt: skip
        self._sleep = sleep

    async def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous_summary: str | None = None,
        session_id: str | None = None,
        focus: str | None = None,
    ) -> SummaryResult:
        """Summarize ``messages`` (context only, no leading system messages)."""
        flow = self.flow(
            messages, previous_summary=previous_summary, session_id=session_id, focus=focus
        )
        return await adrive(flow, self._perform)

    async def _perform(self, step: Any) -> Any:
        if isinstance(step, Emit):
            return await aemit(self.on_event, step.event)
        return await aperform(step, sleep=self._sleep, clock=self._clock)
