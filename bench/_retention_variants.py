"""Variants of the library default for tuning it by halves (issue 23, item 7).

A variant is named ``default:key=value/key=value``; what is not named stays the library's default.
The keys, each a share of the trigger's token limit (``budget``) unless said otherwise:

- ``tail``: the verbatim tail, ``KeepTail(fraction=tail)``;
- ``summary``: the summary's answer budget (``summarizer_max_output_tokens``);
- ``quotes``: the user's own words the summary quotes (``user_budget``; the library caps
  quotes at a fifth of the trigger, so a larger share is capped there);
- ``target``: tier 1's ``ToolClearing.target`` (a share, as the option is);
- ``keep``: tier 1's ``ToolClearing.keep_recent`` (a count);
- ``digest``: tier 1's ``ToolClearing.digest_tokens`` (tokens each stub keeps of its facts);
- ``clear``: ``0`` turns tier 1 off (summary only with the library's sizes).

``default:tail=0.3/target=0.5`` is the library default with a 30 % tail and tier 1 enough
only at half the trigger. The variant builds the same ``Compactor`` a user would, with the
same counting summarizer and archive as every other strategy of ``_strategies.py``.
"""

from __future__ import annotations

from typing import Any

from _archive_search import BenchArchive
from _strategies import Costs, CountingModel, Strategy

from synopsis.compaction.compactor import Compactor
from synopsis.compaction.options import ToolClearing
from synopsis.compaction.plan import KeepTail
from synopsis.models._resolve import resolve_model
from synopsis.tokens import TokenCounter

PREFIX = "default:"
KEYS = ("tail", "summary", "quotes", "target", "keep", "digest", "clear")


def parse(name: str) -> dict[str, float]:
    """The settings a variant's name gives (``default:tail=0.3`` -> ``{"tail": 0.3}``)."""
    settings: dict[str, float] = {}
    for item in name.removeprefix(PREFIX).split("/"):
        key, equals, value = item.partition("=")
        if not equals or key not in KEYS:
            raise SystemExit(f"bad variant {name!r}: each item is key=value, keys {KEYS}")
        settings[key] = float(value)
    return settings


def make_variant(name: str, budget: int, model: Any = "extractive") -> Strategy:
    """The library default with the settings ``name`` gives, a trigger at ``budget``."""
    settings = parse(name)
    counter = TokenCounter()
    archive = BenchArchive()
    costs = Costs()
    counting = CountingModel(
        resolve_model(model) if isinstance(model, str) else model, counter, costs
    )
    keywords: dict[str, Any] = {}
    if "tail" in settings:
        keywords["keep_tail"] = KeepTail(fraction=settings["tail"])
    if "summary" in settings:
        keywords["summarizer_max_output_tokens"] = int(budget * settings["summary"])
    if "quotes" in settings:
        keywords["user_budget"] = int(budget * settings["quotes"])
    if settings.get("clear", 1.0) == 0:
        keywords["clear_tool_outputs"] = None
    elif {"target", "keep", "digest"} & settings.keys():
        defaults = ToolClearing()
        keywords["clear_tool_outputs"] = ToolClearing(
            target=settings.get("target", defaults.target),
            keep_recent=int(settings.get("keep", defaults.keep_recent)),
            digest_tokens=int(settings.get("digest", defaults.digest_tokens)),
        )
    compactor = Compactor(
        trigger_tokens=budget, archive=archive, counter=counter, model=counting, **keywords
    )
    return Strategy(name, compactor.before_model, costs, archive, name)
