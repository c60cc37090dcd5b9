"""Count and time every HTTP request by method, route template and status
(``observability.http_metrics``): the outermost ASGI layer, so that requests refused by
the inference lane, the body timeout or the hygiene checks count too.

The route is the template the request matched (``/api/models/{owner}/{name}``), found by
``RouteTemplates`` from the path: raw paths would give one series per model, id or typo.
"""

from __future__ import annotations

import re
from time import perf_counter

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
    def of(cls, routes: list[BaseRoute], extra: list[str]) -> RouteTemplates:
        """The templates of ``routes`` (the application's own, with a ``path``) and
        ``extra`` (the documented ones, for routes behind included routers)."""
        templates = list(extra)
        prefixes = []
        for route in routes:
            if isinstance(route, Mount):
                prefixes.append(route.path)
            elif isinstance(getattr(route, "path", None), str):
                templates.append(route.path)  # type: ignore[attr-defined]
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
