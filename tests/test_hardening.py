"""Hostile input (issue #13): linear text scanning, archives that never follow links or keep
half a batch, and a command line that answers every bad input with one line and exit code 2.

The large-input tests only check results: on quadratic code they would take tens of seconds
to minutes, which no test asserts. The structural tests next to them pin why the code is
linear (where a match may start, how much text a scan reads), and reference tests pin that
the rewrites kept the old results. Timings are in ``bench/bench_regex.py``.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from synopsis import Compactor, summarizer
from synopsis.cli import main
from synopsis.compaction import summary as post
from synopsis.compaction.archive import JsonlArchive
from synopsis.errors import CompactionError, InvalidMessage
from synopsis.models import _facts as facts
from synopsis.models import _transcript as transcripts
from synopsis.models import extractive
from synopsis.models._base import ModelResponse
from synopsis.models._clip import clip_line
from synopsis.prompts import ENGLISH, USER_MESSAGES_TAG
from synopsis.summarizer import extract_summary, validate_summary_response
from synopsis.transcripts import load_transcript

BENCH = Path(__file__).resolve().parents[1] / "bench"

# ---------------------------------------------------------------------------------------------
# Reference implementations: the patterns as they were before the fix (fast on short input)

_OLD_PATH = re.compile(
    r"(?<![\w/.~-])(?:~?/|\.{1,2}/)?(?:[\w.@-]+/)*[\w@-]+(?:\.[\w-]+)*"
    r"\.(?:py|pyi|ipynb|js|jsx|ts|tsx|mjs|cjs|go|rs|java|kt|kts|scala|rb|php|cs|c|h|cc|cpp|hpp"
    r"|m|swift|sh|bash|zsh|ps1|sql|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|lock"
    r"|xml|html|css|scss|vue|svelte|proto|gradle|tf|csv|log|dockerfile)\b"
    r"|(?<![\w/.~-])(?:[\w.@-]+/)*(?:Dockerfile|Makefile|README|LICENSE)\b"
)
_OLD_HEADING = r"^[ \t]*(?:#{{1,6}}[ \t]*)?(?:\*\*)?[ \t]*{n}[.、:：)][^\n]*$"
_FLAGS = re.IGNORECASE | re.DOTALL
_OLD_ANALYSIS = re.compile(r"<analysis>.*?</analysis>", _FLAGS)
_OLD_UNCLOSED = re.compile(r"<analysis>.*?(?=<summary>)", _FLAGS)
_OLD_SUMMARY = re.compile(r"<summary>(.*?)</summary>", _FLAGS)
_OPEN = re.compile(r"<summary>", re.IGNORECASE)
_ANALYSIS_OPEN = re.compile("<analysis>", re.IGNORECASE)
_ANALYSIS_CLOSE = re.compile("</analysis>", re.IGNORECASE)


def old_extract_summary(text: str) -> str:
    text = _OLD_UNCLOSED.sub("", _OLD_ANALYSIS.sub("", text))
    complete = _OLD_SUMMARY.findall(text)
    if complete:
        return str(complete[-1]).strip()
    opening = list(_OPEN.finditer(text))
    return text[opening[-1].end() :].strip() if opening else text.strip()


def old_maximal(counts: Counter[str]) -> dict[str, int]:
    repeated = {term: n for term, n in counts.items() if n >= 2}
    return {
        term: n
        for term, n in repeated.items()
        if not any(term in o and m * 4 >= n * 3 for o, m in repeated.items() if o != term)
    }


_PATH_CHAR = re.compile(r"[\w/.~@-]")
_PATHISH = st.lists(
    st.sampled_from(["a", "b", "/", ".", "~", "-", "_", "@", " ", "é", "py", "md", "Makefile"]),
    max_size=16,
).map("".join)
_TAGS = ["<analysis>", "</analysis>", "<summary>", "</summary>", "<SUMMARY>", "</Analysis>"]
_TAG_SOUP = st.lists(
    st.sampled_from([*_TAGS, "x", " ", "\n", "<", "summary>", "</summ", "ary>"]), max_size=12
).map("".join)


# ---------------------------------------------------------------------------------------------
# Large adversarial input: linear code answers in milliseconds


def _instruction_with(text: str) -> list[dict[str, Any]]:
    instruction = f"<summary> {USER_MESSAGES_TAG} {text}"
    return [{"role": "user", "content": "hi"}, {"role": "user", "content": instruction}]


def _ideographs(size: int) -> str:
    state, chars = 7, []
    for _ in range(size):
        state = (state * 1103515245 + 12345) % 2**31
        chars.append(chr(0x4E00 + state % 50))
    return "".join(chars)


@pytest.mark.parametrize(
    ("run", "check"),
    [
        (lambda: extractive._PATH.findall("@" * 40_000), lambda r: r == []),
        (lambda: extractive._PATH.findall("f@" * 30_000), lambda r: r == []),
        (
            lambda: extractive.extractive_summary([{"role": "user", "content": "@" * 40_000}]),
            lambda r: r.startswith("<summary>"),
        ),
        (
            lambda: extractive.extractive_summary(_instruction_with("<previous_summary>" * 25_000)),
            lambda r: r.startswith("<summary>"),
        ),
        (
            lambda: extractive.extractive_summary(
                [{"role": "user", "content": _ideographs(100_000)}]
            ),
            lambda r: r.startswith("<summary>"),
        ),
        (lambda: post._heading(6, " " * 150_000, ENGLISH), lambda r: r is None),
        (lambda: post._heading(6, "\t " * 75_000 + "x", ENGLISH), lambda r: r is None),
        (lambda: extract_summary("<analysis>" * 25_000), lambda r: r.startswith("<analysis>")),
        (lambda: extract_summary("<summary>" * 25_000), lambda r: r == ""),
        (lambda: extract_summary("<analysis><summary>" * 12_000), lambda r: r == ""),
        (
            lambda: validate_summary_response(
                ModelResponse(message={"content": "<analysis>" * 25_000}, model="m")
            ),
            lambda r: len(r) == 250_000,
        ),
    ],
    ids=[
        "path-@-run",
        "path-word@",
        "extractive-@",
        "extractive-previous-summary",
        "extractive-50-ideographs",
        "heading-blanks",
        "heading-tabs",
        "analysis-unclosed",
        "summary-unclosed",
        "analysis-then-summary",
        "validate-analysis-unclosed",
    ],
)
def test_adversarial_text_is_handled_in_linear_time(
    run: Callable[[], Any], check: Callable[[Any], bool]
) -> None:
    """Input that took the old code tens of seconds or more gives the right answer."""
    assert check(run())


def test_compacting_a_message_of_at_signs_finishes() -> None:
    """`synopsis compact` on one 40 KB user message of ``@`` (33 s for 20 KB before)."""
    history = [
        {"role": "user", "content": "@" * 40_000},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    result = Compactor(model="extractive").compact(history, force=True)
    assert result.compacted and result.error is None


# ---------------------------------------------------------------------------------------------
# Why it is linear, and that the results did not change


@given(_PATHISH)
@example("a.b@c.py")
@example("x.py@y.py")
def test_a_path_match_starts_only_where_a_run_of_path_characters_starts(text: str) -> None:
    """So the path pattern is tried once per run, not once per ``@`` inside it."""
    for match in extractive._PATH.finditer(text):
        start = match.start()
        assert start == 0 or not _PATH_CHAR.match(text[start - 1]), (text, match.group(0))


@given(_PATHISH.map(lambda s: s.replace("@", "")))
@example("src/app/main.py and ../x.md, ~/notes.txt, lib/README, a.b.c.py.bak")
def test_paths_without_at_signs_are_found_as_before(text: str) -> None:
    """The only change to the path pattern concerns where a match may start after an ``@``."""
    assert extractive._PATH.findall(text) == _OLD_PATH.findall(text)


def test_paths_with_at_signs_still_found_from_the_start_of_a_word() -> None:
    found = extractive._PATH.findall("see @scope/pkg/index.js and me@host.md and a.txt@HEAD")
    assert found == ["@scope/pkg/index.js", "me@host.md", "a.txt"]


@given(
    st.text(alphabet=" \t#*6.:)x\n、", max_size=16),
    st.sampled_from([1, 6, 9]),
)
def test_heading_pattern_matches_as_before(text: str, number: int) -> None:
    new = re.compile(post._HEADING.format(n=number), re.MULTILINE)
    old = re.compile(_OLD_HEADING.format(n=number), re.MULTILINE)
    assert [m.span() for m in new.finditer(text)] == [m.span() for m in old.finditer(text)]


def test_heading_blanks_are_possessive() -> None:
    """A blank run is never split between two quantifiers (the source of the quadratic time)."""
    assert re.search(r"\[ \\t\]\*(?!\+)", post._HEADING) is None
    assert post._HEADING.count(r"[ \t]*+") == 3


class ScanCounter:
    """A pattern that counts how many characters its searches read."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.read = 0

    def search(self, text: str, position: int = 0) -> re.Match[str] | None:
        found = self.pattern.search(text, position)
        self.read += (found.end() if found else len(text)) - position
        return found


@given(_TAG_SOUP)
@example("<analysis>" * 50)
@example("<summary>x" * 50)
def test_tag_blocks_are_paired_in_one_pass(text: str) -> None:
    """Opening and closing searches together read every character at most once."""
    opening = ScanCounter(re.compile("<summary>", re.IGNORECASE))
    closing = ScanCounter(re.compile("</summary>", re.IGNORECASE))
    list(summarizer._spans(text, opening, closing))  # type: ignore[arg-type]
    assert opening.read + closing.read <= len(text)


@given(_TAG_SOUP)
def test_summary_extraction_gives_the_same_text_as_before(text: str) -> None:
    assert extract_summary(text) == old_extract_summary(text)
    assert summarizer._cut(text, _ANALYSIS_OPEN, _ANALYSIS_CLOSE) == _OLD_ANALYSIS.sub("", text)


class FindCounter(str):
    """A string that counts how many characters ``find`` reads."""

    read = 0

    def find(self, sub: str, start: Any = 0, end: Any = None) -> int:  # type: ignore[override]
        found = super().find(sub, start)
        FindCounter.read += (found + len(sub) if found >= 0 else len(self)) - (start or 0)
        return found


@given(st.lists(st.sampled_from(["<previous_summary>", "</previous_summary>", "x"]), max_size=9))
@example(["<previous_summary>"] * 40)
def test_previous_summary_block_is_found_in_one_pass(parts: list[str]) -> None:
    """The first complete block, read with at most one pass over the instruction."""
    text = "".join(parts)
    FindCounter.read = 0
    found = transcripts.previous_block(FindCounter(text))
    assert FindCounter.read <= len(text)
    old = re.search(r"<previous_summary>(.*?)</previous_summary>", text, re.DOTALL)
    assert found == (old.group(1) if old else "")


