"""A routed call from the playground: the task alias (``route:<task>``) and preferences as
a person types them, made into the ``/v2`` request's ``parameters.route`` (checked here
first, so a typo gets a clear message), and the version that served the call, as the
answer names it (``model_name``, ``model_version``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from modelport.console.limits_pages import BadAmount, micros_of
from modelport.errors import InvalidInput

BAD_ROUTE = "invalid_route"
ROUTE_PREFIX = "route:"
"""What a task alias starts with (``/v2/models/route:<task>/infer``)."""
TASK_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""A task an alias may name (the API's rule: lower case)."""
PREFER = ("best", "cheapest", "fastest")
ROUTE_FIELD = "route"
"""The form's checkbox: call the model's task rather than the model."""


@dataclass(frozen=True)
class RouteForm:
    """The preferences as the form shows them (text as typed)."""

    on: bool = False
    prefer: str = "best"
    max_price: str = ""
    """Dollars a reference call may cost at most (the API takes micro-dollars)."""
    max_latency_ms: str = ""
    min_score: str = ""


def route_task(task: object) -> str | None:
    """The task alias a model's page offers (its catalog task), None when it has none
    an alias may name."""
    return task if isinstance(task, str) and TASK_RE.match(task) else None


def route_form(form: dict[str, str] | None) -> RouteForm:
    """The routing part of a submitted playground form (the defaults on a fresh page)."""
    if form is None:
        return RouteForm()
    return RouteForm(
        on=form.get(ROUTE_FIELD) == "1",
        prefer=form.get("prefer", "best").strip() or "best",
        max_price=form.get("max_price", "").strip(),
        max_latency_ms=form.get("max_latency_ms", "").strip(),
        min_score=form.get("min_score", "").strip(),
    )


def route_preferences(typed: RouteForm) -> dict[str, Any]:
    """The API's ``route`` object; 400 ``invalid_route`` naming the field that is not a
    preference the API would take."""
    if typed.prefer not in PREFER:
        raise InvalidInput(
            f"prefer must be one of {', '.join(PREFER)}", code=BAD_ROUTE, field="prefer"
        )
    route: dict[str, Any] = {"prefer": typed.prefer}
    if typed.max_price:
        try:
            route["max_price"] = micros_of(typed.max_price)
        except BadAmount:
            raise InvalidInput(
                "max price: give dollars such as 0.01, at most 6 decimals",
                code=BAD_ROUTE,
                field="max_price",
            ) from None
    if typed.max_latency_ms:
        route["max_latency_ms"] = _number(typed.max_latency_ms, "max_latency_ms", positive=True)
    if typed.min_score:
        route["min_score"] = _number(typed.min_score, "min_score", positive=False)
    return route


def _number(text: str, field: str, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")) or (positive and value <= 0):
        raise InvalidInput(
            f"{field} must be a {'positive ' if positive else ''}number",
            code=BAD_ROUTE,
            field=field,
        )
    return value


def served_by(answer: dict[str, Any]) -> tuple[str, str] | None:
    """The model and version that served a routed ``/v2`` answer (None if it names none)."""
    model, version = answer.get("model_name"), answer.get("model_version")
    if isinstance(model, str) and isinstance(version, str) and "/" in model:
        return model, version
    return None
