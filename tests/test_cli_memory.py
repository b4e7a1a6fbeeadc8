"""The `memory` command group, driven through click's CliRunner on a temporary SQLite file."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import example, given, settings
from hypothesis import strategies as st

from synopsis.cli import main
from synopsis.errors import InvalidInput, StoreError
from synopsis.memory import MemoryItem, NewMemory
from synopsis.memory._checks import item_error
from synopsis.memory.inmemory import InMemoryStore
from synopsis.memory.open import open_store, parse_db
from synopsis.memory.sqlite import AsyncSQLiteStore, SQLiteStore


@pytest.fixture
def db(tmp_path: Path) -> str:
    """Path of a fresh SQLite database file."""
    return str(tmp_path / "memories.db")


def run(db: str, *args: str, input: str | None = None, tenant: str = "acme") -> Result:
    """Invoke `synopsis memory` (the group as the CLI serves it, its import/export/reembed
    attached) with --db/--tenant given through the environment."""
    runner = CliRunner()
    env = {"SYNOPSIS_DB": db, "SYNOPSIS_TENANT": tenant}
    return runner.invoke(main, ["memory", *args], input=input, env=env, catch_exceptions=False)


def assert_one_line_error(result: Result, fragment: str) -> None:
    """Exit code 2 and exactly one line on stderr containing `fragment`, no traceback."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output + result.stderr


def test_put_prints_key_and_repeat_put_is_idempotent(db: str) -> None:
    """Without --key the key is a content hash, so the same put twice is one memory."""
    first = run(
        db,
        "put",
        "--namespace",
        "user/u1/session/s1",
        "--kind",
        "summary",
        "--tag",
        "session_id=s1",
        "we talked about coffee",
    )
    second = run(
        db,
        "put",
        "--namespace",
        "user/u1/session/s1",
        "--kind",
        "summary",
        "--tag",
        "session_id=s1",
        "we talked about coffee",
    )
    assert first.exit_code == 0
    assert first.stdout.strip() == second.stdout.strip()
    found = json.loads(run(db, "search", "--json", "coffee").stdout)
    assert len(found) == 1
    assert found[0]["tags"] == {"session_id": "s1"}


def test_put_json_and_stdin_text(db: str) -> None:
    """`-` reads the text from stdin; --json prints a JSON object with the key."""
    result = run(
        db, "put", "--json", "--namespace", "user/u1", "--key", "k1", "-", input="用户喜欢喝咖啡"
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"key": "k1", "namespace": ["user", "u1"], "kind": "note"}
    hits = json.loads(run(db, "search", "--json", "咖啡").stdout)
    assert [h["key"] for h in hits] == ["k1"]


def test_search_json_shape_and_prefix(db: str) -> None:
    """A hit has key, namespace, kind, text, score, tags, created_at; prefix and kind filter."""
    run(db, "put", "--namespace", "user/u1/session/a", "--kind", "summary", "espresso talk")
    run(db, "put", "--namespace", "user/u2/session/b", "espresso elsewhere")
    result = run(
        db, "search", "--json", "--namespace-prefix", "user/u1", "--kind", "summary", "espresso"
    )
    hits = json.loads(result.stdout)
    assert [h["namespace"] for h in hits] == [["user", "u1", "session", "a"]]
    assert set(hits[0]) == {"key", "namespace", "kind", "text", "score", "tags", "created_at"}
    assert isinstance(hits[0]["score"], float)


def test_search_kind_and_exclude_kind_repeat(db: str) -> None:
    """--kind and --exclude-kind take one kind each and may be given several times."""
    for kind in ("fact", "note", "agents_item"):
        run(db, "put", "--namespace", "user/u1", "--kind", kind, f"espresso {kind}")

    def kinds(*options: str) -> list[str]:
        result = run(db, "search", "--json", *options, "espresso")
        return sorted(hit["kind"] for hit in json.loads(result.stdout))

    assert kinds("--kind", "fact", "--kind", "agents_item") == ["agents_item", "fact"]
    assert kinds("--exclude-kind", "agents_item") == ["fact", "note"]
    assert kinds("--kind", "fact", "--kind", "note", "--exclude-kind", "note") == ["fact"]
    assert_one_line_error(run(db, "search", "--exclude-kind", "a\tb", "x"), "control")


