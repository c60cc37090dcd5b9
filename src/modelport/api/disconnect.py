"""Cancel a call whose caller hung up while it ran.

A server tells the application that its client went away only through ``receive``:
once the request body is read, the next ``receive`` returns ``http.disconnect`` when
the connection closes. Nothing calls it while a call runs, so without a watcher a
call whose caller is gone runs to the end and is metered as answered.

``CallerWatch`` awaits ``receive`` in a task of its own beside the call and cancels
the call's task when the caller disconnects. The cancellation is the ordinary one:
a request still queued leaves its batch queue and never runs, the answer of one
already executing is discarded, the meter settles the call ``cancelled`` (billed as
its price rule says for cancelled work), and the limit slots are given back. The
surface then catches the cancellation (``caller_gone``) and answers nobody.

A task per call cost more than the rest of the lane for the short calls that
dominate inference traffic, so a call is only registered at first (a dict entry);
one task per event loop starts the watch of each call still running after
``WATCH_AFTER`` seconds. A server's disconnect is sticky (every later ``receive``
reports it), so a caller that left earlier is noticed as soon as its watch starts:
a hang-up cancels the call within ``2 * WATCH_AFTER`` of its start, or at once after.
"""

from __future__ import annotations

import asyncio

from starlette.types import Receive

CLIENT_CLOSED = 499
"""The status recorded (audit, logs) for a call whose caller hung up: nobody reads it."""

WATCH_AFTER = 0.05
"""Seconds a call runs before its connection is watched."""


class CallerWatch:
    """Cancels the task that made it when the caller disconnects; ``stop`` before the
    answer is written (writing it completes the request, which ``receive`` also reports
    as a disconnect)."""

    __slots__ = ("_call", "_pending", "_receive", "_stopped", "_watcher", "gone")

    def __init__(self, receive: Receive) -> None:
        call = asyncio.current_task()
        assert call is not None, "a CallerWatch needs a running task"
        self._call = call
        self._receive = receive
        self._stopped = False
        self._watcher: asyncio.Task[None] | None = None
        self.gone = False
        """True once the caller disconnected and the call was cancelled for it."""
        self._pending = _pending_calls()
        self._pending.add(self)

    def _start(self) -> None:
        """Start watching (the call has run for ``WATCH_AFTER``)."""
        if not self._stopped:
            self._watcher = self._pending.loop.create_task(self._watch())

    async def _watch(self) -> None:
        try:
            while (await self._receive())["type"] != "http.disconnect":
                if self._stopped:
                    return
        except Exception:  # the server's or a middleware's refusal: not ours to judge
            return
        if not self._stopped:
            self.gone = True
            self._call.cancel("the caller disconnected")

    def stop(self) -> None:
        """The call is over: stop watching (idempotent)."""
        self._stopped = True
        if self._watcher is None:
            self._pending.calls.pop(self, None)
        else:
            self._watcher.cancel()

    def caller_gone(self) -> bool:
        """In an ``except CancelledError``: True when this watch cancelled the call, and
        then the cancellation is taken back, so the surface can finish quietly; False
        for any other cancellation (server shutdown), which must propagate."""
        self.stop()
        if not self.gone:
            return False
        self._call.uncancel()
        return True


class _PendingCalls:
    """The calls of one event loop not watched yet, and the task that starts their
    watches; it exits once a look finds none and none registered since the last."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.calls: dict[CallerWatch, float] = {}
        self.added = 0
        self._starter: asyncio.Task[None] | None = None

    def add(self, watch: CallerWatch) -> None:
        self.calls[watch] = self.loop.time()
        self.added += 1
        if self._starter is None:
            self._starter = self.loop.create_task(self._start_due(), name="caller-watch")

    async def _start_due(self) -> None:
        try:
            seen = -1
            while self.calls or self.added != seen:
                seen = self.added
                await asyncio.sleep(WATCH_AFTER)
                now = self.loop.time()
                for watch, since in list(self.calls.items()):
                    if now - since >= WATCH_AFTER:
                        del self.calls[watch]
                        watch._start()
        finally:
            self._starter = None


_pending: _PendingCalls | None = None


def _pending_calls() -> _PendingCalls:
    global _pending
    loop = asyncio.get_running_loop()
    if _pending is None or _pending.loop is not loop:
        _pending = _PendingCalls(loop)  # one per process, but tests run several loops
    return _pending
