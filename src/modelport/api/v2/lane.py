"""The ``/v2`` infer shortcut: which requests the envelope (``api.envelope``) hands
straight to ``routes.infer``, past FastAPI's middleware and router.

Matching an infer path (a model's, a version's, an endpoint's) here costs less than
matching it against every route, and FastAPI's own layers (server errors, exception
telemetry, its body limit) do nothing for an infer call that the envelope does not
do already. Only the routing is short: the request id, hygiene, error rendering,
rate headers and audit are the envelope's, as for every request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from modelport.api.v2.routes import infer

_INFER = re.compile(r"/v2/models/([^/]+)/([^/]+)(?:/versions/([^/]+))?/infer")
_ENDPOINT_INFER = re.compile(r"/v2/models/([^/]+)/infer")


def infer_path_params(path: str) -> dict[str, str] | None:
    """The route's path parameters when ``path`` is a ``/v2`` infer call, else None."""
    if not path.endswith("/infer") or not path.startswith("/v2/models/"):
        return None
    match = _INFER.fullmatch(path)
    if match is None:
        single = _ENDPOINT_INFER.fullmatch(path)  # an endpoint, by its name alone
        return None if single is None else {"name": single.group(1)}
    owner, name, version = match.groups()
    if version is None:
        return {"owner": owner, "name": name}
    return {"owner": owner, "name": name, "version": version}


def infer_shortcut(path: str) -> tuple[Callable[[Request], Any], dict[str, str]] | None:
    """``routes.infer`` and its path parameters for a POST to ``path``, if it is an
    infer call (the envelope's ``Shortcut``)."""
    params = infer_path_params(path)
    return None if params is None else (infer, params)
