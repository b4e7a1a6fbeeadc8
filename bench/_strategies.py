"""The compaction strategies that bench_retention.py and bench_cost.py compare, in one place.

Each strategy is a before-model hook (``history -> history to send``) over one session, with
what its summarizer was asked and what it took out of the context on the way:

- ``none``: no compaction (the ceiling; a real window would overflow);
- ``truncation``: over budget, drop the oldest messages (whole tool groups) down to half the
  budget;
- ``default``: synopsis's ``Compactor`` as shipped, only the trigger set to the budget
  (``Compactor(trigger_tokens=budget)``: every other option at the library's default);
- ``summary``: synopsis summarizing only, with settings sized for the bench's budgets: a
  verbatim tail of a quarter of the budget, a summary bounded to a quarter of it that quotes
  at most a quarter of it of the user's own words (the library's 8,192 and 30,000 tokens are
  sized for 160,000-token triggers);
- ``tiered``: the same, with tier 1 first (old tool output cleared, default ToolClearing);
- ``langchain-mw``: LangChain's own ``SummarizationMiddleware`` (``langchain`` from PyPI), its
  ``before_model`` called with its defaults (``keep=("messages", 20)``,
  ``trim_tokens_to_summarize=4000``, its approximate token counter, its summary prompt) and
  ``trigger=("tokens", budget)``; the summary is written by ``ExtractiveChatModel``, a
  LangChain chat model over synopsis's offline extractive ``Summarizer`` (library defaults);
- ``langchain-emul``: an emulation of those settings built on synopsis's ``Compactor`` (keep
  20 messages, the summarizer reads only the newest 4,000 tokens of what it replaces from a
  user message on, no user-message back-fill, not incremental), with ``summary``'s summarizer;
- ``no-tail``: the original design (Eino): summarize everything, keep no tail;
- ``tiered@T`` (``tiered@T+args``): ``tiered`` with ``ToolClearing(target=T)`` (and
  ``clear_arguments=True``), to compare settings;
- ``default+recall`` (``default+recall@S``): ``default`` with automatic recall on
  (``Recall()``, or ``Recall(share=S)``); its ``ask`` is the library's own call for a question:
  the before-model hook on the history with the question as the newest user message.

Everything a strategy removes from the context is archived (``BenchArchive``), so a benchmark
can ask what an agent's ``search_history`` tool would find there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from _archive_search import BenchArchive

from synopsis.compaction.compactor import Compactor
from synopsis.compaction.options import ToolClearing
from synopsis.compaction.plan import KeepTail
from synopsis.compaction.recall import Recall
from synopsis.messages import safe_cut_points, split_leading_system
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models._resolve import resolve_model
from synopsis.summarizer import Summarizer, SummaryResult
from synopsis.tokens import TokenCounter

STRATEGIES = (
    "none",
    "truncation",
    "default",
    "summary",
    "tiered",
    "langchain-mw",
    "langchain-emul",
    "no-tail",
)
LANGCHAIN_KEEP_MESSAGES = 20
LANGCHAIN_TRIM_TOKENS = 4_000

Messages = list[dict[str, Any]]


@dataclass
class Costs:
    """What the summarizer was asked and answered, over a whole session."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(eq=False)
class CountingModel:
    """A model that counts the tokens of every call and passes it on."""

    inner: Any
    counter: TokenCounter
    costs: Costs = field(default_factory=Costs)

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def context_window(self) -> int | None:
        return getattr(self.inner, "context_window", None)

    @property
    def max_output_tokens(self) -> int | None:
        return getattr(self.inner, "max_output_tokens", None)

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        response: ModelResponse = self.inner.complete(messages, settings=settings)
        self.costs.calls += 1
        self.costs.input_tokens += self.counter.count(list(messages)).total
        self.costs.output_tokens += self.counter.estimate_text(response.text)
        return response


class LangChainTrim:
    """The emulation of LangChain's ``trim_tokens_to_summarize``: the summarizer reads only
    the newest 4,000 tokens of the messages it replaces, starting at a user message."""

    def __init__(self, summarizer: Summarizer, counter: TokenCounter) -> None:
        self.summarizer, self.counter = summarizer, counter

    def summarize(self, messages: Sequence[Mapping[str, Any]], **keywords: Any) -> SummaryResult:
        kept: list[Mapping[str, Any]] = []
        used = 0
        for message in reversed(messages):
            used += self.counter.estimate(message)
            if used > LANGCHAIN_TRIM_TOKENS:
                break
            kept.insert(0, message)
        while kept and kept[0].get("role") != "user":
            kept.pop(0)
        return self.summarizer.summarize(kept or list(messages[-1:]), **keywords)


