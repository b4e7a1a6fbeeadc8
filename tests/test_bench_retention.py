"""The retention bench's measure (bench/_retention_measure.py) on small generated data.

The strict check is the bench's headline, so its failure cases are pinned here: the ones a
hand check found in the loose measure ("November 2023" matching a session-date header, "two"
matching any "two", "problem" matching a template heading) must not count, and a planted
evidence line must.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from _retention_measure import Context, Evidence, Probe, content_words, judge
from _strategies import make
from bench_retention import Tally, _table, load, measure

DATES = {1: "1:56 pm on 8 May, 2023", 2: "10:37 am on 27 November, 2023"}


def probe(answer: str, *evidence: Evidence, question: str = "When did Ana adopt Rex?") -> Probe:
    return Probe("c#0", question, content_words(answer), evidence, 2)


ADOPTION = Evidence("D2:4", 2, "I adopted a beagle named Rex last week, he is two years old.")


def test_a_planted_evidence_line_with_its_answer_counts_as_kept() -> None:
    lines = ["Session 2 took place on 10:37 am on 27 November, 2023.", "Ana: " + ADOPTION.text]
    verdict = judge(probe("two years", ADOPTION), Context(lines, DATES), DATES)
    assert verdict.strict and verdict.loose and verdict.present == ("D2:4",)


def test_an_answer_bearing_sentence_quoted_in_a_summary_counts() -> None:
    lines = ["## Key facts", "- [27 November 2023] Ana: I adopted a beagle named Rex last week"]
    verdict = judge(
        probe("beagle", ADOPTION, question="What breed is Rex?"), Context(lines, DATES), DATES
    )
    assert verdict.strict


def test_a_session_date_header_alone_does_not_answer_a_temporal_question() -> None:
    lines = ["Session 2 took place on 10:37 am on 27 November, 2023.", "Ana: I bought a kayak."]
    verdict = judge(probe("November 2023", ADOPTION), Context(lines, DATES), DATES)
    assert verdict.loose and not verdict.strict
    assert verdict.reason == "no evidence utterance in the context"


def test_the_evidence_takes_the_date_of_its_own_session_only() -> None:
    evidence = Evidence("D2:4", 2, "I adopted a beagle named Rex yesterday.")
    under_its_date = ["27 November, 2023", "Ana: " + evidence.text]
    assert judge(probe("November 2023", evidence), Context(under_its_date, DATES), DATES).strict
    # The same line under another session's date, the answer's words elsewhere: not kept.
    elsewhere = ["8 May, 2023", "Ana: " + evidence.text, "We met in November 2023 at a fair."]
    verdict = judge(probe("November 2023", evidence), Context(elsewhere, DATES), DATES)
    assert verdict.loose and not verdict.strict
    assert verdict.missing_words == ("2023", "november")


def test_a_common_word_anywhere_is_not_the_answer() -> None:
    lines = ["Ben: I have two kayaks.", "5. Problem solving: none"]
    two = judge(probe("two", ADOPTION), Context(lines, DATES), DATES)
    problem = judge(
        probe("problem", ADOPTION, question="What problem?"), Context(lines, DATES), DATES
    )
    assert two.loose and problem.loose
    assert not two.strict and not problem.strict


def test_an_inferred_answer_needs_every_evidence_utterance_not_its_words() -> None:
    first = Evidence("D1:3", 1, "I love hiking in the mountains every weekend.")
    second = Evidence("D2:5", 2, "Camping under the stars is my favourite thing.")
    question = "Would Ana likely enjoy a trip to a national park?"
    likely = probe("Likely yes", first, second, question=question)
    both = ["Ana: " + first.text, "Ana: " + second.text]
    verdict = judge(likely, Context(both, DATES), DATES)
    assert verdict.strict and not verdict.loose  # "likely yes" is read from the evidence
    one = ["Ana: " + first.text, "yes, likely"]
    assert not judge(likely, Context(one, DATES), DATES).strict


def _conversation(sessions: int = 6) -> list[dict[str, object]]:
    """A LoCoMo-shaped conversation: one planted fact per session, a question about each."""
    talk: dict[str, object] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    qa = []
    for n in range(1, sessions + 1):
        talk[f"session_{n}_date_time"] = f"10:00 am on {n} May, 2023"
        filler = [
            {"speaker": "Ana" if i % 2 else "Ben", "dia_id": f"D{n}:{i + 2}",
             "text": f"We talked about the weather and the garden, round {i}, nothing new."}
            for i in range(12)
        ]  # fmt: skip
        fact = {"speaker": "Ben", "dia_id": f"D{n}:1", "text": f"My locker code is {n}4{n}7."}
        talk[f"session_{n}"] = [*filler, fact]
        qa.append({"question": f"What was Ben's locker code in session {n}?",
                   "answer": f"{n}4{n}7", "evidence": [f"D{n}:1"], "category": 1})  # fmt: skip
    return [{"sample_id": "gen-1", "conversation": talk, "qa": qa}]


@pytest.mark.parametrize("layout", ["chat", "tool"])
def test_strict_never_exceeds_loose_over_a_compacted_session(tmp_path: Path, layout: str) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_conversation()), encoding="utf-8")
    (conversation,) = load(data)
    ceiling, _, _ = measure(conversation, layout, make("none", 600))
    assert ceiling.strict == ceiling.loose == ceiling.questions == 6
    for name in ("default", "summary", "truncation"):
        tally, _, outcomes = measure(conversation, layout, make(name, 600))
        assert tally.final_tokens[0] < ceiling.final_tokens[0]  # it did compact
        for outcome in outcomes:  # every answer here is said in its evidence
            assert outcome.in_context.strict <= outcome.in_context.loose
            assert outcome.with_search.strict <= outcome.with_search.loose
            assert outcome.in_context.strict <= outcome.with_search.strict
    # Truncation keeps the newest messages verbatim, so the last session's fact is kept.
    assert outcomes[-1].in_context.strict and not outcomes[0].in_context.strict
    if layout == "tool":  # each dropped session log is one archived message search finds
        assert all(outcome.with_search.strict for outcome in outcomes)


def test_a_context_over_its_budget_is_marked(capsys: pytest.CaptureFixture[str]) -> None:
    tallies = {
        ("tool", 4000, "none", "A"): Tally(questions=10, strict=8, loose=9, final_tokens=[9000]),
        ("tool", 4000, "fits", "A"): Tally(questions=10, strict=2, loose=4, final_tokens=[3900]),
        ("tool", 4000, "spills", "A"): Tally(questions=10, strict=3, loose=5, final_tokens=[4100]),
    }
    _table(tallies, "tool", 4000, ["none", "fits", "spills"], "A")
    rows = {line.split(" | ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows["| spills"].endswith("4,100 / 4,100 **over** |")
    assert rows["| fits"].endswith("3,900 / 3,900 |")
    assert rows["| none"].endswith("9,000 / 9,000 |")  # the ceiling is never within budget


def test_a_short_utterance_counts_only_under_its_own_session_date() -> None:
    short = Evidence("D2:9", 2, "Alright, see you tomorrow!")
    ask = probe("28 November 2023", short, question="When did Ana plan to visit?")
    own = ["27 November, 2023", "Ana: Alright, see you tomorrow!", "28"]
    assert judge(ask, Context(own, DATES), DATES).strict
    other = ["8 May, 2023", "Ana: Alright, see you tomorrow!", "28 November 2023"]
    assert judge(ask, Context(other, DATES), DATES).present == ()


def test_the_langchain_summary_prompt_is_read_back_into_messages() -> None:
    from _langchain_peer import history_from_prompt
    from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, get_buffer_string

    history = [
        HumanMessage("Read <the> log & tell me"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "read_log", "args": {"session": 1}}]),
        ToolMessage("line one\nline two", tool_call_id="c1"),
        AIMessage("I have read it."),
    ]
    prompt = DEFAULT_SUMMARY_PROMPT.format(messages=get_buffer_string(history, format="xml"))
    back = history_from_prompt(prompt)
    assert [m["role"] for m in back] == ["user", "assistant", "tool", "assistant"]
    assert back[0]["content"] == "Read <the> log & tell me"
    assert back[1]["tool_calls"][0]["function"] == {
        "name": "read_log",
        "arguments": '{"session": 1}',
    }
    assert back[2] == {"role": "tool", "tool_call_id": "c1", "content": "line one\nline two"}
    with pytest.raises(ValueError, match="no <messages> block"):
        history_from_prompt("Summarize this, please.")


def test_langchains_own_middleware_runs_as_a_strategy(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(_conversation()), encoding="utf-8")
    (conversation,) = load(data)
    strategy = make("langchain-mw", 600)
    tally, history, _ = measure(conversation, "tool", strategy)
    assert strategy.costs.calls > 0 and tally.summarizer_calls == strategy.costs.calls
    assert history[0]["role"] == "system"  # the agent's system prompt stays outside the state
    assert str(history[1]["content"]).startswith("Here is a summary of the conversation to date:")
    assert len(history) <= 2 + 20  # LangChain's default keeps 20 messages after the summary
    assert strategy.archive is None and strategy.search("locker code") == []


def test_an_utterance_said_over_two_lines_counts_by_its_first() -> None:
    said = Evidence(
        "D1:2", 1, "I finished my degree last week, finally!\n[shares a photo of a cap]"
    )
    lines = [
        "8 May, 2023",
        "John: I finished my degree last week, finally!",
        "[shares a photo of a cap]",
    ]
    ask = probe("The week before 8 May 2023", said, question="When did John get his degree?")
    assert judge(ask, Context(lines, DATES), DATES).strict
