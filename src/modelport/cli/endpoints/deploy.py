"""``modelport endpoints deploy NAME REF[=WEIGHT]... [--canary]``."""

from __future__ import annotations

import click

from modelport.cli.application import Application
from modelport.cli.endpoints.output import print_deployment
from modelport.client.endpoints import Canary


def _split(value: str) -> tuple[str, int | None]:
    ref, sep, weight = value.partition("=")
    if not sep:
        return ref, None
    if not weight.isdigit():
        raise click.BadParameter(f"{value!r}: the weight after '=' is a number from 0 to 100")
    return ref, int(weight)


def _steps(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter("comma-separated shares, such as 5,25,50,100") from None


@click.command()
@click.argument("name")
@click.argument("refs", nargs=-1, required=True)
@click.option(
    "--canary", is_flag=True, help="Two versions: move traffic to the second step by step."
)
@click.option("--steps", callback=_steps, help="Canary shares, e.g. 5,25,50,100.")
@click.option("--interval", type=float, default=None, help="Canary seconds between steps.")
@click.option("--shadow", default=None, help="owner/name:V to mirror traffic to, unanswered.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the rollout.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait.")
@click.pass_obj
def deploy(
    app: Application,
    name: str,
    refs: tuple[str, ...],
    canary: bool,
    steps: list[int] | None,
    interval: float | None,
    shadow: str | None,
    wait: bool,
    timeout: float,
) -> None:
    """Deploy versions to endpoint NAME: REFS are owner/name:V, the stable one first. One
    version takes all the traffic; several split it by weight (owner/name:V=90
    owner/name:W=10); --canary moves it to the second version in steps, watched."""
    parsed = [_split(value) for value in refs]
    weights = [w for _, w in parsed]
    given = [w for w in weights if w is not None]
    if given and len(given) != len(weights):
        raise click.BadParameter("give every version a weight, or none", param_hint="REFS")
    policy = Canary(steps=steps, interval_seconds=interval) if canary else None
    try:
        deployment = app.client.endpoints.deploy(
            name,
            [ref for ref, _ in parsed],
            weights=given or None,
            canary=policy,
            shadow=shadow,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="REFS") from None
    if wait:
        deployment = app.client.endpoints.wait(name, deployment.id, timeout=timeout)
    if app.terminal.as_json:
        app.terminal.json(deployment.raw)
    else:
        print_deployment(app, deployment)
    if deployment.state == "failed":
        raise SystemExit(1)
