"""Jobs fixtures: the metering test platform (tenant acme publishing acme/adder, tenant
beta with a consumer key) with no runner of its own, and runners a test drives."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from modelport.clock import SystemClock
from modelport.errors import Unavailable
from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobRunner
from modelport.jobs.stages import Stage, StageContext, StageServices
from modelport.jobs.types import StreamedOutput
from tests.metering.conftest import ADDER_BODY, Platform, make_platform

INPUTS = ADDER_BODY["inputs"]


class AheadClock(SystemClock):
    """The system clock, ``seconds`` ahead: a runner that sees leases as expired."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def now(self) -> datetime:
        return super().now() + timedelta(seconds=self.seconds)


@dataclass
class Counting:
    """Wraps a stage: counts its runs, fails its first ``fail`` runs, and (with a gate)
    waits for the gate before answering."""

    inner: Stage | None = None
    fail: int = 0
    runs: int = 0
    gate: threading.Event | None = None
    entered: threading.Event = field(default_factory=threading.Event)

    async def run(self, context: StageContext) -> bytes | StreamedOutput:
        self.runs += 1
        self.entered.set()
        if self.gate is not None:
            while not self.gate.is_set():
                await asyncio.sleep(0.01)
        if self.runs <= self.fail:
            raise Unavailable("not yet", code="flaky")
        if self.inner is None:
            return await context.read(context.input_digest)  # a pass-through
        return await self.inner.run(context)


@dataclass
class Jobs:
    platform: Platform

    @property
    def services(self) -> Any:
        return self.platform.services

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.platform.key}"}

    def submit(self, headers: dict[str, str] | None = None, **body: Any) -> Any:
        body.setdefault("target", {"model": "acme/adder"})
        if "input_digest" not in body:
            body.setdefault("inputs", INPUTS)
        extra = body.pop("extra_headers", {})
        return self.platform.client.post(
            "/api/jobs", json=body, headers={**(headers or self.headers), **extra}
        )

    def get(self, job_id: str, headers: dict[str, str] | None = None) -> Any:
        return self.platform.client.get(f"/api/jobs/{job_id}", headers=headers or self.headers)

    def register(self, name: str, stage: Stage) -> None:
        self.services.jobs.stages.register(name, stage)

    def runner(
        self, clock: Any = None, concurrency: int = 4, lease: float | None = None
    ) -> JobRunner:
        services = self.services
        queue = JobQueue(
            services.database,
            now=(clock or SystemClock()).now,
            lease_seconds=lease or services.settings.jobs.lease_seconds,
        )
        return JobRunner(
            queue,
            services.jobs.stages,
            StageServices(blobs=services.blobs, inference=services.inference),
            concurrency=concurrency,
            poll_seconds=0.05,
            clock=clock,
            holds=services.job_runner.holds,
        )

    def drain(self, runner: JobRunner | None = None) -> None:
        asyncio.run((runner or self.runner()).drain())


@pytest.fixture
def jobs(tmp_path: Path, database_url: str) -> Iterator[Jobs]:
    platform = make_platform(tmp_path / "home", database_url, job_runner_concurrency=0)
    yield Jobs(platform)
    platform.close_client()
    platform.services.close()
