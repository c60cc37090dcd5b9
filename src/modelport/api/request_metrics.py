"""Count and time every HTTP request by method, route template and status
(``observability.http_metrics``): the outermost ASGI layer, so that requests refused by
the inference lane, the body timeout or the hygiene checks count too.

The route is the template the request matched (``/api/models/{owner}/{name}``), found by
``RouteTemplates`` from the path: raw paths would give one series per model, id or typo.
"""

from __future__ import annotations

import re
from time import perf_counter
from typing import Any

from starlette.routing import BaseRoute, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.observability.http_metrics import UNMATCHED, HttpMetrics

_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")
_CACHED = 4096


class RouteTemplates:
    """Which route template a path belongs to, from the templates the application serves
    (most literal first, so ``/v2/models/{name}/ready`` wins over
    ``/v2/models/{owner}/{name}``). Results are cached per path, up to a bound."""

    def __init__(self, templates: list[str], prefixes: list[str]) -> None:
        def literal(template: str) -> tuple[int, int]:
            return (-len(_PARAM.sub("", template)), template.count("/"))

        self._patterns = [
            (re.compile(_regex(t) + "$"), t) for t in sorted(set(templates), key=literal)
        ]
        self._prefixes = sorted(set(prefixes), key=len, reverse=True)
        self._cache: dict[str, str] = {}

    @classmethod
    def of(cls, routes: list[BaseRoute]) -> RouteTemplates:
        """The templates of ``routes`` as documented (``{name}``, without a converter),
        those of included routers with their prefixes, and the prefixes of mounts."""
        templates: list[str] = []
        prefixes: list[str] = []
        _collect(routes, "", templates, prefixes)
        return cls(templates, prefixes)

    def template(self, path: str) -> str:
        found = self._cache.get(path)
        if found is not None:
            return found
        found = next((t for pattern, t in self._patterns if pattern.match(path)), None)
        if found is None:
            prefix = next((p for p in self._prefixes if path.startswith(p + "/")), None)
            return UNMATCHED if prefix is None else prefix + "/{path}"
        if len(self._cache) < _CACHED:
            self._cache[path] = found
        return found


def _regex(template: str) -> str:
    parts = _PARAM.split(template)
    # split gives literal, name, literal, name, ...: names become one path segment
    return "".join(re.escape(part) if i % 2 == 0 else "[^/]+" for i, part in enumerate(parts))


def _collect(routes: list[Any], prefix: str, templates: list[str], prefixes: list[str]) -> None:
    for route in routes:
        if isinstance(route, Mount):
            prefixes.append(prefix + route.path)
        elif hasattr(route, "original_router") and hasattr(route, "include_context"):
            # FastAPI includes a router lazily (its routes stay on the router): walk it.
            inner = prefix + route.include_context.prefix
            router = route.original_router
            _collect(
                [*router.routes, *getattr(router, "_low_priority_routes", [])],
                inner,
                templates,
                prefixes,
            )
        elif isinstance(getattr(route, "path_format", None), str):
            templates.append(prefix + route.path_format)


class RequestMetrics:
    """ASGI middleware observing each HTTP request in ``HttpMetrics``."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics, templates: RouteTemplates) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        status = 500  # an exception before the answer started

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            route = self.templates.template(scope["path"])
            self.metrics.observe(scope["method"], route, status, perf_counter() - started)
