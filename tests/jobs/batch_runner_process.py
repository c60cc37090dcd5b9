"""A process that only runs jobs, for the test that kills one in the middle of a tensor
batch: each shard whose call answered is noted in the effects file (``shard <position>
<pid>``) before its checkpoint.

Run as ``python -m tests.jobs.batch_runner_process``; settings from ``MODELPORT_*``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from types import FrameType

from modelport.app import build_services
from modelport.config import Settings
from modelport.jobs.tensor_batch import TensorShardStage


def main() -> None:
    services = build_services(Settings())
    effects = Path(os.environ.get("JOBS_TEST_EFFECTS", os.devnull))

    def note(_: str, position: int) -> None:
        with effects.open("a") as out:
            out.write(f"shard {position} {os.getpid()}\n")
            out.flush()
            os.fsync(out.fileno())

    stage = TensorShardStage(services.database, now=services.clock.now, on_shard_run=note)
    services.jobs.stages.register("tensor_shards", stage)
    services.metering.start()  # the usage journal's applier, as in a serving process
    # SIGTERM stops it as a serving process stops: what it metered is delivered first.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        asyncio.run(services.job_runner.run())
    except KeyboardInterrupt:
        pass
    finally:
        services.close()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    main()
