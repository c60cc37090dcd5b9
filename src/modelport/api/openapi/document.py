"""``/api/openapi.json`` made true to the server: FastAPI generates the operations from the
routes; ``describe_api`` then states what FastAPI cannot know.

- Errors are RFC 9457 problems (``Problem``), never FastAPI's ``422 HTTPValidationError``:
  the server answers a request that fails validation with 400 ``invalid_request``.
- The error responses every ``/api`` operation can give are added to each, by rule:
  400 (a parameter or the body is invalid), 401 and 403 (every ``/api`` operation needs
  an API key), 404 (the path, a query parameter or the body names something), 409 and
  429 (changes can conflict with the current state and count against the caller's rate
  limit), 413 (a body over the configured limit). A route declares the others it can give
  with ``problem.problems()`` in its decorator (402, 416, 503, ...).
- ``securitySchemes``: the bearer API key (an API key, or the admin key), and the metrics
  token that only opens ``/metrics``.
- Each operation's id and summary come from ``operations.OPERATIONS``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from modelport.api.openapi.operations import OPERATIONS, TAGS
from modelport.api.openapi.problem import Problem, problem_response

API_KEY = "apiKey"
METRICS_TOKEN = "metricsToken"
SECURITY_SCHEMES = {
    API_KEY: {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`mp_...`, from `POST /api/keys` or `modelport keys "
        "create`) or the installation's admin key (`MODELPORT_ADMIN_KEY`), sent as "
        "`Authorization: Bearer <key>`.",
    },
    METRICS_TOKEN: {
        "type": "http",
        "scheme": "bearer",
        "description": "The scraper's token (`MODELPORT_METRICS_TOKEN`): it opens `/metrics` "
        "and nothing else.",
    },
}
_MUTATING = frozenset({"post", "put", "patch", "delete"})
_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
_PATH_PARAM = re.compile(r"\{[^}]+\}")
# Query parameters that name something that may not exist (or not be visible): 404.
_REFERENCES = frozenset({"tenant", "publisher", "owner", "model", "member", "endpoint"})


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses every operation like this one can answer (see the module's
    docstring)."""
    if path == "/metrics":
        return [401, 403]
    if not path.startswith("/api/"):
        return []
    statuses = [400, 401, 403]
    has_body = "requestBody" in operation
    names = {p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query"}
    if _PATH_PARAM.search(path) or (has_body and method in _MUTATING) or names & _REFERENCES:
        statuses.append(404)
    if method in _MUTATING:
        statuses += [409, 429]
    if has_body:
        statuses.append(413)
    return statuses


def describe_api(generated: dict[str, Any]) -> dict[str, Any]:
    """The document FastAPI generated, corrected and completed (a new dict)."""
    doc = copy.deepcopy(generated)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in _VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    components["securitySchemes"] = SECURITY_SCHEMES
    doc["tags"] = TAGS
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            _describe_operation(method, path, operation)
    return doc


def _describe_operation(method: str, path: str, operation: dict[str, Any]) -> None:
    named = OPERATIONS.get((method, path))
    if named is not None:
        operation["operationId"] = named.id
        operation["summary"] = named.summary
    if "tags" in operation:
        operation["tags"] = list(dict.fromkeys(operation["tags"]))
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)
    for status in error_statuses(method, path, operation):
        responses.setdefault(str(status), problem_response(status))
    if method == "head":  # the status and headers of the GET, never a body
        for response in responses.values():
            response.pop("content", None)
    if path.startswith("/api/"):
        operation["security"] = [{API_KEY: []}]
    elif path == "/metrics":
        operation["security"] = [{METRICS_TOKEN: []}, {API_KEY: []}]
    operation["responses"] = dict(sorted(responses.items()))
