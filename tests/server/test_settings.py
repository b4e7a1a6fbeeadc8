"""``synopsis serve`` and ``synopsis keys`` take settings from ``SYNOPSIS_*`` variables.

The variables are read by :class:`synopsis.config.Settings` only; a flag given beats its
variable (even a malformed one); a malformed variable that is needed is one line, exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from synopsis import KeepTail, Trigger
from synopsis.cli.serve import keys, options_from, serve
from synopsis.config import VARIABLES, Settings, UpstreamSpec
from synopsis.errors import ConfigError
from synopsis.server import ServerOptions

ENVIRONMENT = {
    "SYNOPSIS_DB": "postgresql://u:pw@db/synopsis",
    "SYNOPSIS_SCHEMA": "tenant_a",
    "SYNOPSIS_HOST": "0.0.0.0",
    "SYNOPSIS_PORT": "9001",
    "SYNOPSIS_UPSTREAM": "https://llm.example.com/v1",
    "SYNOPSIS_UPSTREAM_API_KEY": "sk-upstream",
    "SYNOPSIS_UPSTREAM_TIMEOUT": "45",
    "SYNOPSIS_UPSTREAM_CONCURRENCY": "8",
    "SYNOPSIS_MODEL": "openai:gpt-4o-mini",
    "SYNOPSIS_WORKERS": "7",
    "SYNOPSIS_SUMMARIZE_EVERY": "12",
    "SYNOPSIS_TRIGGER_TOKENS": "5000",
    "SYNOPSIS_TRIGGER_MESSAGES": "30",
    "SYNOPSIS_KEEP_TAIL": "6",
    "SYNOPSIS_SUMMARY_CACHE": "64",
    "SYNOPSIS_LEASE_SECONDS": "12.5",
    "SYNOPSIS_DRAIN_SECONDS": "0",
    "SYNOPSIS_SWEEP_SECONDS": "7.5",
    "SYNOPSIS_REDACT": "yes",
    "SYNOPSIS_REDACT_MODE": "hash",
    "SYNOPSIS_REDACT_HASH_KEY": "k" * 32,
    "SYNOPSIS_LOG_LEVEL": "debug",
    "SYNOPSIS_MAX_BODY_BYTES": "2048",
    "SYNOPSIS_CPU_THREADS": "3",
    "SYNOPSIS_ADMIN_KEY": "a" * 20,
}


def no_flags() -> dict[str, object]:
    """What click passes ``serve`` when no flag is given (every value None)."""
    return {param.name: None for param in serve.params if param.name}


def run(command: object, *args: str, env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(command, list(args), env=env, catch_exceptions=False)  # type: ignore[arg-type]


def test_every_server_variable_reaches_the_options(tmp_path: Path) -> None:
    """With no flags, each SYNOPSIS_* variable sets its option (the upstreams file's keys
    come from the variables it names)."""
    upstreams = tmp_path / "upstreams.toml"
    upstreams.write_text(
        '[upstreams.claude]\nbase_url = "https://api.anthropic.com/v1"\nformat = "anthropic"\n'
        'api_key_env = "CLAUDE_KEY"\nmodels = ["claude-*"]\n'
    )
    environ = {**ENVIRONMENT, "SYNOPSIS_UPSTREAMS": str(upstreams), "CLAUDE_KEY": "sk-ant"}
    options, log_level = options_from(no_flags(), environ)
    claude = UpstreamSpec(
        name="claude", base_url="https://api.anthropic.com/v1", format="anthropic",
        api_key="sk-ant", models=("claude-*",),
    )  # fmt: skip
    assert options.upstreams[0].api_key == "sk-ant"
    assert options == ServerOptions(
        db="postgresql://u:pw@db/synopsis", schema="tenant_a", host="0.0.0.0", port=9001,
        upstream="https://llm.example.com/v1", upstream_api_key="sk-upstream",
        upstreams=(claude,), upstream_timeout=45.0, upstream_concurrency=8,
        model="openai:gpt-4o-mini", workers=7, summarize_every=12,
        trigger=Trigger(tokens=5000, messages=30), keep_tail=KeepTail(messages=6),
        summary_cache=64, lease_seconds=12.5, drain_seconds=0.0, sweep_seconds=7.5,
        redact=True, redact_mode="hash", redact_hash_key="k" * 32,
        max_body_bytes=2048, cpu_threads=3, admin_key="a" * 20,
    )  # fmt: skip
    assert log_level == "debug"
    # Every variable of the table is one the server or the memory CLI uses.
    used = {"SYNOPSIS_TENANT", "SYNOPSIS_EMBEDDER", "SYNOPSIS_UPSTREAMS"}
    assert set(ENVIRONMENT) | used == set(VARIABLES.values())


def test_no_variables_and_no_flags_give_the_server_defaults() -> None:
    """Unset (or empty) variables leave ServerOptions' own defaults in place."""
    empty = dict.fromkeys(ENVIRONMENT, "")
    assert options_from(no_flags(), empty) == (ServerOptions(), "info")


