"""An honest command line (issue #8): the archive by default, -o over the input refused unless
--in-place, exit codes 0/2/3/4 with and without --json, progress only on a terminal, stdin and
stdout with ``-``, read-only commands that create nothing, output readable at 80 columns."""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from synopsis.cli import Terminal, main
from synopsis.transcripts import load_transcript

EXAMPLE = Path(__file__).parent.parent / "examples" / "coding-session.json"
README = Path(__file__).parent.parent / "README.md"
EXIT_CODES = "0 success, 2 bad input or usage, 3 summarization failed (history kept)"
#: What compacts the shipped example (it is above 2,000 tokens).
TRIGGER = (
    "--trigger-tokens",
    "2000",
    "--no-clear-tool-outputs",
)  # these pin the summary tier alone


def run(*args: str, input: str | None = None, obj: Any = None, **env: str) -> Result:
    environment = {"SYNOPSIS_TENANT": "acme", "COLUMNS": "80", **env}
    return CliRunner().invoke(main, list(args), input=input, obj=obj, env=environment)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the shipped coding session, in a folder of its own."""
    path = tmp_path / "session.json"
    path.write_bytes(EXAMPLE.read_bytes())
    return path


def summary_of(path: Path) -> str:
    return str(load_transcript(path).messages[-1]["content"])


# -- 4. the archive -----------------------------------------------------------------------------


def test_compact_archives_next_to_the_output_and_the_summary_points_there(example: Path) -> None:
    """The replaced messages land in OUT.archive.jsonl, named by the report and the summary."""
    out = example.parent / "out.json"
    result = run("compact", str(example), *TRIGGER, "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    archive = example.parent / "out.json.archive.jsonl"
    report = json.loads(result.stdout)
    assert report["archive"] == str(archive)
    assert str(archive) in summary_of(out)
    # Raw lines: with tool-output clearing a batch may hold tool results without their calls.
    archived = [json.loads(line) for line in archive.read_text(encoding="utf-8").splitlines()]
    original = load_transcript(example).messages
    kept = load_transcript(out).messages
    # Nothing is lost: every original message is still in the output or in the archive.
    bare = [{k: v for k, v in m.items() if k != "usage"} for m in archived + kept]
    assert archived
    assert all({k: v for k, v in m.items() if k != "usage"} in bare for m in original)


def test_compact_to_stdout_archives_next_to_the_input(example: Path) -> None:
    result = run("compact", str(example), *TRIGGER)
    assert result.exit_code == 0
    archive = example.parent / "session.json.archive.jsonl"
    assert archive.exists() and str(archive) in result.stdout


def test_archive_path_can_be_chosen_or_switched_off(example: Path, tmp_path: Path) -> None:
    """--archive PATH is used as given; --no-archive writes none and the summary points at the
    input file, which still holds every message."""
    chosen = tmp_path / "kept.jsonl"
    out = tmp_path / "a.json"
    assert (
        run("compact", str(example), *TRIGGER, "-o", str(out), "--archive", str(chosen)).exit_code
        == 0
    )
    assert chosen.exists() and str(chosen) in summary_of(out)
    bare = tmp_path / "b.json"
    assert run("compact", str(example), *TRIGGER, "-o", str(bare), "--no-archive").exit_code == 0
    assert not (tmp_path / "b.json.archive.jsonl").exists()
    assert str(example) in summary_of(bare)


def test_archive_is_appended_by_renaming_a_complete_new_file(example: Path) -> None:
    """A second compaction appends to the archive through a temporary file and a rename (a new
    inode); nothing else is left in the folder."""
    out = example.parent / "out.json"
    assert run("compact", str(example), *TRIGGER, "-o", str(out)).exit_code == 0
    archive = example.parent / "out.json.archive.jsonl"
    first = archive.read_text(encoding="utf-8")
    assert run("compact", str(example), *TRIGGER, "-o", str(out)).exit_code == 0
    # (No inode check: with two batches per run the file system may hand a freed inode back.)
    assert archive.read_text(encoding="utf-8") == first * 2
    assert sorted(p.name for p in example.parent.iterdir()) == [
        "out.json",
        "out.json.archive.jsonl",
        "session.json",
    ]


def test_output_is_replaced_by_rename(example: Path) -> None:
    """-o writes a temporary file and renames it over the output (a new inode)."""
    out = example.parent / "out.json"
    out.write_text("old", encoding="utf-8")
    inode = out.stat().st_ino
    assert run("compact", str(example), *TRIGGER, "-o", str(out)).exit_code == 0
    assert out.stat().st_ino != inode and summary_of(out)


def test_an_archive_that_is_a_symlink_is_refused_and_history_kept(example: Path) -> None:
    target = example.parent / "elsewhere.txt"
    target.write_text("", encoding="utf-8")
    (example.parent / "session.json.archive.jsonl").symlink_to(target)
    result = run("compact", str(example), *TRIGGER)
    assert result.exit_code == 3
    assert "archiving failed, history kept" in result.stderr and "symbolic link" in result.stderr
    assert target.read_text(encoding="utf-8") == ""
    assert json.loads(result.stdout) == json.loads(example.read_text(encoding="utf-8"))


def test_readme_documents_the_archive_defaults() -> None:
    """The README's first library example says the library archives nothing by default; the
    command line section says where the CLI archives."""
    text = README.read_text(encoding="utf-8")
    library = text.split("```python", 1)[1].split("```", 1)[0]
    assert "archive=" in library and "default" in library
    assert "OUT.archive.jsonl" in text and "--no-archive" in text


# -- 5. -o equal to the input --------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_output_over_the_input_is_refused_without_in_place(example: Path, spelling: str) -> None:
    """However the input is spelled again, -o over it is exit 2 and touches nothing."""
    target = {
        "same": str(example),
        "dotted": str(example.parent / "." / ".." / example.parent.name / example.name),
        "symlink": str(example.parent / "link.json"),
    }[spelling]
    if spelling == "symlink":
        os.symlink(example, target)
    before = example.read_bytes()
    result = run("compact", str(example), *TRIGGER, "-o", target)
    assert result.exit_code == 2 and "--in-place" in result.stderr
    assert example.read_bytes() == before
    assert not list(example.parent.glob("*.archive.jsonl"))


def test_in_place_archives_the_original_first(example: Path) -> None:
    """--in-place overwrites FILE; the replaced messages are in the archive the summary names,
    so archive + kept messages hold everything the file held."""
    original = load_transcript(example).messages
    result = run("compact", str(example), *TRIGGER, "--in-place", "--json")
    assert result.exit_code == 0, result.output
    archive = example.parent / "session.json.archive.jsonl"
    archived, now = load_transcript(archive).messages, load_transcript(example).messages
    assert len(now) < len(original)
    assert str(archive) in summary_of(example) and str(example) + ";" not in summary_of(example)
    kept = [m for m in now if m in original]
    assert sorted(map(json.dumps, archived + kept)) == sorted(map(json.dumps, original))


def test_in_place_cannot_go_without_an_archive(example: Path) -> None:
    before = example.read_bytes()
    result = run("compact", str(example), *TRIGGER, "--in-place", "--no-archive")
    assert result.exit_code == 2 and "--no-archive" in result.stderr
    assert example.read_bytes() == before


# -- 12. exit codes ------------------------------------------------------------------------------


class FailingProvider:
    """An OpenAI-compatible server on 127.0.0.1 that answers every request with HTTP 400."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                body = json.dumps({"error": {"message": "model is on strike", "type": "x"}})
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        host, port = self.httpd.server_address[:2]
        self.model = f"openai-compatible:strike@http://{host!s}:{port}/v1"


