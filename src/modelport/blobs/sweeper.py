"""The periodic removal of expired uploads, run beside the HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import anyio.to_thread

from modelport.blobs.uploads import UploadService
from modelport.logs import log_event

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def periodic_upload_sweep(
    uploads: UploadService, interval_seconds: float
) -> AsyncIterator[None]:
    """Call ``uploads.sweep_expired()`` every ``interval_seconds`` while the context is open."""

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval_seconds)
            try:
                removed = await anyio.to_thread.run_sync(uploads.sweep_expired)
                log_event(
                    log,
                    "uploads.swept",
                    level=logging.INFO if removed else logging.DEBUG,
                    removed=removed,
                )
            except Exception:  # a failed sweep is retried next time; never kill the server
                log.exception("sweeping expired uploads failed")

    task = asyncio.create_task(loop(), name="upload-sweeper")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