def test_a_flag_beats_its_variable() -> None:
    """--port and --upstream given: SYNOPSIS_PORT and SYNOPSIS_UPSTREAM are not used."""
    flags = {**no_flags(), "port": 8123, "upstream": "http://127.0.0.1:9/v1"}
    options, _ = options_from(flags, ENVIRONMENT)
    assert (options.port, options.upstream) == (8123, "http://127.0.0.1:9/v1")
    assert options.workers == 7  # the rest still comes from the environment


def test_the_trigger_takes_one_part_from_the_environment() -> None:
    """SYNOPSIS_TRIGGER_MESSAGES alone keeps the default token trigger beside it."""
    options, _ = options_from(no_flags(), {"SYNOPSIS_TRIGGER_MESSAGES": "50"})
    assert options.trigger == Trigger(tokens=Trigger.default().tokens, messages=50)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SYNOPSIS_PORT", "eighty", "SYNOPSIS_PORT must be a whole number, not 'eighty'"),
        ("SYNOPSIS_PORT", "70000", "SYNOPSIS_PORT must be in 0..65535, not 70000"),
        ("SYNOPSIS_WORKERS", "0", "SYNOPSIS_WORKERS must be in 1..256, not 0"),
        ("SYNOPSIS_DRAIN_SECONDS", "-1", "SYNOPSIS_DRAIN_SECONDS must be a non-negative"),
        ("SYNOPSIS_LEASE_SECONDS", "nan", "SYNOPSIS_LEASE_SECONDS must be a positive"),
        ("SYNOPSIS_SCHEMA", "a;drop", "SYNOPSIS_SCHEMA must be a plain SQL identifier"),
        ("SYNOPSIS_LOG_LEVEL", "loud", "SYNOPSIS_LOG_LEVEL must be one of critical, error"),
        ("SYNOPSIS_UPSTREAM", "ftp://user:pw@host", "SYNOPSIS_UPSTREAM must be an http://"),
        ("SYNOPSIS_UPSTREAM_API_KEY", " \t", "SYNOPSIS_UPSTREAM_API_KEY must be a non-blank"),
        ("SYNOPSIS_REDACT", "maybe", "SYNOPSIS_REDACT must be one of 1, true, yes, on, 0,"),
        ("SYNOPSIS_REDACT_MODE", "blur", "SYNOPSIS_REDACT_MODE must be one of mask, hash, drop"),
        ("SYNOPSIS_REDACT_HASH_KEY", "short", "SYNOPSIS_REDACT_HASH_KEY must be at least 16"),
    ],
)
def test_a_malformed_variable_is_one_line_and_exit_code_2(
    variable: str, value: str, message: str
) -> None:
    """The error names the variable and what it must be; serve never starts."""
    result = run(serve, env={variable: value})
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"synopsis: error: {message}")


def test_secrets_are_never_echoed() -> None:
    """A bad upstream URL or key is not shown in the error, nor the key in the settings' repr."""
    for variable, value in [
        ("SYNOPSIS_UPSTREAM", "ftp://user:hunter2@host"),
        ("SYNOPSIS_UPSTREAM_API_KEY", "sk-hunter2\n"),
        ("SYNOPSIS_REDACT_HASH_KEY", "hunter2"),
        ("SYNOPSIS_REDACT_HASH_KEY", "hunter2-hunter2-\x07"),
    ]:
        with pytest.raises(ConfigError) as caught:
            Settings.from_env({variable: value})
        assert "hunter2" not in str(caught.value)
    settings = Settings.from_env({"SYNOPSIS_UPSTREAM_API_KEY": "sk-hunter2"})
    assert settings.upstream_api_key == "sk-hunter2" and "hunter2" not in repr(settings)
    assert "hunter2" not in repr(ServerOptions(upstream_api_key="sk-hunter2"))
    options = ServerOptions(redact=True, redact_mode="hash", redact_hash_key="hunter2" * 3)
    assert "hunter2" not in repr(options) and "hunter2" not in str(options.describe())


