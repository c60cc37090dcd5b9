"""One owner of a process's start and stop: the composition root registers each
long-lived component once, in dependency order; ``running`` starts the serving ones in
that order and stops them in reverse, ``close`` releases the resources in reverse."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Serving:
    name: str
    run: Callable[[], AbstractAsyncContextManager[object]]


@dataclass(frozen=True)
class _Resource:
    name: str
    close: Callable[[], object]


@dataclass
class Lifecycle:
    """The components of one process, each registered once (see the module)."""

    _serving: list[_Serving] = field(default_factory=list)
    _resources: list[_Resource] = field(default_factory=list)
    _running: list[str] = field(default_factory=list)
    _closed: bool = False

    def serve(self, name: str, run: Callable[[], AbstractAsyncContextManager[object]]) -> None:
        """A component that works while the application serves: ``run()`` is entered at
        start-up, after every component registered before it, and left at shutdown,
        before them."""
        self._check_new(name)
        self._serving.append(_Serving(name, run))

    def serve_threads(
        self, name: str, start: Callable[[], object], stop: Callable[[], object]
    ) -> None:
        """A component with its own threads, started and stopped by plain calls."""

        @asynccontextmanager
        async def run() -> AsyncIterator[None]:
            start()
            try:
                yield
            finally:
                stop()

        self.serve(name, run)

    def own(self, name: str, close: Callable[[], object]) -> None:
        """A resource held for the process's life, closed by ``close`` after every
        resource registered after it (which may use it)."""
        self._check_new(name)
        self._resources.append(_Resource(name, close))

    @property
    def names(self) -> list[str]:
        """Every registered component, in registration order."""
        return [s.name for s in self._serving] + [r.name for r in self._resources]

    @property
    def running_components(self) -> list[str]:
        """The serving components started and not yet stopped, in start order."""
        return list(self._running)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Lifecycle]:
        """Start the serving components in order; on leaving (or when one fails to
        start) stop those started, in reverse."""
        async with contextlib.AsyncExitStack() as stack:
            for component in self._serving:
                await stack.enter_async_context(component.run())
                self._running.append(component.name)
                stack.callback(self._running.remove, component.name)
            yield self

    def close(self) -> None:
        """Close the resources in reverse order, once; a close that fails is logged and
        the rest are still closed."""
        if self._closed:
            return
        self._closed = True
        for resource in reversed(self._resources):
            try:
                resource.close()
            except Exception:  # one leak must not become many
                log.exception("closing %s failed", resource.name)

    def _check_new(self, name: str) -> None:
        if name in self.names:
            raise ValueError(f"component {name!r} is registered already")
