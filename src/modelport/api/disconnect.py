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
"""

from __future__ import annotations

import asyncio

from starlette.types import Receive

CLIENT_CLOSED = 499
"""The status recorded (audit, logs) for a call whose caller hung up: nobody reads it."""


class CallerWatch:
    """Cancels the task that made it when the caller disconnects; ``stop`` before the
    answer is written (writing it completes the request, which ``receive`` also reports
    as a disconnect)."""

    __slots__ = ("_call", "_stopped", "_watcher", "gone")

    def __init__(self, receive: Receive) -> None:
        call = asyncio.current_task()
        assert call is not None, "a CallerWatch needs a running task"
        self._call = call
        self._stopped = False
        self.gone = False
        """True once the caller disconnected and the call was cancelled for it."""
        self._watcher = asyncio.get_running_loop().create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        try:
            while (await receive())["type"] != "http.disconnect":
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
