"""How keys are printed, and KEY arguments read (shared by the ``keys`` verbs)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from modelport.cli.application import Application
from modelport.tenancy.keys import parse_key


def key_path(key: str) -> str:
    """``/api/keys/<id>`` for a key id, or for a whole key (its id is read from it)."""
    parsed = parse_key(key)
    return f"/api/keys/{quote(parsed.key_id if parsed else key, safe='')}"


def print_issued(app: Application, body: dict[str, Any], verb: str) -> None:
    """A new key: the only time its secret is shown."""
    if app.terminal.as_json:
        app.terminal.json(body)
        return
    t = app.terminal
    t.success(f"{verb} key {body['id']} ({body['name']}) for {body['principal']}")
    if body.get("expires_at"):
        t.info(f"expires_at: {body['expires_at']}")
    if body.get("scopes") is not None:
        t.info("scopes: " + (", ".join(body["scopes"]) or "(none)"))
    t.warn("Store this key now; it is not shown again:")
    t.out.print(body["key"], highlight=False, soft_wrap=True)