@given(st.lists(st.text(alphabet="的用户消", min_size=2, max_size=4), max_size=30))
def test_repeated_chinese_chunks_are_chosen_as_before(chunks: list[str]) -> None:
    counts = Counter(chunks)
    assert extractive._maximal(counts) == old_maximal(counts)


def old_errors(stream: list[tuple[str, str]]) -> list[str]:
    lines: list[str] = []
    for index, (role, text) in enumerate(stream):
        if role not in {"tool", "user"} or not facts.ERROR.search(text):
            continue
        followed = next((s for r, s in stream[index + 1 :] if r in {"assistant", "call"}), "")
        entry = f"- {extractive._error_line(text)}"
        if followed:
            entry += f"\n  → {clip_line(followed, 200)}"
        lines.append(entry)
    return lines[-12:]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "call", "tool"]),
            st.sampled_from(["ok", "error: boom", "ValueError: x", "fine", "failed"]),
        ),
        max_size=40,
    )
)
def test_error_section_lists_the_same_errors_as_before(stream: list[tuple[str, str]]) -> None:
    """One backward pass finds what a forward search after every error found."""
    transcript = transcripts.Transcript(stream=stream)
    assert extractive._errors(transcript) == old_errors(stream)


# ---------------------------------------------------------------------------------------------
# The archive


_ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("\u2028\u2029\u0085\r\n\x0b\x1c"),
        st.characters(blacklist_categories=("Cs",)),
    ),
    max_size=30,
)


@given(st.lists(_ANY_TEXT, min_size=1, max_size=5))
def test_archive_round_trips_any_text(texts: list[str]) -> None:
    """What the archive appends, load_transcript reads back, batch after batch."""
    messages = [{"role": "user", "content": text, "meta": {"note": text}} for text in texts]
    with tempfile.TemporaryDirectory() as folder:
        archive = JsonlArchive(folder)
        archive.write(messages[:1], session_id="s")
        path = archive.write(messages[1:], session_id="s")
        assert load_transcript(path).messages == messages


