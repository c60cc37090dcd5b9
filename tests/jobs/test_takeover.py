"""A runner whose lease was taken over: its attempt is cancelled at its next heartbeat,
so the model runs once for the stage, on the runner that owns the job now."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from modelport.clock import ManualClock
from modelport.jobs.stages import InferStage, StageContext
from modelport.jobs.types import JobState, StreamedOutput
from tests.jobs.conftest import AheadClock, Jobs
from tests.polling import eventually

LEASE = 30.0


@dataclass
class GatedModel:
    """The infer stage behind a gate: ``entered`` counts attempts, ``ran`` the model runs
    (attempts past the gate); ``cancelled`` is set when an attempt is cancelled."""

    gate: threading.Event = field(default_factory=threading.Event)
    entered: int = 0
    ran: int = 0
    cancelled: threading.Event = field(default_factory=threading.Event)

    async def run(self, context: StageContext) -> bytes | StreamedOutput:
        self.entered += 1
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.ran += 1
        return await InferStage().run(context)


def test_a_taken_over_attempt_is_cancelled_and_the_model_runs_once(jobs: Jobs) -> None:
    model = GatedModel()
    jobs.register("gated", model)
    job_id = jobs.submit(pipeline=[{"name": "infer", "implementation": "gated"}]).json()["id"]
    clock = ManualClock()
    stale = jobs.runner(clock=clock, lease=LEASE)
    stale.start()
    taker = None
    try:
        assert eventually(lambda: model.entered == 1 and clock.parked >= 1)  # heartbeat waits
        # The stale runner stalls past its lease (its clock does not move): another takes
        # the job over and runs the stage itself.
        taker = jobs.runner(clock=AheadClock(LEASE + 1), lease=LEASE)
        taker.start()
        assert eventually(lambda: model.entered == 2)
        assert not model.cancelled.is_set()
        clock.advance(LEASE / 3)  # the stale runner's next heartbeat: refused
        assert model.cancelled.wait(30)
        assert eventually(lambda: not stale.busy())
        model.gate.set()
        assert eventually(lambda: jobs.services.jobs.get(None, job_id).finished)
    finally:
        stale.stop()
        if taker is not None:
            taker.stop()
    job = jobs.services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED and job.lease_generation == 2
    assert model.ran == 1  # the stale attempt never reached the model
    assert job.stages[0].attempts == 2 and job.stages[0].output_digest == job.output_digest
    assert len(jobs.platform.entries()) == 1