def test_search_human_output_is_a_table(db: str) -> None:
    """Without --json the hits are shown in a table."""
    run(db, "put", "--namespace", "user/u1", "espresso")
    result = run(db, "search", "espresso")
    assert result.exit_code == 0
    assert "user/u1" in result.stdout
    assert "espresso" in result.stdout


def test_tenants_are_isolated(db: str) -> None:
    """One tenant's search never sees another tenant's memories."""
    run(db, "put", "--namespace", "user/u1", "secret plan", tenant="a")
    assert json.loads(run(db, "search", "--json", "secret", tenant="b").stdout) == []


def test_export_import_round_trip(db: str, tmp_path: Path) -> None:
    """export | import into a fresh database reproduces the same memories."""
    run(
        db,
        "put",
        "--namespace",
        "user/u1/session/s1",
        "--kind",
        "summary",
        "--tag",
        "v=1",
        "first summary",
    )
    run(db, "put", "--namespace", "user/u1", "--key", "pref", "likes tea")
    exported = run(db, "export").stdout
    assert len(exported.splitlines()) == 2
    copy = str(tmp_path / "copy.db")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(exported, encoding="utf-8")
    imported = run(copy, "import", "--json", str(dump))
    assert json.loads(imported.stdout) == {"imported": 2}
    assert sorted(run(copy, "export").stdout.splitlines()) == sorted(exported.splitlines())


def test_export_prefix_filters(db: str) -> None:
    """--namespace-prefix limits the export."""
    run(db, "put", "--namespace", "user/u1", "one")
    run(db, "put", "--namespace", "user/u2", "two")
    lines = run(db, "export", "--namespace-prefix", "user/u2").stdout.splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["two"]


def test_import_bad_line_reports_line_number_and_imports_nothing(db: str, tmp_path: Path) -> None:
    """A bad third line names line 3, exits 2 and leaves the database empty."""
    file = tmp_path / "in.jsonl"
    file.write_text(
        '{"namespace": ["user", "u1"], "kind": "note", "text": "ok one"}\n\n'
        '{"namespace": ["user", ""], "text": "bad namespace"}\n',
        encoding="utf-8",
    )
    result = run(db, "import", str(file))
    assert_one_line_error(result, "in.jsonl:3:")
    assert run(db, "export").stdout == ""


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"namespace": "user/u1", "text": 5}', "'text'"),
        ('{"namespace": ["user"], "text": "x", "tags": {"a": 1}}', "tag"),
        ('{"namespace": ["user"], "text": "x", "colour": "red"}', "unknown field"),
        ('{"text": "x"}', "'namespace' is required"),
    ],
)
def test_import_rejects_bad_records(db: str, tmp_path: Path, line: str, fragment: str) -> None:
    """Malformed JSON and wrong types are one-line errors with exit code 2."""
    file = tmp_path / "bad.jsonl"
    file.write_text(line + "\n", encoding="utf-8")
    assert_one_line_error(run(db, "import", str(file)), fragment)


def test_import_from_stdin(db: str) -> None:
    """`import -` reads JSON Lines from stdin."""
    line = json.dumps({"namespace": ["user", "u1"], "kind": "fact", "text": "喜欢绿茶"})
    assert run(db, "import", "-", input=line + "\n").exit_code == 0
    assert json.loads(run(db, "search", "--json", "绿茶").stdout)[0]["kind"] == "fact"


