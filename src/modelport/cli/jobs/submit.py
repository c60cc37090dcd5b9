"""``modelport jobs submit TARGET INPUTS``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.inputs import oip_tensors, read_inputs
from modelport.cli.jobs.output import print_job


def _renames(values: tuple[str, ...]) -> dict[str, str] | None:
    found = {}
    for value in values:
        old, sep, new = value.partition("=")
        if not sep or not old or not new:
            raise click.BadParameter(f"expected OLD=NEW, got {value!r}")
        found[old] = new
    return found or None


@click.command()
@click.argument("target")
@click.argument("inputs", required=False)
@click.option(
    "--input", "named", multiple=True, help="NAME=FILE.npy or NAME=JSON (repeat for several)."
)
@click.option("--select", multiple=True, help="An output to keep (repeat; default: all).")
@click.option("--rename", multiple=True, help="OLD=NEW: rename an output (repeat).")
@click.option("--webhook", default=None, help="A URL called when the job ends.")
@click.option("--idempotency-key", default=None, help="Submitting again answers the same job.")
@click.pass_obj
def submit(
    app: Application,
    target: str,
    inputs: str | None,
    named: tuple[str, ...],
    select: tuple[str, ...],
    rename: tuple[str, ...],
    webhook: str | None,
    idempotency_key: str | None,
) -> None:
    """Queue a job on TARGET (owner/name[:version], or an endpoint's name) with INPUTS,
    read as `modelport infer` reads them: a JSON object by input name
    ('{"x": [[1, 2]]}'), an Open Inference Protocol request or its list of tensors, a
    .json or .npy file (one-input models), or - for stdin. Lists take the datatypes the
    target declares."""
    tensors = oip_tensors(app.client, target, read_inputs(app.client, target, inputs, named))
    job = app.client.jobs.submit(
        target,
        tensors,
        select=list(select) or None,
        rename=_renames(rename),
        webhook=webhook,
        idempotency_key=idempotency_key,
    )
    if app.terminal.as_json:
        app.terminal.json(job.raw)
        return
    print_job(app, job)
    app.terminal.info(f"follow it: modelport jobs watch {job.id}")
