"""In-place compaction: before a model call, replace old history with one structured summary.

``Compactor`` (sync) and ``AsyncCompactor`` are thin drivers of one pure flow
(:mod:`synopsis.compaction._flow`): they only call the summarizer, write the archive and
deliver events when the flow asks. Use either as a before-model hook
(``messages = compactor(messages)``), call ``compact()`` on demand, or wrap a model in a
:class:`~synopsis.compaction.model.CompactingModel` to also compact and retry when the
provider says the context is too long. The result is
``[leading system messages] + [preserved skills] + [summary] + [tail]``, always a new list;
the caller's history is never mutated. When summarizing fails the history comes back
unchanged (or degraded as configured), an event says why, and the agent goes on. With
``redact=`` a compaction works on the redacted history, so no value the redactor finds
reaches the summarizer, the archive or the result (:mod:`synopsis.compaction.redaction`).

Options come as one :class:`CompactionOptions` (``options=``) or as the same keyword
arguments; ``summarizer=``, ``sleep=`` and ``rng=`` belong to the driver. ``preview()`` (the
same on both, as it does no I/O) says what ``compact()`` would do, without doing it.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Unpack

from synopsis._flow import Emit, Flow, adrive, drive
from synopsis._options import check_twin
from synopsis.compaction._flow import (
    CompactionResult,
    CompactionStep,
    SearchArchive,
    SummarizeOffline,
    WriteArchive,
    compaction,
    decide,
)
from synopsis.compaction.archive import Archive, JsonlArchive
from synopsis.compaction.options import (
    CompactionKeywords,
    CompactionOptions,
    Fallback,
    options_from,
)
from synopsis.compaction.preview import CompactionPreview, preview_compaction
from synopsis.compaction.trigger import TriggerDecision
from synopsis.events import aemit, check_sync_handlers, emit
from synopsis.summarizer import (
    AsyncSummarizer,
    AsyncSummarizerLike,
    Summarize,
    Summarizer,
    SummarizerLike,
)
from synopsis.tokens import TokenCounter

__all__ = [
    "AsyncCompactor",
    "CompactionOptions",
    "CompactionPreview",
    "CompactionResult",
    "Compactor",
    "Fallback",
]

Messages = Sequence[Mapping[str, Any]]
Tools = Sequence[Mapping[str, Any]] | None


class _Driver:
    """What both compactors share: the options, and the counter and archive they name."""

    def __init__(self, options: CompactionOptions | None, keywords: Mapping[str, Any]) -> None:
        self.options = options_from(options, keywords)
        counter, archive = self.options.counter, self.options.archive
        self.counter = TokenCounter(estimator=counter) if isinstance(counter, str) else counter
        self.archive: Archive | None = (
            JsonlArchive(archive) if isinstance(archive, str) else archive
        )
        self.prompts = self.options.texts

    @property
    def session_id(self) -> str | None:
        return self.options.session_id

    def should_compact(self, messages: Messages, *, tools: Tools = None) -> TriggerDecision:
        """Whether the trigger fires for ``messages`` (no model call)."""
        return decide(self.options, self.counter, messages, tools)[1]

    def preview(
        self, messages: Messages, *, tools: Tools = None, force: bool = True, reason: str = "manual"
    ) -> CompactionPreview:
        """What ``compact()`` with the same arguments would clear, summarize, keep and
        back-fill, and the tokens after each tier: the same flow, but no model is called,
        nothing is written and no event is delivered."""
        return preview_compaction(
            self.options,
            self.counter,
            self.archive,
            messages,
            tools=tools,
            force=force,
            reason=reason,
        )

    def _flow(
        self, messages: Messages, tools: Tools, force: bool, reason: str
    ) -> Flow[CompactionStep, CompactionResult]:
        return compaction(
            self.options, self.counter, messages, tools=tools, force=force, reason=reason
        )

    def _summarizer_options(self) -> dict[str, Any]:
        options = self.options
        return {
            "model": options.model,
            "failover": options.failover,
            "retry": options.retry,
            "cooldown": options.cooldown,
            "prompts": self.prompts,
            "counter": self.counter,
            "window": options.summarizer_window,
            "max_output_tokens": options.summarizer_max_output_tokens,
            "output_cap": options.summary_cap,
            "on_event": options.on_event,
        }

    def _offline_options(self) -> dict[str, Any]:
        """The extractive summarizer's options: it stands in when no model may be called."""
        return {
            "model": "extractive",
            "prompts": self.prompts,
            "counter": self.counter,
            "output_cap": self.options.summary_cap,
        }

    def _archive(self) -> Archive:
        if self.archive is None:  # pragma: no cover - the flow asks only when there is one
            raise AssertionError("WriteArchive without an archive")
        return self.archive


