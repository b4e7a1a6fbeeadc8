"""``synopsis compact --redact``: the output file, the archive and the report hold no planted
value, above and below the trigger, in every mode; ``--dry-run`` says what it would redact."""

from __future__ import annotations

import json
import re
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
    # Near misses are not redacted: they are kept where the text is kept (the output, or the
    # archive when a compaction replaced them by a summary that quotes other facts).
    assert leaks(PLANTED.near_misses[:5], texts)


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


def _hash_tokens(tmp_path: Path, name: str, env: dict[str, str]) -> set[str]:
    """The hash tokens of one below-trigger run (so the output is the redacted input)."""
    from click.testing import CliRunner

    from synopsis.cli import main

    source, output = transcript(tmp_path), tmp_path / name
    flags = ["--redact-mode", "hash", "--trigger-tokens", "1000000", "--json"]
    done = CliRunner().invoke(main, ["compact", str(source), "-o", str(output), *flags], env=env)
    assert done.exit_code == 0, done.output
    return set(re.findall(r"\[[A-Z_]+#[0-9a-f]+\]", output.read_text(encoding="utf-8")))


def test_a_hash_key_in_the_environment_keeps_tokens_stable_across_runs(tmp_path: Path) -> None:
    keyed = {"SYNOPSIS_REDACT_HASH_KEY": "k" * 24}
    first, second = _hash_tokens(tmp_path, "a.json", keyed), _hash_tokens(tmp_path, "b.json", keyed)
    assert first and first == second
    unkeyed = {"SYNOPSIS_REDACT_HASH_KEY": ""}
    assert _hash_tokens(tmp_path, "c.json", unkeyed).isdisjoint(first)
    assert _hash_tokens(tmp_path, "d.json", unkeyed) != _hash_tokens(tmp_path, "e.json", unkeyed)


def test_a_bad_hash_key_is_named_and_never_shown(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from synopsis.cli import main

    source = transcript(tmp_path)
    env = {"SYNOPSIS_REDACT_HASH_KEY": "short-secret"}
    done = CliRunner().invoke(main, ["compact", str(source), "--redact-mode", "hash"], env=env)
    assert done.exit_code == 2
    assert "SYNOPSIS_REDACT_HASH_KEY" in done.output and "short-secret" not in done.output
