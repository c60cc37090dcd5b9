"""A template version's messages with a call's values put in. Pure.

Substitution is one pass over each message's content: a value is inserted as it is and
never read again, so a value holding ``{{other}}`` stays that text. Nothing is
evaluated: no expressions, filters or includes (a template is a tenant's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelport.errors import InvalidInput
from modelport.templates.types import PLACEHOLDER, TemplateManifest


def render(manifest: TemplateManifest, values: Mapping[str, Any]) -> list[dict[str, str]]:
    """The messages (``{"role", "content"}``) with ``values`` in; 400
    ``unknown_variable``, ``missing_variable`` or ``invalid_variable``."""
    declared = {v.name: v for v in manifest.variables}
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise InvalidInput(
            f"the template has no variable {unknown[0]!r}; it has {sorted(declared)}",
            code="unknown_variable",
            variable=unknown[0],
        )
    resolved: dict[str, str] = {}
    for name, variable in declared.items():
        value = values.get(name, variable.default)
        if value is None:
            raise InvalidInput(
                f"variable {name!r} is required", code="missing_variable", variable=name
            )
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise InvalidInput(
                f"variable {name!r} must be a string or a number",
                code="invalid_variable",
                variable=name,
            )
        text = str(value)
        if len(text) > variable.max_length:
            raise InvalidInput(
                f"variable {name!r} is longer than {variable.max_length} characters",
                code="invalid_variable",
                variable=name,
            )
        resolved[name] = text
    return [
        {
            "role": message.role,
            "content": PLACEHOLDER.sub(lambda m: resolved[m.group(1)], message.content),
        }
        for message in manifest.messages
    ]
