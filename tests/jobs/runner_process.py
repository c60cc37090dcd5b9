"""A process that only runs jobs, for the test that kills one in the middle of a stage.

Its stages write each run to the effects file (``<stage> <pid>``); with
``JOBS_TEST_PAUSE`` set, the infer stage, once its metered call is done, writes
``paused <pid>`` and waits forever: the test kills the process there, after the call
was charged and before the stage was recorded done.

Run as ``python -m tests.jobs.runner_process``; settings from ``MODELPORT_*``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from modelport.app import build_services
from modelport.config import Settings
from modelport.jobs.stages import InferStage, PostprocessStage, StageContext, ValidateStage
from modelport.jobs.types import StreamedOutput


class Effect:
    """A stage that notes each of its runs in the effects file."""

    def __init__(self, name: str, inner: object, pause: bool = False) -> None:
        self.name = name
        self.inner = inner
        self.pause = pause
        self.file = Path(os.environ.get("JOBS_TEST_EFFECTS", os.devnull))

    def note(self, text: str) -> None:
        with self.file.open("a") as out:
            out.write(f"{text} {os.getpid()}\n")
            out.flush()
            os.fsync(out.fileno())

    async def run(self, context: StageContext) -> bytes | StreamedOutput:
        output: bytes | StreamedOutput = await self.inner.run(context)  # type: ignore[attr-defined]
        self.note(self.name)
        if self.pause:
            self.note("paused")
            await asyncio.Event().wait()
        return output


def stages() -> dict[str, Effect]:
    pause = bool(os.environ.get("JOBS_TEST_PAUSE"))
    return {
        "effect-validate": Effect("validate", ValidateStage()),
        "effect-infer": Effect("infer", InferStage(), pause=pause),
        "effect-postprocess": Effect("postprocess", PostprocessStage()),
    }


def main() -> None:
    services = build_services(Settings())
    for name, stage in stages().items():
        services.jobs.stages.register(name, stage)
    services.metering.start()  # the usage journal's applier, as in a serving process
    asyncio.run(services.job_runner.run())


if __name__ == "__main__":
    main()
