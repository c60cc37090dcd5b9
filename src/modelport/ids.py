"""Cheap unique ids for the request path: request ids, prediction ids, leases.

``unique_id()`` is 32 lowercase hex characters, like ``uuid4().hex``: a random
64-bit prefix drawn once per process (and again in a forked child) followed by
a 64-bit counter. Ids are unique across processes (by the prefix) and within
one (by the counter), but they are not secrets: never use one as a capability.

Why not ``uuid4``: it reads the kernel's random source for every id, and that
read releases the GIL; on a busy event loop each such release can wait behind
the executor threads for the interpreter's switch interval.
"""

from __future__ import annotations

import itertools
import os
import secrets

_prefix = ""
_counter: itertools.count[int] = itertools.count()


def _reseed() -> None:
    global _prefix, _counter
    _prefix = secrets.token_hex(8)
    _counter = itertools.count()


_reseed()
os.register_at_fork(after_in_child=_reseed)


def unique_id() -> str:
    """A new id, unique across processes; 32 lowercase hex characters."""
    # next() on itertools.count is atomic under the GIL: threads never share a value.
    return f"{_prefix}{next(_counter):016x}"