def test_archive_refuses_a_symlink(tmp_path: Path) -> None:
    """Messages never land in the file a planted link points at."""
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n", encoding="utf-8")
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "s1.jsonl").symlink_to(target)
    with pytest.raises(CompactionError, match="symbolic link"):
        JsonlArchive(tmp_path / "archive").write(
            [{"role": "user", "content": "x"}], session_id="s1"
        )
    assert target.read_text(encoding="utf-8") == "precious\n"


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", object()], ids=["set", "bytes", "object"])
def test_archive_refuses_non_json_values_without_leaving_a_file(
    tmp_path: Path, value: object
) -> None:
    archive = JsonlArchive(tmp_path)
    with pytest.raises(CompactionError, match="message 1"):
        archive.write(
            [{"role": "user", "content": "a"}, {"role": "user", "x": value}], session_id="s"
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [{1, 2}, b"bytes"], ids=["set", "bytes"])
def test_compact_rejects_non_json_fields_before_archiving(tmp_path: Path, value: object) -> None:
    """A clear InvalidMessage naming the field, and no empty archive left behind."""
    history = [
        {"role": "user", "content": "hello " * 40, "extra": {"tags": value}},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"},
    ]
    with pytest.raises(InvalidMessage) as info:
        Compactor(model="extractive", archive=str(tmp_path / "a")).compact(history)
    assert info.value.field == "extra.tags" and info.value.index == 0
    assert not (tmp_path / "a").exists() or list((tmp_path / "a").iterdir()) == []


def test_archive_keeps_nan_and_writes_it_back(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "x", "meta": {"score": float("nan")}}]
    path = JsonlArchive(tmp_path).write(messages, session_id="s")
    loaded = load_transcript(path).messages
    assert loaded[0]["meta"]["score"] != loaded[0]["meta"]["score"]  # NaN


