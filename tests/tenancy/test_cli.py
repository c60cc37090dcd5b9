"""``modelport tenants`` and ``modelport keys`` against a live server over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from modelport.cli import modelport
from modelport.cli.keys.create import parse_duration
from tests.conftest import ADMIN_KEY, LiveServer


def run(server: LiveServer, key: str, *args: str, as_json: bool = False) -> Result:
    base = ["--url", server.url, "--api-key", key] + (["--json"] if as_json else [])
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def run_json(server: LiveServer, key: str, *args: str) -> Any:
    result = run(server, key, *args, as_json=True)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def works(server: LiveServer, key: str) -> bool:
    response = httpx.get(f"{server.url}/api/tenants", headers={"Authorization": f"Bearer {key}"})
    return response.status_code == 200


def test_tenants_members_and_keys(live_server: LiveServer) -> None:
    server = live_server
    tenant = run_json(
        server, ADMIN_KEY, "tenants", "create", "acme", "--name", "Acme", "--owner", "alice"
    )
    assert tenant["slug"] == "acme" and tenant["require_separation"] is False
    listed = run_json(server, ADMIN_KEY, "tenants", "list")
    assert [t["slug"] for t in listed["items"]] == ["acme"]
    issued = run_json(
        server, ADMIN_KEY, "keys", "create", "laptop", "--tenant", "acme", "--member", "alice"
    )
    alice = issued["key"]
    assert issued["principal"] == "acme/alice" and works(server, alice)

    added = run_json(
        server, alice, "tenants", "members", "add", "acme", "bob", "--role", "consumer"
    )
    assert added["roles"] == ["consumer"]
    robot = run(
        server,
        alice,
        "tenants",
        "members",
        "add",
        "acme",
        "ci",
        "--role",
        "publisher",
        "--service-account",
    )
    assert robot.exit_code == 0 and "service_account" in robot.stdout
    changed = run_json(
        server,
        alice,
        "tenants",
        "members",
        "set-roles",
        "acme",
        "bob",
        "--role",
        "consumer",
        "--role",
        "billing",
    )
    assert changed["roles"] == ["billing", "consumer"]
    members = run_json(server, alice, "tenants", "members", "list", "acme")
    assert [(m["name"], m["kind"]) for m in members["items"]] == [
        ("alice", "member"),
        ("bob", "member"),
        ("ci", "service_account"),
    ]
    shown = run_json(server, alice, "tenants", "show", "acme")
    assert shown["name"] == "Acme" and len(shown["members"]) == 3
    updated = run_json(server, alice, "tenants", "update", "acme", "--require-separation")
    assert updated["require_separation"] is True

    bobs = run_json(
        server,
        alice,
        "keys",
        "create",
        "bob's",
        "--member",
        "bob",
        "--scope",
        "model.call",
        "--scope",
        "model.read",
        "--expires-in",
        "30d",
    )
    assert bobs["scopes"] == ["model.call", "model.read"] and bobs["expires_at"]
    keys = run_json(server, alice, "keys", "list")
    assert {k["id"] for k in keys["items"]} == {issued["id"], bobs["id"]}
    assert all("key" not in k for k in keys["items"])
    assert [
        k["id"] for k in run_json(server, alice, "keys", "list", "--member", "bob")["items"]
    ] == [bobs["id"]]

    # Rotation accepts the whole key (e.g. one that leaked) as well as its id.
    rotated = run_json(server, alice, "keys", "rotate", bobs["key"])
    assert rotated["rotated_from"] == bobs["id"]
    assert not works(server, bobs["key"]) and works(server, rotated["key"])
    revoked = run_json(server, alice, "keys", "revoke", rotated["id"])
    assert revoked["revoked_at"] and not works(server, rotated["key"])

    removed = run(server, alice, "tenants", "members", "remove", "acme", "bob")
    assert removed.exit_code == 0 and "revoked" in removed.stdout


def test_human_output_shows_a_new_key_once(live_server: LiveServer) -> None:
    run_json(live_server, ADMIN_KEY, "tenants", "create", "acme", "--owner", "alice")
    result = run(
        live_server, ADMIN_KEY, "keys", "create", "k", "--tenant", "acme", "--member", "alice"
    )
    assert result.exit_code == 0, result.output
    assert "not shown again" in result.output
    key = result.stdout.split()[-1]
    assert key.startswith("mp_live_") and works(live_server, key)
    table = run(live_server, key, "keys", "list")
    assert table.exit_code == 0 and key not in table.output


def test_errors_are_reported(live_server: LiveServer) -> None:
    run_json(live_server, ADMIN_KEY, "tenants", "create", "acme", "--owner", "alice")
    issued = run_json(
        live_server, ADMIN_KEY, "keys", "create", "k", "--tenant", "acme", "--member", "alice"
    )
    refused = run(live_server, issued["key"], "tenants", "create", "globex")
    assert refused.exit_code == 1 and "forbidden" in refused.output
    hidden = run(live_server, issued["key"], "tenants", "show", "globex")
    assert hidden.exit_code == 1 and "tenant_not_found" in hidden.output
    bad = run(live_server, issued["key"], "keys", "create", "k", "--expires-in", "soon")
    assert bad.exit_code == 2


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("12h", 43200), ("30d", 2592000)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds
