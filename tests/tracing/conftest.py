"""Traced platforms: services built with a tracer whose spans land in the SDK's
in-memory exporter, and helpers that read a trace back as a tree."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.observability.tracing import Tracing
from tests.api_v2.conftest import AUTH, Publisher
from tests.conftest import ADMIN_KEY
from tests.databases import migrated_sqlite
from tests.serving.conftest import LOOPBACK_BACKENDS


class Traced:
    """A platform whose spans are kept: ``spans()`` reads what ended so far."""

    def __init__(self, client: TestClient, services: Services, exporter: InMemorySpanExporter):
        self.client = client
        self.services = services
        self.exporter = exporter
        self.publisher = Publisher(client, services)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        self.exporter.clear()


TracedFactory = Callable[..., Traced]


def in_memory_tracing() -> tuple[Tracing, InMemorySpanExporter]:
    """A tracer that keeps every span (sampled always), exported as each ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider.get_tracer("modelport"), shutdown=provider.shutdown), exporter


@pytest.fixture
def make_traced(tmp_path: Path) -> Iterator[TracedFactory]:
    """Services on SQLite with settings overridden and tracing on (``traced=False``: off)."""
    opened: list[Traced] = []

    def factory(*, traced: bool = True, **overrides: Any) -> Traced:
        home = tmp_path / f"home{len(opened)}"
        overrides.setdefault("backend_allow_hosts", LOOPBACK_BACKENDS)
        settings = Settings(
            home=home,
            database_url=migrated_sqlite(home / "modelport.db"),
            admin_key=ADMIN_KEY,
            auto_migrate=True,
            runtime_intra_op_threads=1,
            **overrides,
        )
        tracing, exporter = in_memory_tracing()
        services = build_services(settings, tracing=tracing if traced else Tracing())
        client = TestClient(create_app(services), headers=dict(AUTH))
        client.__enter__()
        platform = Traced(client, services, exporter)
        opened.append(platform)
        return platform

    yield factory
    for platform in opened:
        platform.client.__exit__(None, None, None)
        platform.services.close()


@pytest.fixture
def traced(make_traced: TracedFactory) -> Traced:
    return make_traced()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    """``parent``'s direct children, in the order they started."""
    assert parent.context is not None
    found = [
        span
        for span in spans
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda span: span.start_time or 0)


def trace_of(spans: Sequence[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    """Every span of ``root``'s trace."""
    assert root.context is not None
    return [
        s for s in spans if s.context is not None and s.context.trace_id == root.context.trace_id
    ]
