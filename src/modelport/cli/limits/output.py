"""How limits are printed."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.client.types import Limits

SCOPE = click.Choice(["tenant", "key", "model"])


def print_limits(app: Application, limits: Limits) -> None:
    def shown(value: int | None) -> str:
        return "unlimited" if value is None else str(value)

    app.terminal.info(
        f"{limits.scope_type} {limits.scope_id}: rpm {shown(limits.rpm)}, "
        f"tpm {shown(limits.tpm)}, concurrency {shown(limits.concurrency)}, "
        f"jobs {shown(limits.jobs)}, job concurrency {shown(limits.job_concurrency)}"
    )
