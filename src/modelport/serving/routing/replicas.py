"""Where a version runs: the replicas the router hands the dispatcher.

In one process every version is hosted by the same model host, but each is loaded
and executed on its own: a version whose executions fail (a bad model) must open
its own circuit breaker, not one that would take every other version of the host
down with it. ``PerVersionReplicas`` therefore gives each version its own backend
object, named ``<prefix>:<owner/name>:<version>`` (the name breakers are kept by
and provenance reports).
"""

from __future__ import annotations

from collections.abc import Callable

from modelport.serving.backends.base import Backend
from modelport.serving.types import VersionRef


class PerVersionReplicas:
    def __init__(self, make: Callable[[str], Backend], *, prefix: str = "local") -> None:
        """``make(name)`` builds the backend for one version, under that name."""
        self._make = make
        self._prefix = prefix
        self._made: dict[str, Backend] = {}

    def __call__(self, version: VersionRef) -> tuple[Backend, ...]:
        name = f"{self._prefix}:{version.ref}"
        backend = self._made.get(name)
        if backend is None:
            backend = self._made[name] = self._make(name)
        return (backend,)
