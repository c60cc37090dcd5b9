"""The registry's errors that other layers raise too (an inference call for a model the
caller may not see answers the very 404 of a missing one)."""

from __future__ import annotations

from modelport.errors import NotFound


def model_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"model {owner}/{name} not found", code="model_not_found", model=f"{owner}/{name}"
    )
