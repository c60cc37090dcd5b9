"""The periodic removal of expired uploads, run beside the HTTP server."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio.to_thread

from modelport.background.loops import BackgroundTask
from modelport.blobs.uploads import UploadService
from modelport.logs import log_event

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def periodic_upload_sweep(
    uploads: UploadService, interval_seconds: float
) -> AsyncIterator[None]:
    """Call ``uploads.sweep_expired()`` every ``interval_seconds`` while the context is
    open (a failed sweep is logged and tried again; it never ends the server)."""

    async def sweep() -> None:
        removed = await anyio.to_thread.run_sync(uploads.sweep_expired)
        log_event(
            log,
            "uploads.swept",
            level=logging.INFO if removed else logging.DEBUG,
            removed=removed,
        )

    sweeper = BackgroundTask(
        "upload-sweeper",
        sweep,
        interval_seconds,
        first_after=interval_seconds,
        failure="sweeping expired uploads failed",
    )
    async with sweeper.running():
        yield
