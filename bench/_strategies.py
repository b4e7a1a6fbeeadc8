"""The compaction strategies that bench_retention.py and bench_cost.py compare, in one place.

Each strategy is a before-model hook (``history -> history to send``) over one session, with
what it costs and what it took out of the context on the way:

- ``none``: no compaction (the ceiling; a real window would overflow);
- ``truncation``: over budget, drop the oldest messages (whole tool groups) down to half the
  budget;
- ``summary``: synopsis summarizing only, keeping a verbatim tail of a quarter of the budget;
  the summary is bounded to a quarter of the budget and quotes at most a quarter of it of the
  user's own words (the library's 8,192 and 30,000 tokens are sized for 160,000-token
  triggers; at 4,000 a summary that size would not fit);
- ``tiered``: the same, with tier 1 first (old tool output cleared, default ToolClearing);
- ``langchain``: LangChain v1 ``SummarizationMiddleware`` settings as documented
  (``trigger=("tokens", budget)``, ``keep=("messages", 20)``, ``trim_tokens_to_summarize=4000``:
  the summarizer reads only the newest 4,000 tokens of what it replaces, starting at a user
  message; the previous summary is just another message; no user-message back-fill), with the
  same summarizer;
- ``no-tail``: the original design (Eino): summarize everything, keep no tail;
- ``tiered@T`` (``tiered@T+args``): ``tiered`` with ``ToolClearing(target=T)`` (and
  ``clear_arguments=True``), to compare settings.

Everything a strategy removes from the context is written to ``memories`` (one memory per
line of text), so a benchmark can ask what is still recallable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from synopsis.compaction.compactor import Compactor
from synopsis.compaction.options import ToolClearing
from synopsis.compaction.plan import KeepTail
from synopsis.memory import InMemoryStore, NewMemory
from synopsis.messages import is_internal, safe_cut_points, split_leading_system, text_of
from synopsis.models._base import ModelResponse, ModelSettings
from synopsis.models._resolve import resolve_model
from synopsis.summarizer import Summarizer, SummaryResult
from synopsis.tokens import TokenCounter

STRATEGIES = ("none", "truncation", "summary", "tiered", "langchain", "no-tail")
TENANT = "bench"
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

    def complete(
        self, messages: Sequence[Mapping[str, Any]], *, settings: ModelSettings | None = None
    ) -> ModelResponse:
        response: ModelResponse = self.inner.complete(messages, settings=settings)
        self.costs.calls += 1
        self.costs.input_tokens += self.counter.count(list(messages)).total
        self.costs.output_tokens += self.counter.estimate_text(response.text)
        return response


class MemoryArchive:
    """An archive that writes what leaves the context as memories, one per line of text."""

    def __init__(self, store: InMemoryStore, namespace: tuple[str, ...]) -> None:
        self.store, self.namespace, self.count = store, namespace, 0

    def write(self, messages: Sequence[Mapping[str, Any]], *, session_id: str | None) -> str:
        lines = [
            line.strip()
            for message in messages
            if not is_internal(message)
            for line in text_of(message).splitlines()
            if line.strip()
        ]
        items = [
            NewMemory(self.namespace, f"m{self.count + i}", line) for i, line in enumerate(lines)
        ]
        self.count += len(items)
        if items:
            self.store.put_many(TENANT, items)
        return f"memory://{'/'.join(self.namespace)}"


class LangChainTrim:
    """LangChain's ``trim_tokens_to_summarize``: the summarizer reads only the newest 4,000
    tokens of the messages it replaces, starting at a user message."""

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
    """One strategy over one session: the hook, its summarizer costs, its memories."""

    name: str
    hook: Callable[[Messages], Messages]
    costs: Costs
    memories: InMemoryStore
    namespace: tuple[str, ...]

    def recall(self, query: str, limit: int = 10) -> list[str]:
        hits = self.memories.search(TENANT, self.namespace, query=query, limit=limit)
        return [hit.item.text for hit in hits]


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
    memories, namespace = InMemoryStore(), ("session",)
    archive = MemoryArchive(memories, namespace)
    costs = Costs()
    if name == "none":
        return Strategy(name, list, costs, memories, namespace)
    if name == "truncation":
        return Strategy(name, _truncation(budget, counter, archive), costs, memories, namespace)
    counting = CountingModel(
        resolve_model(model) if isinstance(model, str) else model, counter, costs
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
    if name == "tiered":
        keywords["clear_tool_outputs"] = clearing or ToolClearing()
    elif name == "no-tail":
        keywords["keep_tail"] = KeepTail()
    elif name == "langchain":
        keywords.update(keep_tail=LANGCHAIN_KEEP_MESSAGES, user_budget=0, incremental=False)
        summarizer = LangChainTrim(summarizer, counter)
    compactor = Compactor(summarizer=summarizer, **keywords)
    return Strategy(name, compactor.before_model, costs, memories, namespace)


def _truncation(
    budget: int, counter: TokenCounter, archive: MemoryArchive
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
