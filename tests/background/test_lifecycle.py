"""The one owner of start and stop: components start in the order they were registered
and stop in reverse, a failed start stops what had started, and every resource is closed
even when one fails; the application's lifespan runs the composition root's order."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services
from modelport.background.lifecycle import Lifecycle


def recording(
    events: list[str], name: str, *, fail: bool = False
) -> Callable[[], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def run() -> AsyncIterator[None]:
        if fail:
            raise RuntimeError(f"{name} cannot start")
        events.append(f"start {name}")
        try:
            yield
        finally:
            events.append(f"stop {name}")

    return run


def test_components_start_in_order_and_stop_in_reverse() -> None:
    events: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.serve("a", recording(events, "a"))
    lifecycle.serve_threads("b", lambda: events.append("start b"), lambda: events.append("stop b"))
    lifecycle.serve("c", recording(events, "c"))

    async def main() -> None:
        async with lifecycle.running():
            assert lifecycle.running_components == ["a", "b", "c"]
            events.append("serving")
        assert lifecycle.running_components == []

    asyncio.run(main())
    assert events == ["start a", "start b", "start c", "serving", "stop c", "stop b", "stop a"]


def test_a_component_that_fails_to_start_stops_those_started_before_it() -> None:
    events: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.serve("a", recording(events, "a"))
    lifecycle.serve("b", recording(events, "b", fail=True))
    lifecycle.serve("c", recording(events, "c"))

    async def main() -> None:
        async with lifecycle.running():
            events.append("serving")  # never reached

    with pytest.raises(RuntimeError, match="b cannot start"):
        asyncio.run(main())
    assert events == ["start a", "stop a"]
    assert lifecycle.running_components == []


def test_resources_close_in_reverse_once_and_past_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    closed: list[str] = []
    lifecycle = Lifecycle()
    lifecycle.own("database", lambda: closed.append("database"))

    def broken() -> None:
        raise OSError("socket already gone")

    lifecycle.own("cache", broken)
    lifecycle.own("webhooks", lambda: closed.append("webhooks"))
    with caplog.at_level(logging.ERROR, logger="modelport.background.lifecycle"):
        lifecycle.close()
        lifecycle.close()  # a second close closes nothing again
    assert closed == ["webhooks", "database"]
    assert "closing cache failed" in caplog.text


def test_a_name_is_registered_once() -> None:
    lifecycle = Lifecycle()
    lifecycle.own("database", lambda: None)
    with pytest.raises(ValueError, match="registered already"):
        lifecycle.serve("database", recording([], "database"))


def test_the_application_runs_the_composition_roots_order(services: Services) -> None:
    order = [
        "upload sweeper",
        "metering loops",
        "webhook deliveries",
        "prediction log",
        "prediction retention",
        "prediction sampling",
        "health probes",
        "serving plane",
        "model repository sync",
        "job runner",
        "monitors",
    ]
    assert services.lifecycle.running_components == []
    with TestClient(create_app(services)):
        assert services.lifecycle.running_components == order
    assert services.lifecycle.running_components == []
