"""``memory export`` is a backup: import restores every field, and exports again byte for byte.

On SQLite and PostgreSQL, through the command line. Also: expired memories in a backup are
skipped and counted, and a database holding an expiry no datetime can hold (written by an
older version) exports again.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from synopsis.cli.memory import memory
from synopsis.memory._types import MemoryItem, MemoryStore, NewMemory
from synopsis.memory.sqlite import SQLiteStore

T = "acme"


def run(db: str, *args: str, input: str | None = None) -> Result:
    """Invoke ``memory`` with --db and --tenant given through the environment."""
    env = {"SYNOPSIS_DB": db, "SYNOPSIS_TENANT": T}
    return CliRunner().invoke(memory, list(args), input=input, env=env, catch_exceptions=False)


def _fill(store: MemoryStore) -> None:
    """Memories with every field in use: kinds, tags, an expiry, a context, a replace, folders."""
    store.put(T, ("user", "u1"), "pref", "likes green tea", kind="fact", tags={"lang": "en"})
    store.put(T, ("user", "u1", "session", "s1"), "sum", "we talked about 咖啡", kind="summary")
    store.put(T, ("user", "u2"), "soon", "expires in an hour", ttl=3600)
    store.put(T, ("user", "u2"), "turn", "Adoption agencies!", context="what did you research?")
    store.put(T, ("user", "u1"), "pref", "likes green tea, no sugar", kind="fact")
    store.put_many(T, [NewMemory(("team",), f"n{i}", f"note {i}\u2028line") for i in range(3)])


def _assert_backup_round_trips(first: str, second: str, store_items: list[MemoryItem]) -> None:
    """Export ``first``, import into ``second``, export again: the same bytes, every field."""
    exported = run(first, "export")
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    fields = ("key", "created_at", "updated_at", "expires_at")
    assert [tuple(line[name] for name in fields) for line in lines] == [
        _exported_times(item) for item in store_items
    ]
    imported = run(second, "import", "--json", "-", input=exported.stdout)
    assert json.loads(imported.stdout) == {"imported": len(lines)}
    assert run(second, "export").stdout == exported.stdout
    contexts = [line.get("context", "") for line in lines]
    assert contexts == [item.context for item in store_items]
    found = run(second, "search", "--json", "research")
    assert [hit["key"] for hit in json.loads(found.stdout)] == ["turn"]


def _exported_times(item: MemoryItem) -> tuple[str, str, str, str | None]:
    """Key and times of ``item`` as an export writes them (ISO 8601 UTC, microseconds)."""
    expiry = None if item.expires_at is None else _iso(item.expires_at)
    return (item.key, _iso(item.created_at), _iso(item.updated_at), expiry)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_sqlite_export_import_export_is_byte_identical(tmp_path: Path) -> None:
    """Kind, tags, created/updated/expiry times survive a backup and restore on SQLite."""
    first, second = str(tmp_path / "first.db"), str(tmp_path / "second.db")
    with SQLiteStore(first) as store:
        _fill(store)
        items = [hit.item for hit in store.search(T, limit=100)]
    assert any(item.created_at != item.updated_at for item in items)
    assert any(item.expires_at is not None for item in items)
    _assert_backup_round_trips(first, second, items)


@pytest.fixture
def pg_databases(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], Any]]:
    """``--db NAME`` opens PostgreSQL schema NAME (fresh, dropped afterwards); ``*.db`` SQLite."""
    import psycopg
    from psycopg import sql

    from synopsis.memory.postgres import PostgresStore

    names: list[str] = []

    def open_schema(name: str, **_: Any) -> MemoryStore:
        if name.endswith(".db"):
            return SQLiteStore(name)
        return PostgresStore(postgres_url, schema=name)

    def database(label: str) -> str:
        names.append(f"test_{label}_{uuid.uuid4().hex}")
        return names[-1]

    monkeypatch.setattr("synopsis.cli.memory.open_store", open_schema)
    # --db names a schema here, not a SQLite file: the missing-file check does not apply.
    monkeypatch.setattr("synopsis.cli.memory._require_existing", lambda db: None)
    yield database
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.mark.postgres
def test_postgres_export_import_export_is_byte_identical(
    pg_databases: Callable[[str], str], postgres_url: str
) -> None:
    """The same backup and restore, from one PostgreSQL schema into another."""
    from synopsis.memory.postgres import PostgresStore

    first, second = pg_databases("first"), pg_databases("second")
    with PostgresStore(postgres_url, schema=first) as store:
        _fill(store)
        items = [hit.item for hit in store.search(T, limit=100)]
    _assert_backup_round_trips(first, second, items)


@pytest.mark.postgres
def test_a_sqlite_backup_restores_into_postgres_byte_for_byte(
    tmp_path: Path, pg_databases: Callable[[str], str]
) -> None:
    """A SQLite export imported into PostgreSQL exports the same bytes there."""
    first = str(tmp_path / "first.db")
    with SQLiteStore(first) as store:
        _fill(store)
        items = [hit.item for hit in store.search(T, limit=100)]
    _assert_backup_round_trips(first, pg_databases("copy"), items)


def test_expired_memories_in_a_backup_are_skipped_and_counted(tmp_path: Path) -> None:
    """A line whose expires_at has passed is not imported; the summary says how many."""
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    lines = [
        {"namespace": ["user", "u1"], "text": "gone", "expires_at": past},
        {"namespace": ["user", "u1"], "text": "kept", "expires_at": future},
        {"namespace": ["user", "u1"], "text": "forever", "expires_at": None},
    ]
    backup = "".join(json.dumps(line) + "\n" for line in lines)
    db = str(tmp_path / "db.sqlite")
    result = run(db, "import", "-", input=backup)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "imported 2 memories (1 expired, skipped)"
    again = run(db, "import", "--json", "-", input=backup)
    assert json.loads(again.stdout) == {"imported": 2, "skipped_expired": 1}
    texts = sorted(json.loads(line)["text"] for line in run(db, "export").stdout.splitlines())
    assert texts == ["forever", "kept"]


def test_a_database_with_an_unreadable_expiry_searches_and_exports_again(tmp_path: Path) -> None:
    """An expiry in the year 33715 (an old version's ttl=1e12) reads as never expiring."""
    path = tmp_path / "poisoned.db"
    with SQLiteStore(path) as store:
        store.put(T, ("user", "u1"), "ok", "fine coffee")
        store.put(T, ("user", "u1"), "poisoned", "long lived coffee", ttl=60)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE memories SET expires_at = expires_at + 1e12 WHERE key = 'poisoned'")
    with SQLiteStore(path) as store:
        assert sorted(hit.item.key for hit in store.search(T, query="coffee")) == ["ok", "poisoned"]
        item = store.get(T, ("user", "u1"), "poisoned")
        assert item is not None
        assert item.expires_at is None
    exported = run(str(path), "export")
    assert exported.exit_code == 0, exported.output
    assert [json.loads(line)["expires_at"] for line in exported.stdout.splitlines()] == [None] * 2
    copy = str(tmp_path / "copy.db")
    assert run(copy, "import", "-", input=exported.stdout).exit_code == 0
    assert run(copy, "export").stdout == exported.stdout
