"""``modelport jobs submit TARGET INPUTS``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from modelport.cli.application import Application
from modelport.cli.jobs.output import print_job


def read_inputs(value: str) -> list[dict[str, Any]]:
    """OIP JSON tensors from a JSON text or a .json file: a list of tensors, or an
    object with ``inputs``."""
    path = Path(value)
    raw = path.read_bytes() if value.endswith(".json") and path.is_file() else value.encode()
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}") from exc
    if isinstance(doc, dict):
        doc = doc.get("inputs")
    if not isinstance(doc, list) or not all(isinstance(item, dict) for item in doc):
        raise click.BadParameter('expected a list of tensors, or {"inputs": [...]}')
    return doc


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
@click.argument("inputs")
@click.option("--select", multiple=True, help="An output to keep (repeat; default: all).")
@click.option("--rename", multiple=True, help="OLD=NEW: rename an output (repeat).")
@click.option("--webhook", default=None, help="A URL called when the job ends.")
@click.option("--idempotency-key", default=None, help="Submitting again answers the same job.")
@click.pass_obj
def submit(
    app: Application,
    target: str,
    inputs: str,
    select: tuple[str, ...],
    rename: tuple[str, ...],
    webhook: str | None,
    idempotency_key: str | None,
) -> None:
    """Queue a job on TARGET (owner/name[:version], or an endpoint's name) with INPUTS
    (Open Inference Protocol JSON tensors: a JSON text or a .json file)."""
    job = app.client.jobs.submit(
        target,
        read_inputs(inputs),
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
