"""Settings.from_env: the one reader of SYNOPSIS_* variables, and the CLI defaults it feeds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from synopsis.cli.memory import memory
from synopsis.config import EMBEDDERS, Settings
from synopsis.errors import ConfigError
from synopsis.memory.open import DEFAULT_DB


def test_an_empty_environment_gives_the_library_defaults() -> None:
    """No SYNOPSIS_* variable: the default database, no tenant, no embedder."""
    settings = Settings.from_env({})
    assert settings == Settings()
    assert (settings.db, settings.tenant, settings.embedder) == (DEFAULT_DB, None, "none")


def test_empty_values_count_as_unset() -> None:
    """``SYNOPSIS_DB=`` (as click and ``VAR= cmd`` treat it) falls back to the default."""
    environ = {"SYNOPSIS_DB": "", "SYNOPSIS_TENANT": "", "SYNOPSIS_EMBEDDER": ""}
    assert Settings.from_env(environ) == Settings()


def test_valid_values_are_read() -> None:
    """Every variable lands in its field; other variables are ignored."""
    environ = {
        "SYNOPSIS_DB": "postgresql://u@h/db",
        "SYNOPSIS_TENANT": "acme",
        "SYNOPSIS_EMBEDDER": "e5",
        "SYNOPSIS_UNKNOWN": "x",
        "HOME": "/root",
    }
    assert Settings.from_env(environ) == Settings(
        db="postgresql://u@h/db", tenant="acme", embedder="e5"
    )
    assert EMBEDDERS == ("none", "static", "e5")


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("SYNOPSIS_EMBEDDER", "bert", "must be one of none, static, e5, not 'bert'"),
        ("SYNOPSIS_EMBEDDER", "E5", "must be one of none, static, e5"),
        ("SYNOPSIS_TENANT", "   ", "not a usable tenant id"),
        ("SYNOPSIS_TENANT", "a\tb", "printable"),
        ("SYNOPSIS_TENANT", "x" * 10_000, "at most"),
        ("SYNOPSIS_TENANT", "bad\udcff", "Unicode"),
        ("SYNOPSIS_DB", "  ", "not blank"),
    ],
)
def test_invalid_values_raise_config_error_naming_the_variable(
    variable: str, value: str, reason: str
) -> None:
    """A malformed value is a ConfigError that starts with the variable's name."""
    with pytest.raises(ConfigError, match=f"^{variable} ") as caught:
        Settings.from_env({variable: value})
    assert reason in str(caught.value)


def test_the_process_environment_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """from_env reads only the mapping it is given."""
    monkeypatch.setenv("SYNOPSIS_TENANT", "from-process")
    assert Settings.from_env({}).tenant is None


def test_settings_are_frozen() -> None:
    """A Settings value cannot be changed after it was read."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().db = "x"  # type: ignore[misc]


# --- the memory CLI ------------------------------------------------------------------------


def invoke(*args: str, env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(memory, list(args), env=env, catch_exceptions=False)


def test_explicit_options_beat_the_environment(tmp_path: Path) -> None:
    """--db and --tenant given on the command line win over SYNOPSIS_DB / SYNOPSIS_TENANT."""
    chosen, ignored = str(tmp_path / "chosen.db"), str(tmp_path / "ignored.db")
    env: dict[str, str | None] = {"SYNOPSIS_DB": ignored, "SYNOPSIS_TENANT": "env-tenant"}
    put = invoke("put", "--db", chosen, "--tenant", "cli", "--namespace", "n", "hi", env=env)
    assert put.exit_code == 0, put.output
    assert Path(chosen).exists() and not Path(ignored).exists()
    found = invoke("search", "--db", chosen, "--tenant", "cli", "--json", "hi", env=env)
    assert '"hi"' in found.output
    assert invoke("search", "--db", chosen, "--json", "hi", env=env).output.strip() == "[]"


def test_the_environment_fills_missing_options(tmp_path: Path) -> None:
    """Without --db/--tenant the environment's values are used."""
    env: dict[str, str | None] = {"SYNOPSIS_DB": str(tmp_path / "e.db"), "SYNOPSIS_TENANT": "t"}
    assert invoke("put", "--namespace", "n", "hello", env=env).exit_code == 0
    assert (tmp_path / "e.db").exists()


def test_an_explicit_option_wins_over_a_malformed_variable(tmp_path: Path) -> None:
    """SYNOPSIS_EMBEDDER=bogus does not matter when --embedder is given."""
    env: dict[str, str | None] = {"SYNOPSIS_EMBEDDER": "bogus"}
    db = str(tmp_path / "m.db")
    args = ("put", "--db", db, "--tenant", "t", "--embedder", "none", "--namespace", "n", "x")
    assert invoke(*args, env=env).exit_code == 0


def test_a_malformed_variable_that_is_needed_is_one_line(tmp_path: Path) -> None:
    """A bad SYNOPSIS_* value, when used, prints one line naming it and exits 2."""
    env: dict[str, str | None] = {"SYNOPSIS_EMBEDDER": "bogus"}
    result = invoke("search", "--db", str(tmp_path / "b.db"), "--tenant", "t", "x", env=env)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "synopsis: error: SYNOPSIS_EMBEDDER must be one of none, static, e5, not 'bogus'"
    ]


def test_help_shows_library_defaults_not_the_environment() -> None:
    """--help names the variables and the library defaults; it never prints a configured URL."""
    env: dict[str, str | None] = {"SYNOPSIS_DB": "postgresql://u:secret@h/db"}
    text = invoke("search", "--help", env=env).output
    assert "SYNOPSIS_DB" in text and "SYNOPSIS_TENANT" in text and "SYNOPSIS_EMBEDDER" in text
    assert f"[default: {DEFAULT_DB}]" in " ".join(text.split())
    assert "secret" not in text
