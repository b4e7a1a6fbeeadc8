"""The curated public namespace and the README example."""

from __future__ import annotations

import synopsis


def test_all_is_sorted_and_complete() -> None:
    """__all__ is sorted (constants, classes, functions, as ruff's RUF022) and complete."""

    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert synopsis.__all__ == sorted(synopsis.__all__, key=kind)
    for name in synopsis.__all__:
        assert hasattr(synopsis, name), name


def test_readme_example_sync() -> None:
    """The README's library example works offline with the extractive model."""
    from synopsis import Compactor

    compactor = Compactor(model="extractive", trigger_tokens=50, keep_tail=2)
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(10):
        messages.append({"role": "user", "content": f"Please fix bug number {i} in app.py"})
        messages.append({"role": "assistant", "content": f"Fixed bug {i} by editing app.py"})
    compacted = compactor(messages)
    assert compacted[0] == messages[0]
    assert compacted[1]["meta"]["content_type"] == "summary"
    assert compacted[-2:] == messages[-2:]
    assert "Please fix bug number 0" in compacted[1]["content"]


async def test_readme_example_async() -> None:
    """The async twin of the README example."""
    from synopsis import AsyncCompactor

    compactor = AsyncCompactor(model="extractive", trigger_messages=5)
    messages = [{"role": "user", "content": f"question {i}"} for i in range(8)]
    compacted = await compactor(messages)
    assert len(compacted) == 1 and "question 7" in compacted[0]["content"]


def test_readme_session_memory_example(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's session-memory example: summary written, injected and recalled."""
    from synopsis import SessionMemory, Summarizer
    from synopsis.memory.sqlite import SQLiteStore

    history = []
    for i in range(20):
        history.append({"role": "user", "content": f"我喜欢喝咖啡，第{i}次提到 coffee"})
        history.append({"role": "assistant", "content": f"好的，记住了 {i}"})
    with SQLiteStore(tmp_path / "synopsis.db") as store:
        memory = SessionMemory(
            store=store, summarizer=Summarizer(model="extractive"), summarize_every=20
        )
        assert memory.after_turn("tenant-1", "user-1", "session-9", history).scheduled
        assert memory.drain(timeout=30)
        context = memory.build_context(
            "tenant-1", "user-1", "session-9", history, system_prompt="You are a helpful assistant."
        )
        assert context[0]["role"] == "system" and "session_summary" in context[0]["content"]
        hits = memory.recall("tenant-1", "user-1", "咖啡")
        assert hits and hits[0].item.kind == "summary"
        assert memory.recall("tenant-2", "user-1", "咖啡") == []
        memory.close()