class Compactor(_Driver):
    """Synchronous in-place compaction. See the module docstring.

    The trigger fires when ``trigger_tokens`` or ``trigger_messages`` is exceeded, or tokens
    pass ``trigger_fraction`` of ``context_window`` minus ``reserve_output``; 0 or None turns a
    clause off, and with nothing set the default is 160,000 tokens.
    """

    def __init__(
        self,
        *,
        options: CompactionOptions | None = None,
        summarizer: SummarizerLike | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        **keywords: Unpack[CompactionKeywords],
    ) -> None:
        super().__init__(options, keywords)
        check_sync_handlers(self.options.on_event)
        # A sync archive only; the async compactor also awaits an async one (AsyncStoreArchive).
        check_twin(self.archive, role="archive", method="write", async_=False, owner="Compactor")
        check_twin(
            summarizer, role="summarizer", method="summarize", async_=False, owner="Compactor"
        )
        self.summarizer: SummarizerLike = summarizer or Summarizer(
            **self._summarizer_options(), sleep=sleep, rng=rng
        )
        self._offline: Summarizer | None = None

    def __call__(self, messages: Messages, *, tools: Tools = None) -> list[dict[str, Any]]:
        """The before-model hook: the history to send, compacted if the trigger fired."""
        return self.before_model(messages, tools=tools)

    def before_model(self, messages: Messages, *, tools: Tools = None) -> list[dict[str, Any]]:
        """Compact when the trigger fires; otherwise return a new list of the same messages."""
        return self.compact(messages, tools=tools, force=False).messages

    def compact(
        self, messages: Messages, *, tools: Tools = None, force: bool = True, reason: str = "manual"
    ) -> CompactionResult:
        """Compact on demand (``force=True``, the default) or only if the trigger fires."""
        return drive(self._flow(messages, tools, force, reason), self._perform)

    def _perform(self, step: CompactionStep) -> Any:
        match step:
            case Summarize():
                return step.on(self.summarizer)
            case SummarizeOffline(context, previous, prompts):
                offline = self._offline_summarizer().speaking(prompts)
                return offline.summarize(context, previous_summary=previous)
            case WriteArchive(messages, session_id):
                return self._archive().write(messages, session_id=session_id)
            case SearchArchive(query, session_id, limit):
                archive: Any = self._archive()
                return archive.search(query, session_id=session_id, limit=limit)
            case Emit(event):
                emit(self.options.on_event, event)
        return None

    def _offline_summarizer(self) -> Summarizer:
        self._offline = self._offline or Summarizer(**self._offline_options())
        return self._offline


class AsyncCompactor(_Driver):
    """The async twin of :class:`Compactor`: same options; ``await compactor(messages)``.

    Event handlers may be async. A sync archive is written in a worker thread; an async one
    (:class:`~synopsis.compaction.store_archive.AsyncStoreArchive`) is awaited.
    """

    def __init__(
        self,
        *,
        options: CompactionOptions | None = None,
        summarizer: AsyncSummarizerLike | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        **keywords: Unpack[CompactionKeywords],
    ) -> None:
        super().__init__(options, keywords)
        check_twin(
            summarizer, role="summarizer", method="summarize", async_=True, owner="AsyncCompactor"
        )
        self.summarizer: AsyncSummarizerLike = summarizer or AsyncSummarizer(
            **self._summarizer_options(), sleep=sleep, rng=rng
        )
        self._offline: AsyncSummarizer | None = None

    async def __call__(self, messages: Messages, *, tools: Tools = None) -> list[dict[str, Any]]:
        """The before-model hook: the history to send, compacted if the trigger fired."""
        return await self.before_model(messages, tools=tools)

    async def before_model(
        self, messages: Messages, *, tools: Tools = None
    ) -> list[dict[str, Any]]:
        """Compact when the trigger fires; otherwise return a new list of the same messages."""
        return (await self.compact(messages, tools=tools, force=False)).messages

    async def compact(
        self, messages: Messages, *, tools: Tools = None, force: bool = True, reason: str = "manual"
    ) -> CompactionResult:
        """Compact on demand (``force=True``, the default) or only if the trigger fires."""
        return await adrive(self._flow(messages, tools, force, reason), self._perform)

    async def _perform(self, step: CompactionStep) -> Any:
        match step:
            case Summarize():
                return await step.on(self.summarizer)
            case SummarizeOffline(context, previous, prompts):
                return (
                    await self._offline_summarizer()
                    .speaking(prompts)
                    .summarize(context, previous_summary=previous)
                )
            case WriteArchive(messages, session_id):
                archive = self._archive()
                if inspect.iscoroutinefunction(archive.write):
                    return await archive.write(messages, session_id=session_id)
                return await asyncio.to_thread(archive.write, messages, session_id=session_id)
            case SearchArchive(query, session_id, limit):
                searched: Any = self._archive()
                if inspect.iscoroutinefunction(searched.search):
                    return await searched.search(query, session_id=session_id, limit=limit)
                return await asyncio.to_thread(
                    searched.search, query, session_id=session_id, limit=limit
                )
            case Emit(event):
                await aemit(self.options.on_event, event)
        return None

    def _offline_summarizer(self) -> AsyncSummarizer:
        self._offline = self._offline or AsyncSummarizer(**self._offline_options())
        return self._offline