def test_failed_archive_write_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills up mid-batch leaves the archive exactly as it was."""
    archive = JsonlArchive(tmp_path)
    path = Path(archive.write([{"role": "user", "content": "first"}], session_id="s"))
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(descriptor: int, data: Any) -> int:
        real_write(descriptor, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(CompactionError, match="No space left"):
        archive.write([{"role": "user", "content": "second " * 100}], session_id="s")
    with pytest.raises(CompactionError):
        archive.write([{"role": "user", "content": "third"}], session_id="new")
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


# ---------------------------------------------------------------------------------------------
# One line on stderr, exit code 2


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _messages(meta: str) -> str:
    return '[{"role": "user", "content": "x", "meta": ' + meta + "}]"


def _deep(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


_HUGE = "7" * 5_000
_PUT = ["memory", "put", "--namespace", "user/u1"]

# Each case: (id, files to write {name: text}, arguments with {name} for the files' paths).
CLI_CASES: list[tuple[str, dict[str, str], list[str]]] = [
    ("count-deep-array", {"t.json": "[" * 1_000 + "]" * 1_000}, ["count", "{t.json}"]),
    ("count-deep-message", {"t.json": _messages(_deep(1_000))}, ["count", "{t.json}"]),
    ("compact-deep-message", {"t.json": _messages(_deep(1_000))}, ["compact", "{t.json}"]),
    ("compact-400-levels", {"t.json": _messages(_deep(400))}, ["compact", "{t.json}", "--force"]),
    (
        "import-deep-line",
        {"m.jsonl": '{"namespace": ["u"], "text": ' + "[" * 1_000 + "]" * 1_000 + "}\n"},
        ["memory", "import", "{m.jsonl}"],
    ),
    ("count-huge-int", {"t.json": _messages('{"n": ' + _HUGE + "}")}, ["count", "{t.json}"]),
    ("compact-huge-int", {"t.jsonl": _messages(_HUGE)}, ["compact", "{t.jsonl}"]),
    (
        "import-huge-int",
        {"m.jsonl": '{"namespace": ["u"], "text": "x", "tags": {"n": ' + _HUGE + "}}\n"},
        ["memory", "import", "{m.jsonl}"],
    ),
    ("count-role-list", {"t.json": '[{"role": ["user"], "content": "x"}]'}, ["count", "{t.json}"]),
    (
        "compact-role-object",
        {"t.json": '[{"role": {"r": 1}, "content": "x"}]'},
        ["compact", "{t.json}"],
    ),
    ("put-invalid-utf8", {}, [*_PUT, "bad \udcff text"]),
    ("put-invalid-utf8-kind", {}, [*_PUT, "--kind", "\udcff", "text"]),
    ("put-ttl-1e12", {}, [*_PUT, "--ttl", "1e12", "text"]),
    ("put-ttl-1e300", {}, [*_PUT, "--ttl", "1e300", "text"]),
    ("put-ttl-nan", {}, [*_PUT, "--ttl", "nan", "text"]),
    ("put-ttl-inf", {}, [*_PUT, "--ttl", "inf", "text"]),
    ("count-directory", {}, ["count", "{dir}"]),
    ("compact-directory", {}, ["compact", "{dir}"]),
    ("import-directory", {}, ["memory", "import", "{dir}"]),
    ("compact-output-directory", {"t.json": "[]"}, ["compact", "{t.json}", "-o", "{dir}"]),
    ("count-bad-option", {"t.json": "[]"}, ["count", "--bogus", "{t.json}"]),
    ("top-level-bad-option", {}, ["--bogus"]),
    ("unknown-command", {}, ["frobnicate"]),
    ("memory-bad-option", {}, [*_PUT, "--bogus", "x"]),
    ("count-missing-argument", {}, ["count"]),
    (
        "compact-unwritable-output",
        {"t.json": '[{"role": "user", "content": "x"}]'},
        ["compact", "{t.json}", "-o", "{dir}/missing/out.json"],
    ),
]


def _materialize(tmp_path: Path, files: dict[str, str], args: list[str]) -> list[str]:
    paths = {"dir": str(tmp_path)}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths[name] = str(path)
    for name, path in paths.items():
        args = [arg.replace("{" + name + "}", path) for arg in args]
    return args


def assert_one_line_exit_2(code: int, stdout: str, stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert code == 2, (code, stdout, stderr)
    assert len(lines) == 1, stderr
    assert lines[0].startswith("synopsis: error: ")
    assert "Traceback" not in stdout + stderr


@pytest.mark.parametrize(
    ("files", "args"), [case[1:] for case in CLI_CASES], ids=[case[0] for case in CLI_CASES]
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, files: dict[str, str], args: list[str]
) -> None:
    env = {"SYNOPSIS_DB": str(tmp_path / "m.db"), "SYNOPSIS_TENANT": "acme"}
    result = CliRunner().invoke(main, _materialize(tmp_path, files, args), env=env)
    assert_one_line_exit_2(result.exit_code, result.stdout, result.stderr)


def test_unreadable_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """click's readability check (os.access, faked: the suite may run as root)."""
    path = _write(tmp_path, "t.json", "[]")
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    result = CliRunner().invoke(main, ["count", path])
    assert_one_line_exit_2(result.exit_code, result.stdout, result.stderr)
    assert "not readable" in result.stderr


def test_group_without_command_still_shows_help() -> None:
    result = CliRunner().invoke(main, [])
    assert "Commands:" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["count", "{deep}"],
        ["memory", "put", "--namespace", "u/1", b"bad \xff bytes"],
        ["memory", "put", "--namespace", "u/1", "--ttl", "1e300", "x"],
    ],
    ids=["deep-transcript", "invalid-utf8-argument", "ttl-out-of-range"],
)
def test_real_process_prints_one_line_and_exits_2(tmp_path: Path, args: list[Any]) -> None:
    deep = _write(tmp_path, "deep.json", "[" * 5_000 + "]" * 5_000)
    argv = [arg.replace("{deep}", deep) if isinstance(arg, str) else arg for arg in args]
    env = {**os.environ, "SYNOPSIS_DB": str(tmp_path / "m.db"), "SYNOPSIS_TENANT": "acme"}
    done = subprocess.run(
        [sys.executable, "-c", "from synopsis.cli import main; main()", *argv],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert_one_line_exit_2(done.returncode, stdout, stderr)


# ---------------------------------------------------------------------------------------------
# The benchmark still runs


def test_bench_regex_runs_on_small_sizes() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_regex.py"), "--sizes", "200,400"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| extractive._PATH @-run |" in done.stdout
    assert "| end to end: compact @ |" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(rows) >= 30