def test_a_flag_beats_a_malformed_variable() -> None:
    """SYNOPSIS_PORT=eighty does not matter when --port is given: the error is the next one."""
    result = run(serve, "--port", "1", "--schema", "bad;name", env={"SYNOPSIS_PORT": "eighty"})
    assert result.exit_code == 2
    assert "SYNOPSIS_PORT" not in result.stderr
    assert "schema must be a plain SQL identifier" in result.stderr


def test_only_the_needed_variables_are_read() -> None:
    """Settings.from_env(only=...) leaves the others unread, malformed or not."""
    settings = Settings.from_env({"SYNOPSIS_PORT": "x", "SYNOPSIS_HOST": "h"}, only=["host"])
    assert (settings.host, settings.port) == ("h", None)
    with pytest.raises(ValueError, match="no such setting: nope"):
        Settings.from_env({}, only=["nope"])


def test_keys_use_the_database_from_the_environment(tmp_path: Path) -> None:
    """``synopsis keys create`` and ``keys list`` without --db use SYNOPSIS_DB."""
    env: dict[str, str | None] = {"SYNOPSIS_DB": str(tmp_path / "env.db")}
    created = run(keys, "create", "--tenant", "acme", "--json", env=env)
    assert created.exit_code == 0, created.output
    assert (tmp_path / "env.db").exists()
    listed = run(keys, "list", "--json", env=env)
    assert '"tenant": "acme"' in listed.output


def test_help_names_every_variable_and_shows_no_configured_value() -> None:
    """``synopsis serve --help`` lists each variable and the defaults, never a set secret."""
    text = " ".join(
        run(serve, "--help", env={"SYNOPSIS_UPSTREAM_API_KEY": "sk-hunter2"}).output.split()
    )
    for variable in ENVIRONMENT:
        assert variable in text
    assert "(env SYNOPSIS_PORT; default 8000)" in text
    assert "hunter2" not in text


def test_redaction_is_off_unless_asked_for() -> None:
    """No flag, no variable: redaction is off, and ``describe`` (logged at start) says so."""
    options, _ = options_from(no_flags(), {})
    assert (options.redact, options.redact_mode, options.redact_hash_key) == (False, "mask", None)
    assert options.describe()["redact"] == "off"


@pytest.mark.parametrize(
    ("flags", "environ", "expected"),
    [
        ({"redact": True}, {}, (True, "mask")),
        ({}, {"SYNOPSIS_REDACT": "on"}, (True, "mask")),
        ({}, {"SYNOPSIS_REDACT": "0", "SYNOPSIS_REDACT_MODE": "hash"}, (False, "hash")),
        # A mode alone turns redaction on, as ``compact --redact-mode`` does.
        ({"redact_mode": "drop"}, {}, (True, "drop")),
        ({}, {"SYNOPSIS_REDACT_MODE": "hash"}, (True, "hash")),
        # Flags win: --no-redact over SYNOPSIS_REDACT, --redact-mode over SYNOPSIS_REDACT_MODE.
        ({"redact": False}, {"SYNOPSIS_REDACT": "true"}, (False, "mask")),
        ({"redact_mode": "mask"}, {"SYNOPSIS_REDACT_MODE": "hash"}, (True, "mask")),
    ],
)
def test_the_redaction_policy_comes_from_flags_then_variables(
    flags: dict[str, object], environ: dict[str, str], expected: tuple[bool, str]
) -> None:
    options, _ = options_from({**no_flags(), **flags}, environ)
    assert (options.redact, options.redact_mode) == expected


def test_the_hash_key_comes_from_its_variable_and_keys_the_tokens() -> None:
    """SYNOPSIS_REDACT_HASH_KEY (no flag: it is a secret) makes every process's redactor write
    the same token for a value; without it each redactor draws its own key."""
    environ = {"SYNOPSIS_REDACT_MODE": "hash", "SYNOPSIS_REDACT_HASH_KEY": "replica-shared-key"}
    keyed, _ = options_from(no_flags(), environ)
    assert keyed.redact_hash_key == "replica-shared-key"
    text = "mail dana@example.com"
    one, two = (keyed.new_redactor().redact_text(text).text for _ in range(2))
    assert one == two and one.startswith("mail [EMAIL#")
    unkeyed, _ = options_from(no_flags(), {"SYNOPSIS_REDACT_MODE": "hash"})
    assert unkeyed.new_redactor().redact_text(text).text != one
    assert "--redact-hash-key" not in run(serve, "--help", env={}).output


def test_a_bad_redaction_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="redact_mode must be one of mask, hash, drop"):
        ServerOptions(redact_mode="blur")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="redact_hash_key must not be blank"):
        ServerOptions(redact_hash_key="  ")
