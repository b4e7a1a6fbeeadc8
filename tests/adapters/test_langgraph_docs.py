"""docs/langgraph.md shows examples/langgraph_store.py verbatim, and the example runs."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.adapters.test_langchain_docs import python_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "langgraph.md"
EXAMPLE = ROOT / "examples" / "langgraph_store.py"


def test_the_page_shows_the_example_file_and_nothing_else() -> None:
    """Every Python block of the page is an example file, so every example on it runs (the
    search_history one by tests/adapters/test_search_history_docs.py)."""
    search = ROOT / "examples" / "search_history_langgraph.py"
    assert python_blocks(PAGE) == [
        EXAMPLE.read_text(encoding="utf-8"),
        search.read_text(encoding="utf-8"),
    ]


def test_the_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "recalled: ['用户每天早上都喜欢喝一杯手冲咖啡']"
    assert out[1] == "namespaces: [('user', 'user-1', 'notes')]"
    assert out[2] == "another tenant sees: []"
    assert out[3].endswith("messages in the state, the first one a summary:")
    assert out[4].startswith("<synopsis:summary")


def test_the_page_names_create_react_agent_only_as_deprecated() -> None:
    """create_react_agent(..., pre_model_hook=...) raises LangGraphDeprecatedSinceV10 under
    warnings-as-errors: the page may name it only to say so, with its successor."""
    paragraphs = PAGE.read_text(encoding="utf-8").split("\n\n")
    for paragraph in (p for p in paragraphs if "create_react_agent" in p):
        assert "deprecated" in paragraph and "create_agent" in paragraph, paragraph


def test_the_successor_the_page_names_runs_the_compaction() -> None:
    """``langchain.agents.create_agent(..., middleware=[CompactionMiddleware(compactor)])``,
    as the page says, compacts a long conversation before the model call (no warning: the
    suite turns every warning into an error)."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from synopsis import Compactor
    from synopsis.adapters.langchain import CompactionMiddleware

    model = GenericFakeChatModel(messages=iter([AIMessage("done")]))
    compactor = Compactor(model="extractive", trigger_messages=6, keep_tail=2)
    agent = create_agent(model, tools=[], middleware=[CompactionMiddleware(compactor)])
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}
        for i in range(11)
    ]
    state = agent.invoke({"messages": history})
    assert state["messages"][0].text.startswith("<synopsis:summary")
    assert state["messages"][-1].text == "done" and len(state["messages"]) < len(history)
