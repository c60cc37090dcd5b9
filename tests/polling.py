"""Waiting, in tests, for what another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], seconds: float = 60.0) -> bool:
    """Whether ``check`` came true within ``seconds`` (polled every 10 ms)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
