"""The ``modelport`` command: ``modelport <group> <verb>``, one module per verb."""

from __future__ import annotations

import click

from modelport import __version__
from modelport.cli.application import Application
from modelport.cli.failures import PoliteGroup
from modelport.cli.output_flags import add_output_flags


@click.group(cls=PoliteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="MODELPORT_URL",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="Server to talk to [env: MODELPORT_URL].",
)
@click.option(
    "--api-key",
    envvar="MODELPORT_API_KEY",
    default="",
    help="Bearer key for the server [env: MODELPORT_API_KEY].",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--wide",
    is_flag=True,
    help="Never shorten a table's cells, even on a terminal (piped output never is).",
)
@click.option("--debug", is_flag=True, help="Show the traceback of a failure instead of one line.")
@click.version_option(__version__, prog_name="modelport")
@click.pass_context
def modelport(
    ctx: click.Context, url: str, api_key: str, as_json: bool, wide: bool, debug: bool
) -> None:
    """Self-hosted model marketplace and serving platform.

    A failure prints one line saying what to check (exit status 1 when the server refused,
    3 when it could not be reached); --debug shows the traceback. --json and --wide may
    also follow the verb."""
    ctx.obj = Application(url=url, api_key=api_key, as_json=as_json, wide=wide, debug=debug)


def _register() -> None:
    from modelport.cli import migrate, serve

    modelport.add_command(serve.serve)
    modelport.add_command(migrate.migrate)
    for name in ("push", "pull", "demo", "infer"):
        try:
            module = __import__(f"modelport.cli.{name}", fromlist=[name])
        except ImportError:
            continue
        modelport.add_command(getattr(module, name))
    groups = ["models", "versions", "alias", "formats", "tenants", "keys", "billing"]
    groups += ["endpoints", "prices", "limits", "grants", "jobs", "secrets", "datasets"]
    for group in groups:
        try:
            module = __import__(f"modelport.cli.{group}", fromlist=[group])
        except ImportError:
            continue
        modelport.add_command(getattr(module, group))
    for command in modelport.commands.values():
        add_output_flags(command)


_register()


def main() -> None:
    modelport(prog_name="modelport")
