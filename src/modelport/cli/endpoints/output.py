"""How endpoints and deployments are printed (shared by the ``endpoints`` verbs)."""

from __future__ import annotations

from modelport.cli.application import Application
from modelport.client.types import Deployment, Endpoint


def print_endpoint(app: Application, endpoint: Endpoint) -> None:
    t = app.terminal
    t.info(f"[bold]{endpoint.name}[/bold]  tenant: {endpoint.tenant}")
    active = endpoint.active_deployment
    t.info(f"active deployment: {active if active is not None else '(none yet)'}")
    if endpoint.previous_deployment is not None:
        until = endpoint.raw.get("rollback_until")
        t.info(f"previous deployment: {endpoint.previous_deployment} (rollback until {until})")
    for share in endpoint.traffic:
        t.info(f"traffic: {share['weight']}% -> {share['model']}:{share['version']}")


def print_deployment(app: Application, deployment: Deployment) -> None:
    t = app.terminal
    cause = f": {deployment.cause}" if deployment.cause else ""
    t.info(
        f"deployment {deployment.id} of {deployment.endpoint}: {deployment.state}"
        f"{' (ready)' if deployment.ready else ''}{cause}"
    )
    rollout = deployment.rollout
    if rollout.get("policy") == "canary":
        t.info(f"canary: {rollout.get('status')}, step {rollout.get('step')}")
    t.table(
        ["version", "role", "weight", "state", "cause"],
        [
            [f"{v['model']}:{v['version']}", v["role"], v["weight"], v["state"], v.get("cause")]
            for v in deployment.versions
        ],
    )
