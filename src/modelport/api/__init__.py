"""HTTP surfaces. Thin: parse, authenticate, call one service, encode.

Importing a module of this package (``modelport.api.problems``, say) does not build or
import the FastAPI app: ``create_app`` is loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelport.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from modelport.api.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
