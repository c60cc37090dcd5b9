"""``modelport versions load|unload``: put a version into (or out of) the serving host."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.models.refs import model_path, version_path


def _check_ref(app: Application, ref: str) -> None:
    if ":" in ref:
        version_path(app, ref)
    else:
        model_path(app, ref)


@click.command()
@click.argument("ref")
@click.option("--pinned", is_flag=True, help="Never evict it under memory pressure.")
@click.pass_obj
def load(app: Application, ref: str, pinned: bool) -> None:
    """Load REF (owner/name:V, or owner/name for its default version) and wait until it
    is ready to answer."""
    _check_ref(app, ref)
    status = app.client.versions.load(ref, pinned=pinned)
    if app.terminal.as_json:
        app.terminal.json(status.raw)
        return
    phases = ", ".join(f"{k} {v:.0f} ms" for k, v in status.phases.items() if v is not None)
    app.terminal.success(f"{status.model}:{status.version} {status.state.lower()}")
    if phases:
        app.terminal.info(phases)


@click.command()
@click.argument("ref")
@click.pass_obj
def unload(app: Application, ref: str) -> None:
    """Unload REF (owner/name:V), or every loaded version of owner/name."""
    _check_ref(app, ref)
    done = app.client.versions.unload(ref)
    if app.terminal.as_json:
        app.terminal.json(done.raw)
        return
    if not done.versions:
        app.terminal.info(f"{ref}: nothing was loaded")
        return
    app.terminal.success("unloaded " + ", ".join(done.versions))
