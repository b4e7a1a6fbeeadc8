"""Redaction: every planted secret and personal datum goes, every near-miss stays.

The corpus (``tests/redaction_corpus.py``) is generated, labelled and deterministic; the
figures it yields are printed by ``bench/bench_redaction.py``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synopsis.errors import ConfigError
from synopsis.redact import PII_KINDS, SECRET_KINDS, Finding, Redactor, count_kinds
from synopsis.redact._detectors import builtin_detectors
from tests.redaction_corpus import KINDS, Report, Sample, build_corpus, score
from tests.strategies import histories

CORPUS = build_corpus()
# Planted values for the examples below, generated so that no real-looking secret sits in
# this file.
VALUES = {p.kind: p.value for sample in CORPUS for p in sample.planted}


@pytest.fixture(scope="module")
def report() -> Report:
    return score(CORPUS, Redactor())


# ---------------------------------------------------------------------------------------------
# The labelled corpus


def test_the_corpus_is_large_bilingual_and_covers_every_kind() -> None:
    assert len(CORPUS) >= 500
    assert {"chat_en", "chat_zh", "env", "trace", "config", "curl", "log"} <= {
        s.genre for s in CORPUS
    }
    planted = [p.kind for sample in CORPUS for p in sample.planted]
    assert all(planted.count(kind) >= 10 for kind in KINDS)
    assert set(KINDS) == SECRET_KINDS | PII_KINDS
    assert sum(len(sample.near_misses) for sample in CORPUS) >= 500


def test_the_corpus_is_deterministic() -> None:
    assert build_corpus(7, size=60) == build_corpus(7, size=60)
    assert build_corpus(7, size=60) != build_corpus(8, size=60)


@pytest.mark.parametrize("kind", KINDS)
def test_recall_is_one_for_every_kind(report: Report, kind: str) -> None:
    assert report.by_kind[kind].recall == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_precision_is_one_for_every_kind(report: Report, kind: str) -> None:
    assert report.by_kind[kind].precision == 1.0


def test_every_near_miss_survives(report: Report) -> None:
    assert report.near_misses_hit == ()
    for sample in CORPUS[:120]:
        text = Redactor().redact_text(sample.text).text
        assert all(near in text for near in sample.near_misses)


@pytest.mark.parametrize("mode", ["mask", "hash", "drop"])
def test_planted_values_appear_nowhere_in_the_output(mode: Any) -> None:
    redactor = Redactor(mode=mode)
    for sample in CORPUS:
        text = redactor.redact_text(sample.text).text
        assert [p.value for p in sample.planted if p.value in text] == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_seeds_score_the_same(seed: int) -> None:
    result = score(build_corpus(seed, size=200), Redactor())
    assert (result.overall.precision, result.overall.recall) == (1.0, 1.0)
    assert result.near_misses_hit == () and result.leaked == ()


# ---------------------------------------------------------------------------------------------
# Modes and findings


def test_mask_names_the_kind() -> None:
    key = VALUES["aws_access_key"]
    assert Redactor().redact_text(f"id {key}.").text == "id [REDACTED:aws_access_key]."


def test_drop_removes_the_value() -> None:
    assert Redactor(mode="drop").redact_text(f"mail {VALUES['email']} now").text == "mail  now"


def test_hash_gives_one_token_per_value_within_a_redactor() -> None:
    redactor = Redactor(mode="hash")
    a, b = "wei.zhang@qq.com", "li.na@163.com"
    text = redactor.redact_text(f"{a} wrote to {b}, then {a} again").text
    tokens = text.replace(",", "").split()
    assert tokens[0] == tokens[5] != tokens[3]
    assert tokens[0].startswith("[EMAIL#") and len(tokens[0]) == len("[EMAIL#12345678]")


def test_hash_tokens_ignore_spelling_and_depend_on_the_key() -> None:
    one, two = Redactor(mode="hash", hash_key=b"k1"), Redactor(mode="hash", hash_key=b"k1")
    spaced, dashed = "4111 1111 1111 1111", "4111-1111-1111-1111"
    assert one.redact_text(spaced).text == two.redact_text(dashed).text
    assert one.redact_text(spaced).text != Redactor(mode="hash").redact_text(spaced).text


def test_a_finding_names_kind_and_place_never_the_value() -> None:
    secret = VALUES["github_token"]
    text = f"token {secret} leaked"
    (finding,) = Redactor().find(text)
    assert (finding.kind, finding.start, finding.end) == ("github_token", 6, 6 + len(secret))
    assert secret not in repr(finding)
    assert finding.replacement == "[REDACTED:github_token]"


@pytest.mark.parametrize("mode", ["mask", "hash", "drop"])
def test_the_same_redactor_is_idempotent(mode: Any) -> None:
    redactor = Redactor(mode=mode)
    for sample in CORPUS:
        once = redactor.redact_text(sample.text)
        assert redactor.redact_text(once.text).findings == ()


# ---------------------------------------------------------------------------------------------
# Messages


def _history() -> list[dict[str, Any]]:
    args = json.dumps({"query": "owner", "email": VALUES["email"], "n": 3})
    return [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": f"my key is {VALUES['openai_key']}", "name": "ana"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        },
        {"role": "tool", "tool_call_id": "call_1", "content": f"PGPASSWORD={VALUES['password']}"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": f"card {VALUES['payment_card']}"},
                {"type": "image_url", "image_url": {"url": "https://img/1.png"}},
            ],
            "meta": {"internal": False},
        },
        {"role": "assistant", "content": "ok", "reasoning_content": f"ip {VALUES['ip_address']}"},
    ]


def test_messages_lose_every_planted_value_and_keep_their_shape() -> None:
    history = _history()
    before = copy.deepcopy(history)
    redacted, findings = Redactor().redact_messages(history)
    assert history == before
    dumped = json.dumps(redacted)
    for kind in ("email", "openai_key", "password", "payment_card", "ip_address"):
        assert VALUES[kind] not in dumped
    assert [m["role"] for m in redacted] == [m["role"] for m in history]
    assert redacted[1]["name"] == "ana" and redacted[2]["usage"] == history[2]["usage"]
    assert redacted[4]["content"][1] == history[4]["content"][1]
    assert json.loads(redacted[2]["tool_calls"][0]["function"]["arguments"])["n"] == 3
    assert {f.path for f in findings} == {
        (1, "content"),
        (2, "tool_calls", 0, "function", "arguments"),
        (3, "content"),
        (4, "content", 0, "text"),
        (5, "reasoning_content"),
    }


def test_messages_are_new_dicts_and_untouched_parts_are_shared() -> None:
    history = _history()
    redacted, _ = Redactor().redact_messages(history)
    assert all(new is not old for new, old in zip(redacted, history, strict=True))
    assert redacted[4]["content"][1] is history[4]["content"][1]
    assert redacted[0] == history[0]


def test_tool_arguments_stay_valid_json_when_a_custom_pattern_spans_its_syntax() -> None:
    redactor = Redactor(patterns={"pair": r'"owner": "[a-z]+"'})
    arguments = json.dumps({"owner": "ana", "note": VALUES["email"]})
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    (redacted,), findings = redactor.redact_messages([message])
    arguments = json.loads(redacted["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"owner": "ana", "note": "[REDACTED:email]"}
    assert findings[0].path[-1] == "note"


@settings(max_examples=60, deadline=None)
@given(histories(), st.sampled_from(CORPUS), st.data())
def test_any_history_keeps_its_structure_and_loses_what_was_planted(
    history: list[dict[str, Any]], sample: Sample, data: st.DataObject
) -> None:
    """Roles, ids and lengths survive; a corpus snippet planted in any message is cleaned."""
    if history:
        index = data.draw(st.integers(0, len(history) - 1))
        if isinstance(history[index].get("content"), str):
            history[index]["content"] += sample.text
    before = copy.deepcopy(history)
    redacted, _ = Redactor(mode="hash").redact_messages(history)
    assert history == before
    assert [(m["role"], m.get("tool_call_id")) for m in redacted] == [
        (m["role"], m.get("tool_call_id")) for m in history
    ]
    texts = "\x00".join(m["content"] for m in redacted if isinstance(m.get("content"), str))
    assert [p.value for p in sample.planted if p.value in texts] == []


def test_redact_data_walks_nested_values() -> None:
    data = {"a": [VALUES["email"], 1, None], "b": {"c": f"x {VALUES['phone']}"}}
    clean, findings = Redactor().redact_data(data)
    assert clean == {"a": ["[REDACTED:email]", 1, None], "b": {"c": "x [REDACTED:phone]"}}
    assert [f.path for f in findings] == [("a", 0), ("b", "c")]


# ---------------------------------------------------------------------------------------------
# Configuration


def test_kinds_choose_the_detectors() -> None:
    text = f"{VALUES['email']} {VALUES['github_token']}"
    kinds = [f.kind for f in Redactor(kinds=SECRET_KINDS).find(text)]
    assert kinds == ["github_token"]
    assert [f.kind for f in Redactor(kinds={"email"}).find(text)] == ["email"]


def test_custom_patterns_come_first_and_may_narrow_to_a_group() -> None:
    redactor = Redactor(patterns={"ticket": r"TCK-(?P<value>\d{6})", "host": r"db\d+\.corp"})
    text = "TCK-123456 on db7.corp"
    assert redactor.redact_text(text).text == "TCK-[REDACTED:ticket] on [REDACTED:host]"


def test_the_allow_list_keeps_known_values() -> None:
    redactor = Redactor(allow=["Support@Acme.com"])
    text = "write to support@acme.com or wei.zhang@qq.com"
    assert redactor.redact_text(text).text == "write to support@acme.com or [REDACTED:email]"


def test_private_addresses_can_be_kept() -> None:
    text = "from 10.0.0.7 and 127.0.0.1 and fe80::1 to 8.8.8.8"
    kept = Redactor(keep_private_ips=True).redact_text(text).text
    assert kept == "from 10.0.0.7 and 127.0.0.1 and fe80::1 to [REDACTED:ip_address]"
    assert Redactor().redact_text(text).text.count("[REDACTED:ip_address]") == 4


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "blur"},
        {"kinds": ["email", "passport"]},
        {"kinds": "email"},
        {"allow": "x@y.cn"},
        {"patterns": {"Bad Name": "x"}},
        {"patterns": {"broken": "("}},
    ],
)
def test_bad_configuration_is_a_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Redactor(**options)


# ---------------------------------------------------------------------------------------------
# Detector details


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ('{"a": "x\\nuser@corp.com"}', ["email"]),
        ('{"a": "\\u624b\\u673a13800138000"}', ["phone"]),
        ("version 10.0.0.1, v1.2.3.4, Chrome/120.0.0.0, at 10.0.0.1", ["ip_address"]),
        ("IBAN DE89 3704 0044 0532 0130 00 EUR", ["iban"]),
        ("IBAN DE89370400440532013000", ["iban"]),
        ("11010519491231002X and 11010519491231002", ["cn_resident_id"]),
        ("4111111111111111 4111111111111112 1234567812345670", ["payment_card"]),
        ("redis://:pw1234@cache:6379 and https://user@host", ["url_password"]),
        ("git@github.com:org/repo.git and ops@github.com.", ["email"]),
        ("+86 138 0013 8000, (415) 555-0123, 123-456-7890", ["phone", "phone"]),
        ("::1 and a::b and :: and 12:30:45 and 00:1a:2b:3c:4d:5e", ["ip_address"]),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIB\nAAAA\n(cut)", ["private_key"]),
    ],
)
def test_detector_edge_cases(text: str, kinds: list[str]) -> None:
    assert [f.kind for f in Redactor().find(text)] == kinds


def test_a_jwt_needs_a_header_that_names_its_algorithm() -> None:
    jwt = VALUES["jwt"]
    no_alg = "eyJ0eXAiOiAiSldUIn0." + jwt.split(".", 1)[1]
    assert [f.kind for f in Redactor().find(f"{jwt} {no_alg}")] == ["jwt"]


def test_a_pem_block_in_escaped_json_goes_whole() -> None:
    key = next(p.value for s in CORPUS for p in s.planted if "\\n" in p.value)
    text = json.dumps({"private_key": key.replace("\\n", "\n")})
    redacted = Redactor().redact_text(text).text
    assert json.loads(redacted) == {"private_key": "[REDACTED:private_key]"}


# ---------------------------------------------------------------------------------------------
# Linear time on hostile input

# Fragments of every pattern, each repeated to 100 KB. A pattern that backtracked
# quadratically on any of them would take minutes here instead of about a second in all.
_HOSTILE = [
    "a", "1", "1 ", "1-", "1.", "a.", "a@", "@a.", "a:", ":", "::1:", "eyJ", "eyJa.", "sk-",
    "sk-ant-a1-", "ghp_", "xoxb-1", "AKIA", "AIza", "hf_", "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----AAAA\n-", "a://", "a://b:", "a://b:c", "password=",
    "password: '", 'password="a', "api_key=", "token: a", "Bearer ", "Basic ", "AccountKey=",
    "&sig=", "+1", "+1 ", "(415) ", "415-555-", "DE89 ", "DE89", "11010519491231002", "4111 ",
    "\\n", "\\u4f60", "1.2.3.4.", "fe80:", "a-", "-u a:", "secret_access_key=", "sk_live_",
    "https://hooks.slack.com/services/", "密码：", "1380013800", "010-", "a_b.", "AAAA",
    "x@y.cn ", "8.8.8.8 ",
]  # fmt: skip


@pytest.mark.parametrize("unit", _HOSTILE)
def test_every_detector_is_linear_on_hostile_input(unit: str) -> None:
    text = (unit * (100_000 // len(unit) + 1))[:100_000]
    for detector in builtin_detectors():
        for start, end in detector.find(text):
            assert 0 <= start < end <= len(text)
    assert len(Redactor().redact_text(text).text) > 0


# ---------------------------------------------------------------------------------------------
# The benchmark still runs


def test_the_benchmark_prints_the_table() -> None:
    script = Path(__file__).resolve().parents[1] / "bench" / "bench_redaction.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| overall |" in done.stdout and "MB/s" in done.stdout


def test_findings_have_no_field_for_the_value() -> None:
    assert set(Finding.__dataclass_fields__) == {"kind", "start", "end", "replacement", "path"}


def test_marker_tags_are_structure_and_never_redacted() -> None:
    """A pattern that matches inside a tag leaves the tag whole; the body is still redacted."""
    text = '<synopsis:summary version="2" tokens_after="5210">\nid 4711, v2\n</synopsis:summary>'
    result = Redactor(patterns={"number": r"\d+"}).redact_text(text)
    assert result.text.startswith('<synopsis:summary version="2" tokens_after="5210">\n')
    assert result.text.endswith("\n</synopsis:summary>")
    assert "4711" not in result.text and len(result.findings) == 2


def test_a_value_next_to_a_tag_is_still_found() -> None:
    email = VALUES["email"]
    text = f'<synopsis:skill name="x">\n{email}\n</synopsis:skill>'
    assert Redactor().redact_text(text).text == (
        '<synopsis:skill name="x">\n[REDACTED:email]\n</synopsis:skill>'
    )


def test_count_kinds_counts_without_values() -> None:
    findings = Redactor().find(f"{VALUES['email']} {VALUES['email']} {VALUES['ip_address']}")
    assert count_kinds(findings) == {"email": 2, "ip_address": 1}
