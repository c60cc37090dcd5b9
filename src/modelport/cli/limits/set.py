"""``modelport limits set SCOPE_TYPE SCOPE_ID [--rpm N] [--tpm N] [--concurrency N]
[--jobs N] [--job-concurrency N]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.limits.output import SCOPE, print_limits

POSITIVE = click.IntRange(min=1)


@click.command("set")
@click.argument("scope_type", type=SCOPE)
@click.argument("scope_id")
@click.option("--rpm", type=POSITIVE, default=None, help="Requests per minute.")
@click.option("--tpm", type=POSITIVE, default=None, help="Tokens per minute.")
@click.option("--concurrency", type=POSITIVE, default=None, help="Calls in flight at once.")
@click.option(
    "--jobs", type=POSITIVE, default=None, help="A tenant's jobs queued and running at once."
)
@click.option(
    "--job-concurrency", type=POSITIVE, default=None, help="A tenant's jobs running at once."
)
@click.pass_obj
def set_limits(
    app: Application,
    scope_type: str,
    scope_id: str,
    rpm: int | None,
    tpm: int | None,
    concurrency: int | None,
    jobs: int | None,
    job_concurrency: int | None,
) -> None:
    """Replace the limits of a tenant, key or model; a limit not given is lifted.
    --jobs and --job-concurrency: a tenant's only."""
    limits = app.client.limits.set(
        scope_type,
        scope_id,
        rpm=rpm,
        concurrency=concurrency,
        tpm=tpm,
        jobs=jobs,
        job_concurrency=job_concurrency,
    )
    if app.terminal.as_json:
        app.terminal.json(limits.raw)
        return
    print_limits(app, limits)