class BatchRecorder:
    """An in-memory store that records put_many batch sizes and refuses texts saying "refuse"."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.batches: list[int] = []

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        batch = list(items)
        for index, item in enumerate(batch):
            if "refuse" in item.text:
                raise item_error(index, InvalidInput("text refused by the store"))
        self.batches.append(len(batch))
        return self.inner.put_many(tenant, batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def jsonl(texts: Iterable[str]) -> str:
    return "".join(json.dumps({"namespace": ["user", "u1"], "text": t}) + "\n" for t in texts)


def test_import_writes_batches_of_500(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """1,201 lines are written by three put_many calls; a repeated line is one memory."""
    store = BatchRecorder()
    monkeypatch.setattr("synopsis.cli.memory.open_store", lambda db, **_: store)
    file = tmp_path / "in.jsonl"
    file.write_text(jsonl([f"note {i}" for i in range(1200)] + ["note 7"]), encoding="utf-8")
    result = run("unused.db", "import", "--json", str(file))
    assert json.loads(result.stdout) == {"imported": 1201}
    assert store.batches == [500, 500, 201]
    assert len(store.inner.search("acme", limit=1000, offset=1000)) == 200


def test_import_refused_line_is_named_and_earlier_batches_stay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A line the store refuses at write time is reported by number, exit code 2."""
    store = BatchRecorder()
    monkeypatch.setattr("synopsis.cli.memory.open_store", lambda db, **_: store)
    file = tmp_path / "in.jsonl"
    file.write_text(jsonl([f"note {i}" for i in range(502)] + ["please refuse"]), encoding="utf-8")
    result = run("unused.db", "import", str(file))
    assert_one_line_error(result, "in.jsonl:503: text refused by the store; only the first 500")
    assert store.batches == [500]


def test_import_checks_what_the_store_checks_before_writing(db: str, tmp_path: Path) -> None:
    """A key the store would refuse fails the whole file up front, naming its line."""
    file = tmp_path / "in.jsonl"
    long_key = json.dumps({"namespace": ["user", "u1"], "text": "x", "key": "k" * 2000})
    file.write_text(jsonl(["fine"]) + long_key + "\n", encoding="utf-8")
    assert_one_line_error(run(db, "import", str(file)), "in.jsonl:2: key must be at most")
    assert run(db, "export").stdout == ""


def test_import_bad_tenant_is_one_line_error(db: str, tmp_path: Path) -> None:
    """An unusable tenant is refused before the file is read."""
    file = tmp_path / "in.jsonl"
    file.write_text(jsonl(["fine"]), encoding="utf-8")
    assert_one_line_error(run(db, "import", str(file), tenant="  "), "tenant")


def test_delete_user(db: str) -> None:
    """delete-user removes the user's memories and reports how many."""
    run(db, "put", "--namespace", "user/u1/session/s1", "a")
    run(db, "put", "--namespace", "user/u1/session/s2", "b")
    run(db, "put", "--namespace", "user/u2", "c")
    result = run(db, "delete-user", "--json", "u1")
    assert json.loads(result.stdout) == {"user_id": "u1", "deleted": 2}
    assert [json.loads(x)["text"] for x in run(db, "export").stdout.splitlines()] == ["c"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("put", "--namespace", "user/u1", "--tag", "novalue", "x"), "key=value"),
        (("put", "--namespace", "//", "x"), "--namespace"),
        (("put", "--namespace", "user/u1", "--ttl", "-5", "x"), "--ttl"),
        (("put", "x"), "--namespace"),
        (("search", "--limit", "0", "q"), "--limit"),
        (("import", "/no/such/file.jsonl"), "cannot read"),
    ],
)
def test_bad_arguments_are_one_line_errors(db: str, args: tuple[str, ...], fragment: str) -> None:
    """Bad options, namespaces, tags and files print one line and exit 2."""
    assert_one_line_error(run(db, *args), fragment)


