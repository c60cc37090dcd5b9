"""``modelport jobs submit TARGET INPUTS``, or ``--dataset owner/name:version --split S``."""

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
@click.option(
    "--dataset",
    default=None,
    metavar="OWNER/NAME:VERSION",
    help="A dataset version whose split is the input (a tensor batch); with --split.",
)
@click.option("--split", default=None, help="The split of --dataset whose rows are the input.")
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
    dataset: str | None,
    split: str | None,
    select: tuple[str, ...],
    rename: tuple[str, ...],
    webhook: str | None,
    idempotency_key: str | None,
) -> None:
    """Queue a job on TARGET (owner/name[:version], or an endpoint's name) with INPUTS,
    read as `modelport infer` reads them: a JSON object by input name
    ('{"x": [[1, 2]]}'), an Open Inference Protocol request or its list of tensors, a
    .json or .npy file (one-input models), or - for stdin. Lists take the datatypes the
    target declares. With --dataset and --split, the split's feature columns are the rows
    of a tensor batch instead (no INPUTS)."""
    if dataset is not None or split is not None:
        if dataset is None or split is None:
            raise click.UsageError("--dataset and --split go together")
        if inputs is not None or named:
            raise click.UsageError("give INPUTS (or --input) or --dataset, not both")
        tensors = None
    else:
        tensors = oip_tensors(app.client, target, read_inputs(app.client, target, inputs, named))
    job = app.client.jobs.submit(
        target,
        tensors,
        input_dataset=dataset,
        split=split,
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
