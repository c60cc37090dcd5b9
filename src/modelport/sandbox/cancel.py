"""A cancellation that crosses threads: set once, from any thread, it runs what was hooked
to it at that moment (killing a sandboxed child), and the work that holds it checks it
before each step that must not happen once cancelled.

``settle`` is the work's point of no return: from there on ``cancel`` is refused (it
answers False) and the work ends as it would have; before it, ``settle`` raises
``Cancelled``. So a cancelled piece of work either records nothing or finishes whole.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Cancelled(Exception):
    """The work was cancelled before its point of no return; it recorded nothing."""


class Cancellation:
    """See the module docstring. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._settled = False
        self._hooks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> bool:
        """Cancel the work and run its hooks (here, on the caller's thread); False when
        it had passed its point of no return already (nothing done)."""
        with self._lock:
            if self._settled:
                return False
            first = not self._cancelled
            self._cancelled = True
            hooks = list(self._hooks.values()) if first else []
        for hook in hooks:
            hook()
        return True

    def check(self) -> None:
        """``Cancelled`` if the work was cancelled."""
        if self._cancelled:
            raise Cancelled("cancelled")

    def settle(self) -> None:
        """The point of no return: ``Cancelled`` if cancelled already, else no later
        ``cancel`` takes effect."""
        with self._lock:
            if self._cancelled:
                raise Cancelled("cancelled")
            self._settled = True

    @contextmanager
    def hooked(self, hook: Callable[[], None]) -> Iterator[None]:
        """Run ``hook`` if the work is cancelled while in this block (at once if it was
        cancelled already)."""
        with self._lock:
            key = next(self._ids)
            self._hooks[key] = hook
            already = self._cancelled
        try:
            if already:
                hook()
            yield
        finally:
            with self._lock:
                self._hooks.pop(key, None)
