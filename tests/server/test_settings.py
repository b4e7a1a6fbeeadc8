"""``synopsis serve`` and ``synopsis keys`` take settings from ``SYNOPSIS_*`` variables.

The variables are read by :class:`synopsis.config.Settings` only; a flag given beats its
variable (even a malformed one); a malformed variable that is needed is one line, exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from synopsis import KeepTail, Trigger
from synopsis.cli.serve import build_options, keys, resolve, serve
from synopsis.config import VARIABLES, Settings
from synopsis.errors import ConfigError
from synopsis.server import ServerOptions

ENVIRONMENT = {
    "SYNOPSIS_DB": "postgresql://u:pw@db/synopsis",
    "SYNOPSIS_SCHEMA": "tenant_a",
    "SYNOPSIS_HOST": "0.0.0.0",
    "SYNOPSIS_PORT": "9001",
    "SYNOPSIS_UPSTREAM": "https://llm.example.com/v1",
    "SYNOPSIS_UPSTREAM_API_KEY": "sk-upstream",
    "SYNOPSIS_MODEL": "openai:gpt-4o-mini",
    "SYNOPSIS_WORKERS": "7",
    "SYNOPSIS_SUMMARIZE_EVERY": "12",
    "SYNOPSIS_TRIGGER_TOKENS": "5000",
    "SYNOPSIS_TRIGGER_MESSAGES": "30",
    "SYNOPSIS_KEEP_TAIL": "6",
    "SYNOPSIS_SUMMARY_CACHE": "64",
    "SYNOPSIS_LEASE_SECONDS": "12.5",
    "SYNOPSIS_DRAIN_SECONDS": "0",
    "SYNOPSIS_LOG_LEVEL": "debug",
}


def no_flags() -> dict[str, object]:
    """What click passes ``serve`` when no flag is given (every value None)."""
    return {param.name: None for param in serve.params if param.name}


def run(command: object, *args: str, env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(command, list(args), env=env, catch_exceptions=False)  # type: ignore[arg-type]


def test_every_server_variable_reaches_the_options() -> None:
    """With no flags, each SYNOPSIS_* variable sets its option."""
    options, log_level = build_options(resolve(no_flags(), ENVIRONMENT))
    assert options == ServerOptions(
        db="postgresql://u:pw@db/synopsis", schema="tenant_a", host="0.0.0.0", port=9001,
        upstream="https://llm.example.com/v1", upstream_api_key="sk-upstream",
        model="openai:gpt-4o-mini", workers=7, summarize_every=12,
        trigger=Trigger(tokens=5000, messages=30), keep_tail=KeepTail(messages=6),
        summary_cache=64, lease_seconds=12.5, drain_seconds=0.0,
    )  # fmt: skip
    assert log_level == "debug"
    # Every variable of the table is one the server or the memory CLI uses.
    assert set(ENVIRONMENT) | {"SYNOPSIS_TENANT", "SYNOPSIS_EMBEDDER"} == set(VARIABLES.values())


def test_no_variables_and_no_flags_give_the_server_defaults() -> None:
    """Unset (or empty) variables leave ServerOptions' own defaults in place."""
    empty = dict.fromkeys(ENVIRONMENT, "")
    assert build_options(resolve(no_flags(), empty)) == (ServerOptions(), "info")


def test_a_flag_beats_its_variable() -> None:
    """--port and --upstream given: SYNOPSIS_PORT and SYNOPSIS_UPSTREAM are not used."""
    flags = {**no_flags(), "port": 8123, "upstream": "http://127.0.0.1:9/v1"}
    options, _ = build_options(resolve(flags, ENVIRONMENT))
    assert (options.port, options.upstream) == (8123, "http://127.0.0.1:9/v1")
    assert options.workers == 7  # the rest still comes from the environment


def test_the_trigger_takes_one_part_from_the_environment() -> None:
    """SYNOPSIS_TRIGGER_MESSAGES alone keeps the default token trigger beside it."""
    options, _ = build_options(resolve(no_flags(), {"SYNOPSIS_TRIGGER_MESSAGES": "50"}))
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
    ]:
        with pytest.raises(ConfigError) as caught:
            Settings.from_env({variable: value})
        assert "hunter2" not in str(caught.value)
    settings = Settings.from_env({"SYNOPSIS_UPSTREAM_API_KEY": "sk-hunter2"})
    assert settings.upstream_api_key == "sk-hunter2" and "hunter2" not in repr(settings)
    assert "hunter2" not in repr(ServerOptions(upstream_api_key="sk-hunter2"))


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
