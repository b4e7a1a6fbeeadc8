"""API keys: shown once, stored hashed, one tenant each, revocable; the ``keys`` commands."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from synopsis.cli import main
from synopsis.server.db import Database
from synopsis.server.keys import KeyRing, digest_of, new_key


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        db = Database(str(tmp_path / "keys.db"))
    else:
        url = request.getfixturevalue("postgres_url")
        db = Database(url, schema=request.getfixturevalue("pg_schema"))
    with db:
        yield db


def test_new_keys_are_random_and_carry_their_id() -> None:
    (id_a, key_a), (id_b, key_b) = new_key(), new_key()
    assert key_a != key_b and id_a != id_b
    assert key_a.startswith(f"syn_{id_a}_") and len(key_a) > 50


def test_a_created_key_authenticates_as_its_tenant(database: Database) -> None:
    ring = KeyRing(database)
    issued = ring.create("acme", label="ci")
    found = ring.authenticate(issued.secret)
    assert found is not None and found.tenant == "acme" and found.label == "ci"
    assert ring.authenticate(issued.secret + "x") is None
    assert ring.authenticate("") is None and ring.authenticate("Bearer nonsense") is None


def test_a_revoked_key_no_longer_authenticates(database: Database) -> None:
    ring = KeyRing(database)
    issued = ring.create("acme")
    revoked = ring.revoke(issued.key.key_id)
    assert revoked is not None and revoked.revoked_at is not None
    assert ring.authenticate(issued.secret) is None
    assert ring.revoke("no-such-id") is None


def test_list_shows_ids_and_tenants_never_keys(database: Database) -> None:
    ring = KeyRing(database)
    a, b = ring.create("acme"), ring.create("globex")
    assert [k.key_id for k in ring.list()] == [a.key.key_id, b.key.key_id]
    assert [k.tenant for k in ring.list("globex")] == ["globex"]


def test_only_the_digest_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    with Database(str(path)) as db:
        issued = KeyRing(db).create("acme")
    rows = sqlite3.connect(path).execute("SELECT * FROM server_keys").fetchall()
    assert digest_of(issued.secret) in rows[0]
    assert not any(issued.secret in str(value) for value in rows[0])


def test_keys_commands_create_list_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    created = runner.invoke(main, ["keys", "create", "--db", db, "--tenant", "acme", "--json"])
    record = json.loads(created.output)
    listed = runner.invoke(main, ["keys", "list", "--db", db, "--json"])
    revoked = runner.invoke(main, ["keys", "revoke", "--db", db, record["key_id"]])
    missing = runner.invoke(main, ["keys", "revoke", "--db", db, "nope"])
    assert created.exit_code == 0 and record["key"].startswith("syn_")
    assert [k["tenant"] for k in json.loads(listed.output)] == ["acme"]
    assert "key" not in json.loads(listed.output)[0]
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    assert missing.exit_code == 2 and "no key with id" in missing.output


def test_keys_create_prints_the_key_alone_on_stdout(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["keys", "create", "--db", str(tmp_path / "k.db"), "--tenant", "acme"]
    )
    assert result.exit_code == 0
    assert result.stdout.strip().startswith("syn_") and len(result.stdout.split()) == 1


def test_a_bad_tenant_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["keys", "create", "--db", str(tmp_path / "k.db"), "--tenant", " "]
    )
    assert result.exit_code == 2 and result.output.startswith("synopsis: error: tenant")
