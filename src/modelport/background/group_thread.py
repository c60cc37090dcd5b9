"""One worker thread, started on demand, that takes what callers queued a batch at a time.

The group commit of settlements, the group reservation of priced calls and the group
admission of limited calls share this shape: a call on an event loop queues a job and
awaits its own future; one thread takes everything queued (up to ``max_batch``), does
the whole batch's I/O at once, and answers each event loop once for the batch
(``answer_loops``). While a batch runs the next gathers, so under load one round trip
carries many calls, and a lone call waits only for its own. The thread starts with the
first job and ends after ``idle_seconds`` without one (and starts again when needed).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

J = TypeVar("J")
T = TypeVar("T")


class GroupThread(Generic[J]):
    """Queues jobs; a thread of its own hands them to ``_process`` in batches.

    Subclasses implement ``_process``; their public methods queue with ``_put``."""

    def __init__(self, name: str, *, max_batch: int = 512, idle_seconds: float = 5.0) -> None:
        self._name = name
        self._max_batch = max_batch
        self._idle = idle_seconds
        self._queue: deque[J] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._running = False
        self._closed = False

    @property
    def pending(self) -> int:
        """Jobs queued and not yet taken by the thread."""
        return len(self._queue)

    @property
    def running(self) -> bool:
        """Whether the thread is alive (it ends when idle)."""
        return self._running

    def _put(self, job: J) -> None:
        """Queue ``job`` (``RuntimeError`` once closed), starting the thread if needed."""
        with self._ready:
            if self._closed:
                raise RuntimeError(f"{self._name} is closed")
            self._queue.append(job)
            if self._running:
                self._ready.notify()
            else:
                self._running = True
                threading.Thread(target=self._run, name=self._name, daemon=True).start()

    def _close(self) -> None:
        """Refuse new jobs; the thread ends once it has processed the queued ones."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._queue and not self._closed:
                    self._ready.wait(self._idle)
                if not self._queue:
                    self._running = False
                    return
                count = min(len(self._queue), self._max_batch)
                batch = [self._queue.popleft() for _ in range(count)]
            self._process(batch)

    def _process(self, batch: list[J]) -> None:
        raise NotImplementedError


def answer_loops(
    answers: Iterable[tuple[asyncio.Future[T], T | BaseException]],
    unclaimed: Callable[[T], None] | None = None,
) -> None:
    """From the worker thread: give each future its answer (a result, or an exception to
    raise), one ``call_soon_threadsafe`` per event loop. A result nobody takes any more
    (its caller was cancelled, or its loop has closed) goes to ``unclaimed``, so that
    what it holds (a reservation, a concurrency slot) can be given back."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[T], T | BaseException]]]
    by_loop = {}
    for future, answer in answers:
        by_loop.setdefault(future.get_loop(), []).append((future, answer))
    for loop, theirs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, theirs, unclaimed)
        except RuntimeError:  # a closed loop: nobody left to answer
            for _, answer in theirs:
                if unclaimed is not None and not isinstance(answer, BaseException):
                    unclaimed(answer)


async def await_answer(future: asyncio.Future[T], unclaimed: Callable[[T], None]) -> T:
    """Await a future ``answer_loops`` resolves. Cancelled after its answer came but
    before this task resumed, the result goes to ``unclaimed`` (cancelled before it
    came, ``answer_loops`` hands it there itself)."""
    try:
        return await future
    except asyncio.CancelledError:
        if future.done() and not future.cancelled() and future.exception() is None:
            unclaimed(future.result())
        raise


def _resolve(
    done: list[tuple[asyncio.Future[T], T | BaseException]],
    unclaimed: Callable[[T], None] | None,
) -> None:
    for future, answer in done:
        if future.done():  # its caller was cancelled
            if unclaimed is not None and not isinstance(answer, BaseException):
                unclaimed(answer)
        elif isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)
