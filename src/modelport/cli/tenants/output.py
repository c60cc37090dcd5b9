"""How tenants and members are printed (shared by the ``tenants`` verbs)."""

from __future__ import annotations

from typing import Any

from modelport.cli.application import Application


def print_tenant(app: Application, tenant: dict[str, Any]) -> None:
    t = app.terminal
    t.info(f"[bold]{tenant['slug']}[/bold]  {tenant['name']}")
    t.info(f"require_separation: {str(tenant['require_separation']).lower()}")
    t.info(f"no_cache: {str(tenant.get('no_cache', False)).lower()}")
    t.info(f"shared_cache: {str(tenant.get('shared_cache', False)).lower()}")
    t.info(f"tier: {tenant.get('tier', 'standard')}")
    t.info(f"created_at: {tenant['created_at']} by {tenant['created_by']}")
    if tenant.get("suspended_at"):
        t.info(
            f"[red]suspended[/red] since {tenant['suspended_at']}: {tenant['suspension_reason']}"
        )


def print_members(app: Application, members: list[dict[str, Any]]) -> None:
    app.terminal.table(
        ["name", "kind", "roles", "created_at"],
        [[m["name"], m["kind"], ", ".join(m["roles"]), m["created_at"]] for m in members],
    )