def test_unknown_database_url_is_one_line_error(tmp_path: Path) -> None:
    """A mysql:// URL is refused with one line and exit code 2."""
    result = run("mysql://host/db", "search", "x")
    assert_one_line_error(result, "unsupported database URL scheme 'mysql'")


def test_missing_tenant_is_one_line_error(db: str) -> None:
    """--tenant is required."""
    result = CliRunner().invoke(
        main, ["memory", "search", "--db", db, "x"], env={"SYNOPSIS_TENANT": None}
    )
    assert_one_line_error(result, "--tenant")


def test_open_store_picks_backend(tmp_path: Path) -> None:
    """Paths and sqlite:/// URLs open SQLite; other schemes and missing folders are refused."""
    assert parse_db("postgresql://u@h/db") == ("postgres", "postgresql://u@h/db")
    assert parse_db("sqlite:///:memory:") == ("sqlite", ":memory:")
    assert parse_db(f"sqlite:///{tmp_path}/a.db") == ("sqlite", f"{tmp_path}/a.db")
    store: Any = open_store(str(tmp_path / "x.db"))
    assert isinstance(store, SQLiteStore)
    store.close()
    async_store: Any = open_store(":memory:", async_=True)
    assert isinstance(async_store, AsyncSQLiteStore)
    for bad in ("", "redis://h", "sqlite://", str(tmp_path / "missing" / "x.db")):
        with pytest.raises(InvalidInput):
            parse_db(bad)


def test_vector_search_through_the_cli_with_the_bundled_model(db: str) -> None:
    """--embedder e5 embeds on put and search; an English query finds a Chinese memory."""
    for text in ("我每天早上都要喝一杯咖啡", "股市今天下跌了百分之三"):
        assert run(db, "put", "--embedder", "e5", "--namespace", "user/u1", text).exit_code == 0
    keyword = run(db, "search", "--json", "coffee")
    assert json.loads(keyword.stdout) == []
    result = run(db, "search", "--json", "--embedder", "e5", "--mode", "vector", "coffee")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["text"] == "我每天早上都要喝一杯咖啡"


def test_vector_mode_without_an_embedder_is_one_line(db: str) -> None:
    """--mode vector needs --embedder: one clear line, exit code 2."""
    run(db, "put", "--namespace", "user/u1", "coffee")  # search never creates the database
    assert_one_line_error(run(db, "search", "--mode", "hybrid", "coffee"), "embedder")


def test_line_separators_survive_put_export_import(db: str, tmp_path: Path) -> None:
    """U+2028, U+2029 and U+0085 in a memory are exported escaped and imported back intact."""
    text = "a\u2028b\u2029c\u0085d"
    assert run(db, "put", "--namespace", "user/u1", text).exit_code == 0
    exported = run(db, "export").stdout
    assert not any(char in exported for char in "\u2028\u2029\u0085")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(exported, encoding="utf-8")
    other = str(tmp_path / "other.db")
    assert run(other, "import", str(dump)).exit_code == 0
    assert run(other, "export").stdout == exported
    assert json.loads(exported)["text"] == text


@settings(max_examples=25, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from("\u2028\u2029\u0085\r\n\x0b\x1c"),
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        ),
        min_size=1,
        max_size=40,
    ).filter(str.strip)
)
@example("line\u2028separator")
def test_export_import_round_trips_any_text(text: str) -> None:
    """Whatever text a memory holds, export | import gives the same export back."""
    with tempfile.TemporaryDirectory() as folder:
        first, second = f"{folder}/a.db", f"{folder}/b.db"
        put = run(first, "put", "--namespace", "user/u1", "-", input=text)
        assert put.exit_code == 0, put.output
        exported = run(first, "export").stdout
        imported = run(second, "import", "-", input=exported)
        assert imported.exit_code == 0, imported.output
        assert run(second, "export").stdout == exported


@pytest.mark.parametrize("ttl", ["1e12", "1e300", "nan", "inf", "-1", "0"])
def test_ttl_is_checked_at_the_command_line(db: str, ttl: str) -> None:
    """A TTL must be finite, positive and at most 100 years: one line, exit code 2."""
    result = run(db, "put", "--namespace", "user/u1", "--ttl", ttl, "text")
    assert_one_line_error(result, "--ttl")


def assert_one_line_failure(result: Result, fragment: str) -> None:
    """Exit code 2 (bad input) or 4 (store error) and one line on stderr holding `fragment`."""
    assert result.exit_code in (2, 4), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output + result.stderr


class GivesUp(BatchRecorder):
    """A store that commits two batches, then gives up as a database locked too long does."""

    def put_many(self, tenant: str, items: Iterable[NewMemory]) -> list[MemoryItem]:
        if len(self.batches) == 2:
            raise StoreError("sqlite could not store memories: database is locked")
        return super().put_many(tenant, items)


def test_import_that_gives_up_says_how_much_was_committed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A store error in the third batch names its first line and the 1,000 memories kept."""
    store = GivesUp()
    monkeypatch.setattr("synopsis.cli.memory.open_store", lambda db, **_: store)
    file = tmp_path / "in.jsonl"
    file.write_text("\n" + jsonl([f"note {i}" for i in range(1200)]), encoding="utf-8")
    result = run("unused.db", "import", str(file))
    assert_one_line_failure(
        result,
        "in.jsonl:1002: sqlite could not store memories: database is locked; only the first "
        "1000 memories (through line 1001) were imported",
    )
    assert store.batches == [500, 500]


def test_bad_postgres_url_is_one_line_naming_the_host(tmp_path: Path) -> None:
    """An unreachable or malformed PostgreSQL URL: one line, the host named, no password."""
    for url, fragment in [
        ("postgresql://postgres:hunter2@127.0.0.1:1/none", "127.0.0.1:1/none"),
        ("postgresql://postgres:hunter2@[::1/none", "malformed"),
    ]:
        result = run(url, "search", "coffee")
        assert_one_line_failure(result, fragment)
        assert "hunter2" not in result.stderr


def test_export_writes_every_field_in_iso_utc(db: str) -> None:
    """An exported memory has its kind, tags and created/updated/expiry times."""
    run(db, "put", "--namespace", "user/u1", "--kind", "fact", "--tag", "a=b", "--ttl", "60", "x")
    line = json.loads(run(db, "export").stdout)
    assert set(line) == {
        "namespace", "kind", "text", "key", "tags", "created_at", "updated_at", "expires_at",
    }  # fmt: skip
    assert (line["kind"], line["tags"]) == ("fact", {"a": "b"})
    created = datetime.fromisoformat(line["created_at"])
    assert line["created_at"].endswith("Z")
    assert datetime.fromisoformat(line["expires_at"]) - created == timedelta(seconds=60)


@pytest.mark.parametrize(
    ("times", "fragment"),
    [
        ({"created_at": "2024-01-01T00:00:00"}, "'created_at' must be an ISO 8601 time"),
        ({"updated_at": 1700000000}, "'updated_at' must be an ISO 8601 time"),
        ({"expires_at": "next tuesday"}, "'expires_at' must be an ISO 8601 time"),
        ({"expires_at": "1900-01-01T00:00:00Z"}, "between 1970"),
        (
            {"created_at": "2025-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z"},
            "later than",
        ),
    ],
)
def test_import_checks_the_times_of_every_line_first(
    db: str, times: dict[str, object], fragment: str
) -> None:
    """A bad time fails the whole file up front, naming its line; nothing is imported."""
    lines = [
        {"namespace": ["user", "u1"], "text": "fine"},
        {"namespace": ["u"], "text": "x", **times},
    ]
    result = run(db, "import", "-", input="".join(json.dumps(line) + "\n" for line in lines))
    assert_one_line_error(result, "-:2: ")
    assert fragment in result.stderr
    assert run(db, "export").stdout == ""
