"""``synopsis compact --redact``: the output file, the archive and the report hold no planted
value, above and below the trigger, in every mode; ``--dry-run`` says what it would redact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.redaction_history import leaks, planted_history, strings

PLANTED = planted_history()


def cli(*args: str) -> Any:
    from click.testing import CliRunner

    from synopsis.cli import main

    return CliRunner().invoke(main, list(args))


def transcript(tmp_path: Path) -> Path:
    source = tmp_path / "session.json"
    source.write_text(json.dumps(PLANTED.messages, ensure_ascii=False), encoding="utf-8")
    return source


@pytest.mark.parametrize("mode", ["mask", "hash", "drop"])
@pytest.mark.parametrize("trigger", ["500", "1000000"], ids=["compacts", "below-trigger"])
def test_compact_redact_leaves_no_planted_value_in_any_file(
    tmp_path: Path, mode: str, trigger: str
) -> None:
    source, output = transcript(tmp_path), tmp_path / "out.json"
    flags = ["--redact", "--redact-mode", mode, "--trigger-tokens", trigger, "--keep-tail", "6"]
    done = cli("compact", str(source), "-o", str(output), *flags, "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["compacted"] is (trigger == "500")
    assert report["redacted"]["email"] >= 2
    written = [p for p in tmp_path.iterdir() if p != source]
    assert output in written
    decoded = [
        s
        for path in written
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
        for s in strings(json.loads(line) if path != output else [])
    ]
    texts = [p.read_text(encoding="utf-8") for p in written]
    assert leaks(PLANTED.values, [*texts, *decoded]) == []
    assert leaks(PLANTED.values, strings(json.loads(output.read_text(encoding="utf-8")))) == []
    assert leaks(PLANTED.values, [done.output]) == []
    assert leaks(PLANTED.near_misses[:5], [output.read_text(encoding="utf-8")])


def test_a_redact_pattern_alone_turns_redaction_on(tmp_path: Path) -> None:
    source, output = transcript(tmp_path), tmp_path / "out.json"
    done = cli(
        "compact", str(source), "-o", str(output), "--redact-pattern", r"outage=deploy is broken",
        "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["redacted"]["outage"] == 1 and report["redacted"]["email"] >= 2
    text = output.read_text(encoding="utf-8")
    assert "deploy is broken" not in text and "[REDACTED:outage]" in text
    assert "You are a coding agent." in text  # the leading system message is the caller's


def test_dry_run_says_what_it_would_redact_and_writes_nothing(tmp_path: Path) -> None:
    source = transcript(tmp_path)
    done = cli("compact", str(source), "--redact", "--trigger-tokens", "500", "--dry-run", "--json")
    assert done.exit_code == 0, done.output
    preview = json.loads(done.output)
    assert preview["redacted"]["email"] >= 2 and preview["calls_model"]
    assert sorted(tmp_path.iterdir()) == [source]
    table = cli("compact", str(source), "--redact", "--dry-run")
    assert table.exit_code == 0 and "would redact" in table.output and "email" in table.output


def test_without_redact_the_output_keeps_the_values(tmp_path: Path) -> None:
    source, output = transcript(tmp_path), tmp_path / "out.json"
    done = cli("compact", str(source), "-o", str(output), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["redacted"] == {}
    assert leaks(PLANTED.values, strings(json.loads(output.read_text(encoding="utf-8"))))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--redact-pattern", "no-equals-sign"], "must be NAME=REGEX"),
        (["--redact-pattern", "x=("], "does not compile"),
        (["--redact-pattern", "Bad-Name=x"], "must be lower case"),
        (["--redact-mode", "blur"], "blur"),
    ],
)
def test_bad_redaction_flags_are_one_line_and_exit_2(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    done = cli("compact", str(transcript(tmp_path)), *flags)
    assert done.exit_code == 2
    assert message in done.output and len(done.output.strip().splitlines()) == 1


def test_in_place_redact_rewrites_the_file_even_below_the_trigger(tmp_path: Path) -> None:
    source = transcript(tmp_path)
    done = cli("compact", str(source), "--in-place", "--redact", "--json")
    assert done.exit_code == 0, done.output
    assert not json.loads(done.output)["compacted"]
    assert leaks(PLANTED.values, strings(json.loads(source.read_text(encoding="utf-8")))) == []