@pytest.fixture
def failing_model() -> Iterator[str]:
    provider = FailingProvider()
    thread = threading.Thread(target=provider.httpd.serve_forever, daemon=True)
    thread.start()
    yield provider.model
    provider.httpd.shutdown()
    provider.httpd.server_close()


def test_a_model_failure_is_exit_3_with_and_without_json(example: Path, failing_model: str) -> None:
    """Summarization failed, history kept: 3 both ways; --json says ok false and why."""
    before = example.read_bytes()
    plain = run("compact", str(example), *TRIGGER, "--model", failing_model)
    assert plain.exit_code == 3
    assert (
        plain.stderr.strip()
        .splitlines()[-1]
        .startswith("synopsis: error: summarization failed, history kept: ")
    )
    as_json = run("compact", str(example), *TRIGGER, "--model", failing_model, "--json")
    assert as_json.exit_code == 3
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["compacted"] is False
    assert {"type", "message"} <= set(report["error"]) and "strike" in json.dumps(report["error"])
    assert report["transcript"] == json.loads(before)
    assert example.read_bytes() == before


def test_success_with_json_says_ok(example: Path) -> None:
    result = run("compact", str(example), *TRIGGER, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["compact", "{missing}", "--json"],
        ["count", "{missing}", "--json"],
        ["compact", "--json", "--bogus", "{missing}"],
        ["memory", "put", "--json", "--namespace", "", "x"],
    ],
    ids=["compact-missing-file", "count-missing-file", "bad-option", "bad-namespace"],
)
def test_bad_input_with_json_is_exit_2_and_a_json_object(tmp_path: Path, args: list[str]) -> None:
    argv = [arg.replace("{missing}", str(tmp_path / "nope.json")) for arg in args]
    result = run(*argv, SYNOPSIS_DB=str(tmp_path / "m.db"))
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False and set(data["error"]) == {"type", "message"}
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_store_error_is_exit_4(tmp_path: Path) -> None:
    """A database file that is not one: exit 4, with --json an object naming StoreError."""
    db = tmp_path / "broken.db"
    db.write_bytes(b"this is not a database" * 100)
    plain = run("memory", "search", "--db", str(db), "x")
    assert plain.exit_code == 4 and plain.stderr.startswith("synopsis: error: ")
    as_json = run("memory", "put", "--db", str(db), "--namespace", "u/1", "--json", "x")
    assert as_json.exit_code == 4
    assert json.loads(as_json.stdout)["error"]["type"] == "StoreError"


