"""`synopsis memory reembed`: memories written without an embedder become findable by vector."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from synopsis.cli import main
from synopsis.cli._reembed import reembed_all
from synopsis.cli._terminal import Terminal
from synopsis.embeddings import StaticEmbedder
from synopsis.memory.sqlite import SQLiteStore
from synopsis.testing import FakeClock
from tests.test_migrations_vectors import ITEMS, build_sqlite_v4

NOTES = [
    "I adopted a puppy from the shelter last week",
    "The quarterly tax filing is due on Friday",
    "She rides her bicycle to the office when it is sunny",
    "We booked flights to Lisbon for the summer holiday",
    "My sister plays the cello in an orchestra",
]


def run(db: Path, *args: str, obj: object = None) -> Result:
    env = {"SYNOPSIS_DB": str(db), "SYNOPSIS_TENANT": "acme", "SYNOPSIS_EMBEDDER": None}
    return CliRunner().invoke(main, ["memory", *args], env=env, obj=obj)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database whose memories were imported without an embedder (keyword search only)."""
    path = tmp_path / "m.db"
    lines = "".join(json.dumps({"namespace": ["user", "u1"], "text": t}) + "\n" for t in NOTES)
    source = tmp_path / "notes.jsonl"
    source.write_text(lines, encoding="utf-8")
    assert run(path, "import", "--json", str(source)).exit_code == 0
    return path


def report(result: Result, model: str = "static") -> dict[str, object]:
    """A reembed run's JSON report, less the embedder's identity (checked to be ``model``'s)."""
    assert result.exit_code == 0, result.output
    found: dict[str, object] = json.loads(result.stdout)
    assert str(found.pop("embedder")).startswith(f"{model}:")
    return found


def vector_search(db: Path, query: str) -> list[str]:
    result = run(db, "search", "--json", "--embedder", "static", "--mode", "vector", query)
    assert result.exit_code == 0, result.output
    return [hit["text"] for hit in json.loads(result.stdout)]


def test_reembed_makes_old_memories_findable_by_vector_search(db: Path) -> None:
    assert vector_search(db, "What pet does the user have?") == []
    result = run(db, "reembed", "--json", "--embedder", "static", "--batch", "2")
    assert result.exit_code == 0, result.output
    assert report(result) == {"embedded": 5, "left": 0}
    assert vector_search(db, "What pet does the user have?")[0] == NOTES[0]
    again = run(db, "reembed", "--embedder", "static")
    assert again.exit_code == 0 and again.stdout == "embedded 0 memories with static\n"


def test_an_interrupted_reembed_resumes_where_it_stopped(db: Path) -> None:
    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with SQLiteStore(str(db), embedder=StaticEmbedder()) as store, pytest.raises(KeyboardInterrupt):
        reembed_all(store, "acme", batch=2, advance=interrupt)
    result = run(db, "reembed", "--json", "--embedder", "static")
    assert report(result) == {"embedded": 3, "left": 0}


def test_reembed_shows_progress_on_a_terminal(db: Path) -> None:
    buffer = io.StringIO()
    screen = Terminal(err=Console(force_terminal=True, file=buffer, width=80))
    result = run(db, "reembed", "--embedder", "static", "--batch", "1", obj=screen)
    assert result.exit_code == 0
    assert "embedding" in buffer.getvalue()
    assert result.stdout == "embedded 5 memories with static\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "reembed needs an embedder"),
        (("--embedder", "static", "--batch", "0"), "--batch"),
        (("--embedder", "bert"), "--embedder"),
    ],
)
def test_bad_options_are_one_line_errors(db: Path, args: tuple[str, ...], fragment: str) -> None:
    result = run(db, "reembed", *args)
    assert result.exit_code == 2
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_missing_database_is_not_created(tmp_path: Path) -> None:
    result = run(tmp_path / "nope.db", "reembed", "--embedder", "static")
    assert result.exit_code == 2 and "no such database" in result.stderr
    assert not (tmp_path / "nope.db").exists()


def test_switching_models_and_reembedding_converts_the_store(db: Path) -> None:
    """Vectors of static count as missing for e5: reembed --embedder e5 replaces every one."""
    assert report(run(db, "reembed", "--json", "--embedder", "static"))["embedded"] == 5
    result = run(db, "reembed", "--json", "--embedder", "e5", "--batch", "3")
    assert result.exit_code == 0, result.output
    assert report(result, "e5") == {"embedded": 5, "left": 0}
    again = run(db, "reembed", "--json", "--embedder", "e5")
    assert report(again, "e5") == {"embedded": 0, "left": 0}
    assert vector_search(db, "What pet does the user have?") == []  # static finds no vector
    back = run(db, "reembed", "--json", "--embedder", "static")
    assert report(back) == {"embedded": 5, "left": 0}
    assert vector_search(db, "What pet does the user have?")[0] == NOTES[0]


def test_reembed_all_gives_every_memory_a_new_vector(db: Path) -> None:
    assert run(db, "reembed", "--embedder", "static").exit_code == 0
    result = run(db, "reembed", "--json", "--embedder", "static", "--all", "--batch", "2")
    assert result.exit_code == 0, result.output
    assert report(result) == {"embedded": 5, "left": 0}
    assert vector_search(db, "What pet does the user have?")[0] == NOTES[0]


def test_an_interrupted_reembed_all_is_resumed_by_a_plain_reembed(db: Path) -> None:
    assert run(db, "reembed", "--embedder", "static").exit_code == 0

    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with SQLiteStore(str(db), embedder=StaticEmbedder()) as store:
        assert store.forget_vectors("acme") == 5  # what --all does first
        with pytest.raises(KeyboardInterrupt):
            reembed_all(store, "acme", batch=2, advance=interrupt)
    result = run(db, "reembed", "--json", "--embedder", "static")
    assert report(result) == {"embedded": 3, "left": 0}


def test_reembed_can_adopt_the_vectors_of_a_database_from_before_models_were_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    build_sqlite_v4(path, FakeClock())
    result = run(path, "reembed", "--json", "--embedder", "static", "--adopt-unknown")
    assert result.exit_code == 0, result.output
    assert report(result) == {"embedded": 0, "left": 0, "adopted": len(ITEMS)}
    refused = run(path, "reembed", "--embedder", "static", "--adopt-unknown", "--all")
    assert refused.exit_code == 2 and "--adopt-unknown" in refused.stderr


def test_a_vector_search_names_the_memories_it_cannot_rank_and_the_fix(db: Path) -> None:
    """Memories without a vector of the chosen model are left out of vector ranking: the
    search says how many and which command gives them one; after it, nothing to say."""
    before = run(db, "search", "--embedder", "static", "--mode", "vector", "pet")
    assert before.exit_code == 0
    assert "5 memories have no static vector" in before.stderr
    assert "synopsis memory reembed --embedder static" in before.stderr
    assert run(db, "reembed", "--embedder", "static").exit_code == 0
    after = run(db, "search", "--json", "--embedder", "static", "--mode", "vector", "pet")
    assert after.exit_code == 0 and "reembed" not in after.stderr
    keyword = run(db, "search", "pet")
    assert "reembed" not in keyword.stderr
