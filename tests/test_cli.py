"""The synopsis command line: count, compact, and clean errors (exit code 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from synopsis.cli import main

DATA = Path(__file__).parent / "data"
EXAMPLE = Path(__file__).parent.parent / "examples" / "coding-session.json"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_count_reproduces_seed_experiment_a() -> None:
    """With adk, experiment A counts 5200 reported + 9 estimated = 5209."""
    code, out, _ = run("count", str(DATA / "seed-a.json"), "--estimator", "adk", "--json")
    assert code == 0
    assert json.loads(out) == {
        "tokens": 5209,
        "baseline": 5200,
        "increment": 9,
        "messages": 6,
        "estimator": "adk",
    }


def test_compact_seed_d_with_small_user_budget(tmp_path: Path) -> None:
    """--user-budget 10 quotes only the 3rd and 4th questions, in order, in the block: the 5th,
    the newest, stays in the context as itself."""
    out_file = tmp_path / "out.json"
    code, out, _ = run(
        "compact",
        str(DATA / "seed-d.json"),
        "--user-budget",
        "10",
        "--force",
        "--estimator",
        "adk",
        "-o",
        str(out_file),
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    for key in ("triggered", "tokens_before", "tokens_after", "model", "attempts", "messages"):
        assert key in report
    # system, summary, and the newest request with its answer, each as itself (issue 20.5)
    assert report["model"] == "extractive" and report["messages"] == 4
    written = json.loads(out_file.read_text(encoding="utf-8"))
    summary = written[1]["content"]
    assert [m["content"] for m in written[2:]] == ["用户提问第五号", "回答第五号"]
    block = summary.split("<all_user_messages>")[1].split("</all_user_messages>")[0]
    assert "用户提问第三号" in block and "用户提问第四号" in block
    assert block.index("第三号") < block.index("第四号")
    assert "第一号" not in block and "第五号" not in block


def test_compact_example_main_job(tmp_path: Path) -> None:
    """The README's main command compacts the shipped example below its trigger."""
    out_file = tmp_path / "c.json"
    code, out, _ = run(
        "compact", str(EXAMPLE), "--trigger-tokens", "2000", "-o", str(out_file), "--json"
    )
    report = json.loads(out)
    assert code == 0 and report["triggered"] and report["compacted"]
    assert report["tokens_after"] < report["tokens_before"] / 2
    messages = json.loads(out_file.read_text(encoding="utf-8"))
    assert messages[0]["role"] == "system"
    assert "skip completely empty lines" in messages[-1]["content"]


def test_compact_without_trigger_leaves_history(tmp_path: Path) -> None:
    """Below the default trigger and without --force nothing changes."""
    code, out, _ = run("compact", str(DATA / "seed-d.json"), "--json")
    report = json.loads(out)
    assert (
        code == 0
        and not report["triggered"]
        and report["transcript"] == json.loads((DATA / "seed-d.json").read_text(encoding="utf-8"))
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('[{"role": "user"', "malformed JSON"),
        ('[{"role": "alien", "content": "x"}]', "unknown role"),
        ('[{"foo": 1}]', "message 0, field 'role': missing the 'role' key"),
        ('[{"role": "tool", "tool_call_id": "c", "content": "x"}]', "no matching assistant"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: str, needle: str) -> None:
    """Malformed transcripts give one clear line on stderr and exit code 2."""
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    for command in ("count", "compact"):
        code, _, err = run(command, str(path))
        assert code == 2
        assert needle in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def test_missing_file_is_exit_2(tmp_path: Path) -> None:
    """A file that does not exist is reported in one line."""
    code, _, err = run("count", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read" in err


def test_failed_compact_never_destroys_its_input(tmp_path: Path) -> None:
    """--in-place: a message validation rejects leaves the file byte-identical."""
    path = tmp_path / "t.json"
    call = {"id": "c1", "type": "function", "function": {"name": "\ud800", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "please " * 50},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    path.write_text(json.dumps(history), encoding="utf-8")
    before = path.read_bytes()
    code, _, err = run("compact", str(path), "--force", "--in-place")
    assert code == 2 and "tool_calls[0].function.name" in err
    assert path.read_bytes() == before


def test_compact_output_replaces_the_file_whole(tmp_path: Path) -> None:
    """Compacting in place writes the compacted transcript and its archive, nothing else."""
    path = tmp_path / "c.jsonl"
    messages = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    code, _, _ = run("compact", str(path), "--trigger-tokens", "2000", "--in-place", "--json")
    assert code == 0
    assert len(path.read_text(encoding="utf-8").splitlines()) < len(messages)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "c.jsonl.archive.jsonl"]


def test_the_report_table_says_which_tiers_ran_and_what_each_saved(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    code, _, err = run("compact", str(EXAMPLE), "--trigger-tokens", "2000", "-o", str(out))
    assert code == 0, err
    flat = " ".join(err.replace("│", " ").split())  # the table may wrap the row
    assert re.search(r"tool outputs -[\d,]+ tokens \(\d+ messages\); summary -[\d,]+ tokens", flat)