def every_command(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The command line of ``group`` and of every command and group under it."""
    yield list(path)
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))
        else:
            yield [*path, name]


@pytest.mark.parametrize("command", list(every_command(main)), ids=" ".join)
def test_help_lists_the_exit_codes(command: list[str]) -> None:
    text = " ".join(run(*command, "--help").output.split())
    assert EXIT_CODES in text and "4 store error" in text


def test_readme_lists_the_exit_codes() -> None:
    assert EXIT_CODES in " ".join(README.read_text(encoding="utf-8").split())


# -- 13. progress ------------------------------------------------------------------------------


def terminal_at(buffer: io.StringIO) -> Terminal:
    """Consoles as a person would have them: stderr is a terminal 80 columns wide."""
    return Terminal(err=Console(force_terminal=True, file=buffer, width=80))


def test_compact_shows_each_summarizer_call_on_a_terminal(example: Path) -> None:
    buffer = io.StringIO()
    out = example.parent / "out.json"
    result = run("compact", str(example), *TRIGGER, "-o", str(out), obj=terminal_at(buffer))
    assert result.exit_code == 0 and result.stdout == ""
    shown = buffer.getvalue()
    assert "compacting session.json" in shown and "summarizing 23 messages" in shown
    assert "call 1 done in" in shown and "(extractive)" in shown


def test_progress_shows_failed_calls_as_they_happen(example: Path, failing_model: str) -> None:
    buffer = io.StringIO()
    args = ("compact", str(example), *TRIGGER, "--model", failing_model, "--no-archive")
    wide = Terminal(err=Console(force_terminal=True, file=buffer, width=300))
    result = run(*args, obj=wide)
    assert result.exit_code == 3
    assert re.search(r"call 1 failed: \w+: .*strike.* \(primary model .*strike", buffer.getvalue())


@pytest.mark.parametrize("flag", ["--quiet", "--json"])
def test_quiet_and_json_show_no_progress(example: Path, flag: str) -> None:
    buffer = io.StringIO()
    out = example.parent / "out.json"
    result = run("compact", str(example), *TRIGGER, "-o", str(out), flag, obj=terminal_at(buffer))
    assert result.exit_code == 0
    assert "summariz" not in buffer.getvalue()


def test_nothing_on_stderr_when_it_is_not_a_terminal(example: Path, tmp_path: Path) -> None:
    """--json output is all there is: no progress on stderr or stdout, for compact and import."""
    result = run("compact", str(example), *TRIGGER, "--json")
    assert result.exit_code == 0 and result.stderr == ""
    json.loads(result.stdout)
    lines = "".join(json.dumps({"namespace": ["u"], "text": f"note {i}"}) + "\n" for i in range(3))
    imported = run(
        "memory", "import", "--json", "-", input=lines, SYNOPSIS_DB=str(tmp_path / "m.db")
    )
    assert imported.exit_code == 0 and imported.stderr == ""
    assert json.loads(imported.stdout) == {"imported": 3}


def test_import_advances_per_batch_on_a_terminal(tmp_path: Path) -> None:
    buffer = io.StringIO()
    lines = "".join(json.dumps({"namespace": ["u"], "text": f"note {i}"}) + "\n" for i in range(3))
    db = str(tmp_path / "m.db")
    result = run("memory", "import", "-", input=lines, obj=terminal_at(buffer), SYNOPSIS_DB=db)
    assert result.exit_code == 0 and "importing" in buffer.getvalue()
    assert "3/3" in buffer.getvalue()
    quiet = io.StringIO()
    run("memory", "import", "-q", "-", input=lines, obj=terminal_at(quiet), SYNOPSIS_DB=db)
    assert "importing" not in quiet.getvalue()


# -- 14. stdin and stdout ------------------------------------------------------------------------


def test_compact_reads_stdin_and_writes_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compact - -o -` is a filter: with no file to sit next to, it archives only where
    --archive says, and writes nothing into the working directory."""
    monkeypatch.chdir(tmp_path)
    for args in (["compact", "-"], ["compact", "-", "-o", "-"]):
        result = run(*args, *TRIGGER, "--quiet", input=EXAMPLE.read_text(encoding="utf-8"))
        assert result.exit_code == 0, result.output
        assert "<synopsis:summary " in json.loads(result.stdout)[-1]["content"]
        assert list(tmp_path.iterdir()) == []
    archive = tmp_path / "kept" / "replaced.jsonl"
    archive.parent.mkdir()
    args = ["compact", "-", "--archive", str(archive), *TRIGGER, "--quiet"]
    result = run(*args, input=EXAMPLE.read_text(encoding="utf-8"))
    assert result.exit_code == 0, result.output
    assert archive.exists() and str(archive) in json.loads(result.stdout)[-1]["content"]


def test_count_reads_stdin() -> None:
    result = run("count", "-", "--json", input=EXAMPLE.read_text(encoding="utf-8"))
    assert result.exit_code == 0 and json.loads(result.stdout)["messages"] == 23


# -- 15. read-only commands create nothing -------------------------------------------------------


@pytest.mark.parametrize(
    "args", [["search", "x"], ["export"], ["delete-user", "u1"]], ids=["search", "export", "delete"]
)
def test_read_only_commands_refuse_a_missing_database(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "typo.db"
    result = run("memory", *args, "--db", str(db))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"synopsis: error: no such database: {db}"
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_put_and_import_still_create_the_database(tmp_path: Path) -> None:
    put, imported = tmp_path / "put.db", tmp_path / "import.db"
    assert run("memory", "put", "--db", str(put), "--namespace", "u/1", "x").exit_code == 0
    line = json.dumps({"namespace": ["u"], "text": "x"}) + "\n"
    assert run("memory", "import", "--db", str(imported), "-", input=line).exit_code == 0
    assert put.exists() and imported.exists()


# -- 19. readable at 80 columns -------------------------------------------------------------------


def at_80() -> Terminal:
    return Terminal(out=Console(width=80), err=Console(width=80, stderr=True))


def column(table: str, index: int) -> list[str]:
    """The cells of column ``index`` of a rendered rich table, each row's lines joined."""
    rows: list[str] = []
    current: list[str] = []
    for line in table.splitlines():
        if line.startswith("│"):
            current.append(line.split("│")[index + 1].strip())
        elif current:
            rows.append("".join(current))
            current = []
    return rows


def test_search_shows_whole_keys_and_namespaces_at_80_columns(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    namespace = "user/alice-wonderland/session/2024-05-01-a-rather-long-session-name"
    key = "customer-preferences-for-coffee-and-tea-recorded-in-may"
    put = ("memory", "put", "--db", db, "--namespace", namespace, "--key", key)
    assert run(*put, "The user prefers pour-over coffee, a V60 with a medium roast.").exit_code == 0
    result = run("memory", "search", "--db", db, "coffee", obj=at_80())
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "…" not in result.stdout
    where = column(result.stdout, 1)[-1]
    assert where == namespace + key
    score = column(result.stdout, 0)[-1]
    assert score != "0.000" and re.fullmatch(r"[0-9.e+-]+", score)


def test_scores_have_three_significant_digits() -> None:
    from synopsis.cli.memory import score_text

    assert [score_text(s) for s in (1.234567e-6, 12.3456, 0.5, None)] == [
        "1.23e-06",
        "12.3",
        "0.5",
        "-",
    ]


def test_compact_report_reads_well_at_80_columns(example: Path, failing_model: str) -> None:
    """Long paths wrap instead of being cut; an error is a sentence, not a Python dict."""
    deep = example.parent / ("a-folder-with-a-long-name-" * 3) / "the-compacted-output.json"
    deep.parent.mkdir()
    args = ("compact", str(example), *TRIGGER, "-o", str(deep), "--model", failing_model)
    result = run(*args, obj=at_80())
    assert result.exit_code == 3
    table = result.stderr.strip().splitlines()[:-1]  # the last line is the one-line error
    assert max(len(line) for line in table) <= 80
    assert "{'" not in "".join(table) and "…" not in result.stderr
    values = "".join(column(result.stderr, 1))
    assert str(deep) in values
    assert re.search(r"AllModelsFailed: .*\(\w+:.*is on strike\)", values)


def test_counts_are_in_the_right_number(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    assert "in 1 message " in run("count", str(one)).stdout
    db = str(tmp_path / "m.db")
    line = json.dumps({"namespace": ["user", "u1"], "text": "x"}) + "\n"
    assert (
        run("memory", "import", "--db", db, "-", input=line).stdout.strip() == "imported 1 memory"
    )
    deleted = run("memory", "delete-user", "--db", db, "u1").stdout.strip()
    assert deleted == "deleted 1 record of user u1"