@dataclass
class Strategy:
    """One strategy over one session: the hook, its summarizer costs, its archive, and in
    words the settings it runs with."""

    name: str
    hook: Callable[[Messages], Messages]
    costs: Costs
    archive: BenchArchive | None  # None: nothing archived, nothing to search (LangChain's)
    settings: str = ""
    #: The context of the model call for a question (the question the newest user message),
    #: for a strategy whose context depends on it (recall); None: the final history as it is.
    ask: Callable[[Messages, str], Messages] | None = None

    def search(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """What the agent's ``search_history`` tool would return for ``query``."""
        return self.archive.found(query, limit=limit) if self.archive else []


def chosen(names: str) -> list[str]:
    """The strategies named (comma-separated), with the references ``none`` and ``summary``."""
    wanted = [name for name in names.split(",") if name]
    return [*(r for r in ("none", "summary") if r not in wanted), *wanted]


def make(
    name: str, budget: int, model: Any = "extractive", clearing: ToolClearing | None = None
) -> Strategy:
    """A fresh strategy ``name`` with a trigger at ``budget`` tokens (``clearing``: tier 1's
    settings for ``tiered``, the library default if None)."""
    if name.startswith("tiered@"):
        target, _, arguments = name.removeprefix("tiered@").partition("+")
        clearing = ToolClearing(target=float(target), clear_arguments=arguments == "args")
        return replace(make("tiered", budget, model, clearing), name=name)
    counter = TokenCounter()
    archive = BenchArchive()
    costs = Costs()
    if name == "none":
        return Strategy(name, list, costs, archive, "no compaction")
    if name == "truncation":
        hook = _truncation(budget, counter, archive)
        return Strategy(name, hook, costs, archive, f"drop oldest to {budget // 2:,} tokens")
    counting = CountingModel(
        resolve_model(model) if isinstance(model, str) else model, counter, costs
    )
    if name == "default":
        compactor = Compactor(
            trigger_tokens=budget, archive=archive, counter=counter, model=counting
        )
        return Strategy(
            name, compactor.before_model, costs, archive, "library defaults, trigger_tokens=budget"
        )
    if name.startswith("default+recall"):
        share = name.partition("@")[2]
        recall = Recall(share=float(share)) if share else Recall()
        compactor = Compactor(
            trigger_tokens=budget, archive=archive, counter=counter, model=counting, recall=recall
        )

        def ask(history: Messages, question: str) -> Messages:
            # What the question's own call archives or bills is undone: the next question
            # starts from the same replay, and the calls column counts the replay only.
            mark, billed = archive.mark(), replace(costs)
            try:
                return compactor.before_model([*history, {"role": "user", "content": question}])
            finally:
                archive.rewind(mark)
                costs.calls, costs.input_tokens = billed.calls, billed.input_tokens
                costs.output_tokens = billed.output_tokens

        return Strategy(
            name, compactor.before_model, costs, archive, f"library defaults, {recall}", ask
        )
    if name == "langchain-mw":
        from _langchain_peer import langchain_middleware_hook

        hook = langchain_middleware_hook(budget, Summarizer(model=counting, counter=counter))
        return Strategy(
            name,
            hook,
            costs,
            None,
            "LangChain defaults: keep 20 messages, trim 4,000 tokens, trigger=budget",
        )
    keywords: dict[str, Any] = {
        "trigger_tokens": budget,
        "archive": archive,
        "counter": counter,
        "keep_tail": KeepTail(tokens=budget // 4),
        "user_budget": budget // 4,
        "clear_tool_outputs": None,  # summarizing only, whatever the library's default
    }
    summarizer: Any = Summarizer(model=counting, counter=counter, max_output_tokens=budget // 4)
    settings = "tail, summary and user quotes each budget/4"
    if name == "tiered":
        keywords["clear_tool_outputs"] = clearing or ToolClearing()
        settings += f", {keywords['clear_tool_outputs']}"
    elif name == "no-tail":
        keywords["keep_tail"] = KeepTail()
        settings = "no tail, summary and user quotes each budget/4"
    elif name == "langchain-emul":
        keywords.update(keep_tail=LANGCHAIN_KEEP_MESSAGES, user_budget=0, incremental=False)
        summarizer = LangChainTrim(summarizer, counter)
        settings = "emulated: keep 20 messages, trim 4,000 tokens, summary budget/4"
    elif name != "summary":
        raise SystemExit(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}, tiered@T")
    compactor = Compactor(summarizer=summarizer, **keywords)
    return Strategy(name, compactor.before_model, costs, archive, settings)


def _truncation(
    budget: int, counter: TokenCounter, archive: BenchArchive
) -> Callable[[Messages], Messages]:
    def hook(history: Messages) -> Messages:
        if counter.count(history).total <= budget:
            return history
        system, rest = split_leading_system(history)
        goal = budget // 2 - sum(counter.estimate(m) for m in system)
        sizes = [counter.estimate(m) for m in rest]
        start = end = len(rest)
        used = 0
        for cut in reversed(safe_cut_points(rest)):
            used += sum(sizes[cut:end])
            end = cut
            if used > goal:
                break
            start = cut
        archive.write(rest[:start], session_id=None)
        return [*system, *rest[start:]]

    return hook
