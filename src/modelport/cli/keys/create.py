"""``modelport keys create NAME [--tenant T] [--member M] [--scope S...] [--expires-in D]``."""

from __future__ import annotations

import re
from typing import Any

import click

from modelport.cli.application import Application
from modelport.cli.keys.output import print_issued
from modelport.tenancy.policy import ALL_PERMISSIONS

_DURATION = re.compile(r"^(\d+)([smhd]?)$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str) -> int:
    """``90``, ``90s``, ``15m``, ``12h``, ``30d`` → seconds."""
    match = _DURATION.match(value.strip())
    if not match or int(match[1]) == 0:
        raise click.BadParameter("use a positive number with s, m, h or d (e.g. 30d)")
    return int(match[1]) * _SECONDS[match[2]]


@click.command()
@click.argument("name")
@click.option("--tenant", default=None, help="Default: the caller's tenant.")
@click.option("--member", default=None, help="Member or service account; default: the caller.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(sorted(p.value for p in ALL_PERMISSIONS)),
    help="Limit the key to this permission (repeat for several); default: all it holds.",
)
@click.option("--expires-in", default=None, help="Lifetime, e.g. 3600, 12h, 30d.")
@click.pass_obj
def create(
    app: Application,
    name: str,
    tenant: str | None,
    member: str | None,
    scopes: tuple[str, ...],
    expires_in: str | None,
) -> None:
    """Create an API key called NAME; it is printed once."""
    body: dict[str, Any] = {"name": name, "tenant": tenant, "member": member}
    if scopes:
        body["scopes"] = list(scopes)
    if expires_in is not None:
        body["expires_in_seconds"] = parse_duration(expires_in)
    print_issued(app, app.check(app.http.post("/api/keys", json=body)), "created")
