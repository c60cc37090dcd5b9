"""Version validation in a subprocess (to be implemented)."""

from __future__ import annotations

from pathlib import Path

from modelport.blobs import BlobStore


class SubprocessValidator:
    def __init__(
        self, blobs: BlobStore, *, work_dir: Path, timeout_seconds: float, memory_bytes: int
    ) -> None:
        self.blobs = blobs
        self.work_dir = work_dir
        self.timeout_seconds = timeout_seconds
        self.memory_bytes = memory_bytes
