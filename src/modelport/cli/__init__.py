"""The ``modelport`` command: ``modelport <group> <verb>``, one module per verb."""

from __future__ import annotations

import click

from modelport import __version__
from modelport.cli.application import Application


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@click.version_option(__version__, prog_name="modelport")
@click.pass_context
def modelport(ctx: click.Context, url: str, api_key: str, as_json: bool) -> None:
    """Self-hosted model marketplace and serving platform."""
    ctx.obj = Application(url=url, api_key=api_key, as_json=as_json)


def _register() -> None:
    from modelport.cli import migrate, serve

    modelport.add_command(serve.serve)
    modelport.add_command(migrate.migrate)
    for name in ("push", "pull", "demo"):
        try:
            module = __import__(f"modelport.cli.{name}", fromlist=[name])
        except ImportError:
            continue
        modelport.add_command(getattr(module, name))
    for group in ("models", "versions", "alias", "formats", "tenants", "keys", "billing"):
        try:
            module = __import__(f"modelport.cli.{group}", fromlist=[group])
        except ImportError:
            continue
        modelport.add_command(getattr(module, group))


_register()


def main() -> None:
    modelport(prog_name="modelport")
