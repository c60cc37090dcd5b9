"""modelport: a self-hosted model marketplace and serving platform.

``modelport.Client`` and ``modelport.AsyncClient`` (the Python client) are imported on
first use, so importing ``modelport`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelport.errors import ModelportError

if TYPE_CHECKING:
    from modelport.client import AsyncClient, Client

__version__ = "0.1.0"

__all__ = ["AsyncClient", "Client", "ModelportError", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Client", "AsyncClient"):
        from modelport import client

        return getattr(client, name)
    raise AttributeError(f"module 'modelport' has no attribute {name!r}")
