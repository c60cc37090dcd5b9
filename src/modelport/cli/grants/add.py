"""``modelport grants add GRANTEE [--namespace NS] [--model NAME]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application


@click.command()
@click.argument("grantee")
@click.option("--namespace", default=None, help="Default: the caller's tenant.")
@click.option("--model", default=None, help="One model's name in the namespace; default: all.")
@click.pass_obj
def add(app: Application, grantee: str, namespace: str | None, model: str | None) -> None:
    """Let tenant GRANTEE see and call a model of a namespace, or all of them."""
    grant = app.client.grants.add(grantee, namespace=namespace, model=model)
    if app.terminal.as_json:
        app.terminal.json(grant.raw)
        return
    shared = f"{grant.namespace}/{grant.model}" if grant.model else f"{grant.namespace}/*"
    app.terminal.success(f"grant {grant.id}: {shared} shared with {grant.grantee}")
