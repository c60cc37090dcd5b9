"""Steps the demo takes more than once: announcing a step, creating what may exist,
and moving a version to approved."""

from __future__ import annotations

from typing import Any

from modelport.cli.application import Application


def step(app: Application, text: str) -> None:
    """Announce the next step, as the command a user would type."""
    app.terminal.info(f"\n[bold cyan]▶ {text}[/bold cyan]")


def created(app: Application, response: Any) -> None:
    """Accept 409 (already there from an earlier run) as success."""
    if response.status_code != 409:
        app.check(response)


def approve(app: Application, model: str, version: str) -> None:
    """Move ``model:version`` through validation to approved (a rerun finds it there)."""
    owner, name = model.split("/")
    base = f"/api/models/{owner}/{name}/versions/{version}"
    state = app.check(app.http.get(base))["state"]
    for target, reason in (
        ("validated", "demo: files verified, model loaded, example reproduced"),
        ("approved", "demo: approved for use"),
    ):
        if state in ("candidate", "validated") and state != target:
            step(app, f"modelport versions transition {model}:{version} --to {target}")
            # The client follows a validation answered 202 (still running) to its end.
            state = app.client.versions.transition(f"{model}:{version}", target, reason).state
            app.terminal.success(f"{model}:{version} is {state}")
