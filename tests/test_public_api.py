"""The curated public namespace and the README example."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import synopsis
import synopsis.memory

ROOT = Path(__file__).resolve().parents[1]


def _public_members(module: object) -> set[str]:
    """Names a user sees on ``module`` (``dir``, so the ones loaded on first use count too):
    not private, not a submodule."""
    return {
        name
        for name in dir(module)
        if not name.startswith("_") and not inspect.ismodule(getattr(module, name))
    }


def test_every_public_member_is_exported_and_nothing_else() -> None:
    """``synopsis.__all__`` equals the package's public members (httpx's exported-members test):
    a public name left out of ``__all__`` fails, and so does an exported name that is not there."""
    assert set(synopsis.__all__) == _public_members(synopsis)


def test_memory_package_exports_its_stores() -> None:
    """Stores and ``open_store`` come from ``synopsis.memory``; PostgreSQL loads on first use."""
    from synopsis.memory import (  # noqa: F401 - the import is the test
        AsyncPostgresStore,
        AsyncSQLiteStore,
        InMemoryStore,
        PostgresStore,
        SQLiteStore,
        open_store,
    )

    members = _public_members(synopsis.memory) | {"AsyncPostgresStore", "PostgresStore"}
    assert set(synopsis.memory.__all__) == members


def test_readme_imports_only_public_paths() -> None:
    """Every ``from synopsis... import`` in the README names a package, never a private module."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    modules = {line.split()[1] for line in readme.splitlines() if line.startswith("from synopsis")}
    assert modules, "the README has no import lines"
    for module in modules:
        assert not any(part.startswith("_") for part in module.split(".")), module
        assert module in {"synopsis", "synopsis.memory", "synopsis.embeddings"}, module


def test_public_signatures_type_check() -> None:
    """``tests/typing/`` pins the public signatures with ``assert_type``; mypy strict accepts it."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "tests/typing"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


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
    from synopsis.messages import content_type

    compactor = Compactor(model="extractive", trigger_tokens=50, keep_tail=2)
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(10):
        messages.append({"role": "user", "content": f"Please fix bug number {i} in app.py"})
        messages.append({"role": "assistant", "content": f"Fixed bug {i} by editing app.py"})
    compacted = compactor(messages)
    assert compacted[0] == messages[0]
    assert content_type(compacted[1]) == "summary"
    assert compacted[-2:] == messages[-2:]
    assert "Please fix bug number 0" in compacted[1]["content"]


async def test_readme_example_async() -> None:
    """The async twin of the README example."""
    from synopsis import AsyncCompactor
    from synopsis.messages import content_type

    compactor = AsyncCompactor(model="extractive", trigger_messages=5)
    messages = [{"role": "user", "content": f"question {i}"} for i in range(8)]
    compacted = await compactor(messages)
    # The summary, then the newest request as its own message (it always stays).
    assert len(compacted) == 2 and content_type(compacted[0]) == "summary"
    assert compacted[1] == messages[-1]


def test_readme_session_memory_example(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's session-memory example: summary written, injected and recalled."""
    from synopsis import SessionMemory, Summarizer
    from synopsis.memory import SQLiteStore

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


def test_the_library_does_not_log_to_stderr_by_default() -> None:
    """A NullHandler on the ``synopsis`` logger keeps Python's last-resort handler quiet."""
    import logging

    handlers = logging.getLogger("synopsis").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def _listed(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value, tuple) else value for key, value in fields.items()
    }


def _event_types() -> list[type]:
    import synopsis.events

    return [
        value
        for value in vars(synopsis.events).values()
        if isinstance(value, type)
        and issubclass(value, synopsis.events.EventBase)
        and value is not synopsis.events.EventBase
    ]


def test_every_event_type_a_user_can_receive_is_exported() -> None:
    """Each of the fourteen event types (in CompactionResult.events, SessionMemory's handlers)
    is importable from ``synopsis`` itself, and each is one of the handlers' event unions."""
    from typing import get_args

    from synopsis.events import AnyEvent

    events = _event_types()
    assert len(events) == 14
    assert set(events) == set(get_args(AnyEvent))
    missing = sorted(event.__name__ for event in events if event.__name__ not in synopsis.__all__)
    assert not missing


def test_every_event_serializes_and_pickles_through_its_base() -> None:
    """``to_dict()`` is the base class's: ``{"event": name, **fields}``, tuples as lists, JSON
    ready; and an event survives pickling (a handler may queue it to another process)."""
    import dataclasses
    import json
    import pickle

    for event_type in _event_types():
        required = [
            field.name
            for field in dataclasses.fields(event_type)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        ]
        event = event_type(**{name: f"{name}-value" for name in required})
        data = event.to_dict()
        assert data["event"] == event_type.name
        assert data == {"event": event_type.name, **_listed(dataclasses.asdict(event))}
        json.dumps(data)
        assert pickle.loads(pickle.dumps(event)) == event


def _public_classes(module: Any) -> list[type]:
    """The classes ``module`` exports, loaded (an optional extra that is missing aside)."""
    classes = []
    for name in module.__all__:
        try:
            value = getattr(module, name)
        except ImportError:
            continue
        if isinstance(value, type):
            classes.append(value)
    return classes


def test_public_classes_show_the_path_a_user_imports() -> None:
    """``synopsis.Compactor``, not ``synopsis.compaction.compactor.Compactor`` (httpx does the
    same); a subpackage's own API shows the subpackage. Reprs and tracebacks read that way."""
    import synopsis.compaction

    assert {cls.__module__ for cls in _public_classes(synopsis)} == {"synopsis"}
    assert synopsis.compaction.CompactionPlan.__module__ == "synopsis.compaction"
    assert repr(synopsis.KeepTail(messages=2)) == "KeepTail(messages=2, tokens=0, fraction=0.0)"
    assert str(synopsis.Compactor) == "<class 'synopsis.Compactor'>"


def test_type_hints_of_public_classes_still_resolve() -> None:
    """Their string annotations were resolved before ``__module__`` moved, so
    ``typing.get_type_hints`` (pydantic, FastAPI, dataclass tools) still reads them."""
    import typing

    import synopsis.compaction
    import synopsis.models
    import synopsis.redact
    import synopsis.session

    spaces = (synopsis, synopsis.compaction, synopsis.session, synopsis.redact, synopsis.models)
    for cls in [cls for space in spaces for cls in _public_classes(space)]:
        typing.get_type_hints(cls)
    hints = typing.get_type_hints(synopsis.CompactionOptions)
    assert hints["trigger"] is synopsis.Trigger


def test_public_values_pickle_by_their_shown_path() -> None:
    """A pickle names ``synopsis.X``, which loads back: options, results and events."""
    import pickle

    assert pickle.loads(pickle.dumps(synopsis.CompactionOptions)) is synopsis.CompactionOptions
    options = synopsis.CompactionOptions(keep_tail=synopsis.KeepTail(messages=3))
    assert pickle.loads(pickle.dumps(options)) == options
    event = synopsis.ValuesRedacted(reason="r", counts={"email": 1}, total=1)
    assert pickle.loads(pickle.dumps(event)) == event
    assert pickle.loads(pickle.dumps(synopsis.SessionOptions())).summarize_every == 20
