"""Facts printed under their session date: one heading per date instead of a tag per line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from synopsis.models._base import ModelSettings
from synopsis.models._facts import carried_date, choose_facts, fact_text, group_by_tag, ungroup
from synopsis.models.extractive import ExtractiveModel
from synopsis.prompts import ENGLISH, build_summarizer_input
from synopsis.tokens import default_estimate

LINES = [
    f"- ({day} May, 2023) {who}: {who} visited Lisbon on day {day} and bought {n} tiles there."
    for day in (1, 2, 3)
    for n, who in enumerate(("Anna", "Kenji", "Maria", "Tomas"), 1)
]


def test_each_date_heads_its_facts_once() -> None:
    printed = group_by_tag(LINES)
    assert printed.count("(2 May, 2023)") == 1
    assert "- Kenji: Kenji visited Lisbon on day 2 and bought 2 tiles there." in printed
    assert not any(line.startswith("- (") for line in printed)
    assert len(printed) == len(LINES) + 3


@given(
    st.lists(
        st.tuples(st.sampled_from(["", "(1 May, 2023)", "(2 May, 2023)", "(#7)"]), st.text("ab ")),
        max_size=12,
    )
)
def test_ungrouping_gives_the_tagged_lines_back(items: list[tuple[str, str]]) -> None:
    lines = [f"- {tag} who: x{text}" if tag else f"- who: x{text}" for tag, text in items]
    # an untagged line after a tagged one reads as under that tag, as a reader would read it
    expected, current = [], ""
    for (tag, text), line in zip(items, lines, strict=True):
        current = tag or current
        expected.append(line if tag or not current else f"- {current} who: x{text}")
    assert ungroup(group_by_tag(lines)) == expected


def test_grouped_facts_fit_more_within_the_same_budget() -> None:
    texts = [fact_text(line) for line in LINES]
    budget = 120
    tagged = choose_facts(LINES, texts, tokens=budget, chars=10_000)
    grouped = choose_facts(LINES, texts, tokens=budget, chars=10_000, grouped=True)
    assert set(tagged) < set(grouped)  # the same ranking, more of it fits
    assert sum(default_estimate(line) + 1 for line in group_by_tag(grouped)) <= budget


def test_an_update_reads_the_date_of_a_heading() -> None:
    previous = "Facts, oldest first:\n(1 May, 2023)\n- Anna: a fact\n(3 May, 2023)\n- Anna: another"
    assert carried_date(previous) == "3 May, 2023"


def test_a_summary_prints_each_session_date_once() -> None:
    history: list[dict[str, object]] = []
    for day in (1, 2):
        history.append({"role": "user", "content": f"[10:00 am on {day} May, 2023] Hello again."})
        for n, who in enumerate(("Anna", "Kenji", "Maria"), 1):
            history.append(
                {"role": "user", "content": f"{who} moved to Porto in {2000 + n + day} for work."}
            )
            history.append({"role": "assistant", "content": f"{who} in Porto since then, noted."})
    messages = build_summarizer_input(history, prompts=ENGLISH)
    text = ExtractiveModel().complete(messages, settings=ModelSettings(max_tokens=800)).text
    facts = text[text.index("Facts, oldest first:") : text.index("6. All user messages:")]
    assert facts.count("(1 May, 2023)") == 1 and facts.count("(2 May, 2023)") == 1
    assert "- user: Kenji moved to Porto in 2004 for work." in facts
