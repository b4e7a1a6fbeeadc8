"""Keys over HTTP (issue 22, item 4): the admin API creates, lists and revokes tenant keys,
with an optional expiry and request-rate limit; ``synopsis keys`` runs the same
implementation, and each side sees what the other did at once."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from synopsis.cli.serve import keys
from synopsis.server.db import Database
from synopsis.server.keys import KeyRing
from tests.server.conftest import Live, StartServer, wait_for

ADMIN = "admin-" + "k" * 26


@pytest.fixture
def admin(start_server: StartServer) -> Iterator[Live]:
    with start_server(admin_key=ADMIN) as live:
        yield live


def test_the_admin_api_is_off_without_an_admin_key(live: Live) -> None:
    with live.client(ADMIN) as client:
        response = client.get("/v1/admin/keys")
    assert response.status_code == 404
    assert "SYNOPSIS_ADMIN_KEY" in response.json()["error"]["message"]


def test_only_the_admin_key_opens_the_admin_api(admin: Live) -> None:
    tenant_key = admin.key("acme")
    for key in (None, tenant_key, ADMIN + "x", ADMIN[:-1]):
        with admin.client(key) as client:
            assert client.get("/v1/admin/keys").status_code == 401
            assert client.post("/v1/admin/keys", json={"tenant": "evil"}).status_code == 401


def test_create_list_and_revoke_over_http(admin: Live) -> None:
    with admin.client(ADMIN) as client:
        made = client.post("/v1/admin/keys", json={"tenant": "acme", "label": "ci"})
        assert made.status_code == 201, made.text
        issued = made.json()
        listed = client.get("/v1/admin/keys", params={"tenant": "acme"}).json()["keys"]
    assert issued["key"].startswith("syn_") and issued["tenant"] == "acme"
    assert [k["key_id"] for k in listed] == [issued["key_id"]]
    assert "key" not in listed[0] and issued["key"] not in json.dumps(listed)
    with admin.client(issued["key"]) as tenant:
        assert tenant.get("/v1/memories/search").status_code == 200
        with admin.client(ADMIN) as client:
            revoked = client.delete(f"/v1/admin/keys/{issued['key_id']}")
            missing = client.delete("/v1/admin/keys/0123456789ab")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        assert missing.status_code == 404
        assert tenant.get("/v1/memories/search").status_code == 401  # the very next request


def test_the_cli_and_the_api_share_the_keys(admin: Live) -> None:
    db = ["--db", admin.options.db]
    result = CliRunner().invoke(
        keys, ["create", *db, "--tenant", "acme", "--rate-per-minute", "30", "--json"]
    )
    assert result.exit_code == 0, result.output
    made = json.loads(result.output)
    with admin.client(ADMIN) as client:
        listed = client.get("/v1/admin/keys").json()["keys"]
        issued = client.post("/v1/admin/keys", json={"tenant": "beta", "expires_in": 3600}).json()
    assert [(k["key_id"], k["rate_per_minute"]) for k in listed] == [(made["key_id"], 30)]
    with Database(admin.options.db) as database:
        seen = {k.key_id: k for k in KeyRing(database).list()}
    assert seen[issued["key_id"]].expires_at is not None
    revoked = CliRunner().invoke(keys, ["revoke", *db, issued["key_id"]])
    assert revoked.exit_code == 0, revoked.output
    with admin.client(issued["key"]) as client:
        assert client.get("/v1/memories/search").status_code == 401


def test_an_expired_key_is_refused(admin: Live) -> None:
    with admin.client(ADMIN) as client:
        issued = client.post("/v1/admin/keys", json={"tenant": "acme", "expires_in": 0.5}).json()
    with admin.client(issued["key"]) as client:
        wait_for(
            lambda: client.get("/v1/memories/search").status_code == 401, what="the key to expire"
        )
        assert "expired" in client.get("/v1/memories/search").json()["error"]["message"]


def test_a_key_over_its_rate_gets_429_with_retry_after(admin: Live) -> None:
    with admin.client(ADMIN) as client:
        limited = client.post("/v1/admin/keys", json={"tenant": "acme", "rate_per_minute": 3})
        other = client.post("/v1/admin/keys", json={"tenant": "acme"})
    with admin.client(limited.json()["key"]) as client:
        statuses = [client.get("/v1/memories/search") for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert int(statuses[-1].headers["retry-after"]) >= 1
    with admin.client(other.json()["key"]) as client:  # the limit is the key's, not the tenant's
        assert client.get("/v1/memories/search").status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"tenant": ""},
        {"tenant": "acme", "expires_in": 0},
        {"tenant": "acme", "expires_in": -5},
        {"tenant": "acme", "rate_per_minute": 0},
        {"tenant": "acme", "rate_per_minute": True},
        {"tenant": "a\x00b"},
    ],
)
def test_bad_key_requests_are_422(admin: Live, body: dict[str, object]) -> None:
    with admin.client(ADMIN) as client:
        assert client.post("/v1/admin/keys", json=body).status_code == 422
