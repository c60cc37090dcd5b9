"""A chat request that names a prompt template (modelport's extension of OpenAI's body):

    {"model": "...", "template": {"ref": "acme/support:3", "variables": {...}},
     "messages": [...]}

The template's rendered messages come first, then the request's own ``messages`` (which
may then be left out). The caller must be allowed to read the template; its refusals
(``template_not_found``, ``missing_variable``...) are the call's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio.to_thread

from modelport.errors import InvalidInput
from modelport.templates.service import TemplateService
from modelport.tenancy.types import Principal


def _refuse(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_template_ref", field="template")


async def with_template(
    templates: TemplateService, principal: Principal, doc: Mapping[str, Any]
) -> Mapping[str, Any]:
    """``doc`` with its ``template`` rendered into ``messages`` (``doc`` when it names none)."""
    spec = doc.get("template")
    if spec is None:
        return doc
    if not isinstance(spec, dict) or not isinstance(spec.get("ref"), str):
        raise _refuse("template must be an object with a ref: owner/name:version")
    variables = spec.get("variables", {})
    if not isinstance(variables, dict) or set(spec) - {"ref", "variables"}:
        raise _refuse("template takes a ref and an object of variables, nothing else")
    given = doc.get("messages") or []
    if not isinstance(given, list):
        raise InvalidInput("messages must be a list", code="invalid_request", field="messages")
    _, rendered = await anyio.to_thread.run_sync(
        templates.render, principal, spec["ref"], variables
    )
    expanded = {key: value for key, value in doc.items() if key != "template"}
    expanded["messages"] = [*rendered, *given]
    return expanded
