"""Shared-memory segments handed to a worker by file descriptor, never by name.

A segment is an anonymous memory file (``memfd_create``): it has no name in
``/dev/shm``, so a worker reaches only the segments its host passes it over the
control socket (``SCM_RIGHTS``), whatever its mount namespace, and no segment outlives
the last process that maps it (nothing to unlink after a crash).
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os

_ids = itertools.count(1)


class Segment:
    """One mapped segment; ``name`` identifies it in control messages."""

    def __init__(self, fd: int, size: int, name: str) -> None:
        self.fd = fd
        self.size = size
        self.name = name
        self._map: mmap.mmap | None = mmap.mmap(fd, size) if size else None

    @classmethod
    def create(cls, size: int) -> Segment:
        """A new segment of ``size`` bytes (the host's side)."""
        name = f"seg-{os.getpid()}-{next(_ids)}"
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            return cls(fd, size, name)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, fd: int, name: str) -> Segment:
        """Map the segment the host passed as ``fd`` (the worker's side); the descriptor
        is closed once mapped."""
        try:
            segment = cls(fd, os.fstat(fd).st_size, name)
        finally:
            os.close(fd)
        segment.fd = -1
        return segment

    @property
    def buf(self) -> memoryview | None:
        return None if self._map is None else memoryview(self._map)

    def close(self) -> None:
        """Unmap it and close the descriptor (a no-op the second time)."""
        mapped, self._map = self._map, None
        if mapped is not None:
            # A view still held elsewhere keeps the mapping until it goes.
            with contextlib.suppress(BufferError):
                mapped.close()
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
