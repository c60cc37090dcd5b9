"""``modelport jobs``: submit work that runs in the background, follow, list, cancel."""

from __future__ import annotations

import click

from modelport.cli.jobs.cancel import cancel
from modelport.cli.jobs.list import list_jobs
from modelport.cli.jobs.show import show
from modelport.cli.jobs.submit import submit
from modelport.cli.jobs.watch import watch


@click.group()
def jobs() -> None:
    """Jobs: durable background work on a model or endpoint, run stage by stage."""


jobs.add_command(submit)
jobs.add_command(show)
jobs.add_command(list_jobs)
jobs.add_command(cancel)
jobs.add_command(watch)
